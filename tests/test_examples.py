"""The runnable examples run, offline, as the docs say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO


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
