"""The runnable examples run, offline, as the docs say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests._support.environment import REPO


def run_example(name: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / name), *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_quickstart() -> None:
    out = run_example("01_quickstart.py")
    assert "country: Germany, customers: 16" in out
    assert "tool call: run_query" in out and "tool call: list_tables" not in out


def test_headline_example(tmp_path: Path) -> None:
    out = run_example("34_run_replay.py", "--db", f"sqlite:///{tmp_path}/demo.db", "--vendor", "openai")
    assert "setting=all vendor=openai" in out and "Revenue per month in 2025" in out
    assert (tmp_path / "demo.db").exists()


def test_mcp_example() -> None:
    """Three turns with tools from the demo MCP server, restarted every turn: reasoning is kept and the cache keeps
    reading (the tool blocks stay byte-identical)."""
    out = run_example("40_mcp_tools.py")
    assert '"order_number": 1042' in out and '"status": "delivered"' in out
    assert "list_orders returned: 1042" in out
    kept = [line for line in out.splitlines() if "reasoning kept for" in line]
    assert [line.split("reasoning kept for ")[1].split(" ")[0] for line in kept] == ["0", "1", "2"]
    reads = [int(line.split("cache read ")[1].split(" ")[0]) for line in kept]
    assert reads[1] > reads[0] and reads[2] > reads[1]


def test_tracing_example() -> None:
    out = run_example("41_tracing.py")
    tree = [line for line in out.splitlines() if not line.startswith("run 2")]
    assert [line.split()[0] for line in tree if not line.startswith(" ")] == ["invoke_agent", "invoke_agent"]
    assert "  execute_tool list_tables" in tree and "  execute_tool run_query" in tree
    assert any(line.startswith("    anthropic.messages.create") for line in tree)  # the SDK's span nests in chat
    conversations = {line.rsplit("conversation ", 1)[1] for line in tree if "conversation " in line}
    assert len(conversations) == 1  # both runs carry the first run's id
