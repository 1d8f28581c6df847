"""segue and dendrux side by side: the same 5-turn replayed database chat against the same twin on loopback.

Both run `runs=<earlier runs>, replay_last="all"` with thinking on, the same prompt, tools, questions and model
name, each against its own twin server (same rules, fresh caches). dendrux 0.4.1 is installed into its own
virtual environment on first use (skipped with a message if the registry cannot provide it). Usage is read from
the twin's own responses, so both are measured the same way; cost uses segue's catalog prices for both.
Run: python bench/peers/side_by_side.py
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import anthropic
from _peer_venv import peer_python

from segue import RunStore
from segue.catalog import Catalog
from segue.demo.chat import MODELS, PROMPT, QUESTIONS, run_chat
from segue.demo.shop_db import shop_sql
from segue.generated import Usage
from segue_twin import Twin
from segue_twin.server import TwinServer, serve

MODEL = MODELS["anthropic"]


def turn_rows(exchanges: list[Any]) -> dict[str, Any]:
    """Sum the twin's Anthropic usage over one turn's exchanges and list the tools the model called."""
    usage = {"input": 0, "read": 0, "write": 0, "output": 0}
    calls: list[str] = []
    for ex in exchanges:
        response = ex.response if isinstance(ex.response, dict) else {}
        u = response.get("usage") or {}
        read, write = u.get("cache_read_input_tokens") or 0, u.get("cache_creation_input_tokens") or 0
        usage["input"] += (u.get("input_tokens") or 0) + read + write
        usage["read"] += read
        usage["write"] += write
        usage["output"] += u.get("output_tokens") or 0
        calls += [b["name"] for b in response.get("content", []) if b.get("type") == "tool_use"]
    return {**usage, "calls": calls, "errors": sum(1 for ex in exchanges if ex.status != 200)}


def segue_side(server: TwinServer) -> list[dict[str, Any]]:
    from segue.providers import AnthropicProvider

    client = anthropic.AsyncAnthropic(api_key="side-by-side", base_url=server.url)
    rows: list[dict[str, Any]] = []
    seen = 0

    def on_turn(_: Any) -> None:
        nonlocal seen
        exchanges = list(server.twin.exchanges)
        rows.append(turn_rows(exchanges[seen:]))
        seen = len(exchanges)

    import segue.demo.chat as demo

    original = demo.make_provider
    demo.make_provider = lambda vendor, twin=None, model=None: AnthropicProvider(  # type: ignore[assignment]
        MODEL, cache_ttl="1h", thinking={"type": "enabled", "budget_tokens": 1024}, client=client
    )
    try:
        asyncio.run(run_chat("all", store=RunStore("sqlite:///:memory:"), twin=server.twin, on_turn=on_turn))
    finally:
        demo.make_provider = original
    return rows


def dendrux_side(server: TwinServer, python: Path) -> list[dict[str, Any]] | str:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(
            json.dumps(
                {
                    "prompt": PROMPT,
                    "questions": list(QUESTIONS),
                    "shop_sql": shop_sql(),
                    "model": MODEL,
                    "db_url": f"sqlite+aiosqlite:///{tmp}/dendrux.db",
                }
            )
        )
        env = {**os.environ, "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "side-by-side"}
        script = Path(__file__).resolve().parent / "_dendrux_chat.py"
        proc = subprocess.Popen(
            [str(python), str(script), str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        rows: list[dict[str, Any]] = []
        seen = 0
        assert proc.stdout is not None
        for line in proc.stdout:
            exchanges = list(server.twin.exchanges)
            row = turn_rows(exchanges[seen:])
            seen = len(exchanges)
            row["status"] = json.loads(line)["status"]
            rows.append(row)
        proc.wait(timeout=120)
        if proc.returncode != 0:
            err = (proc.stderr.read() if proc.stderr else "").strip().splitlines()
            return f"dendrux failed: {err[-1] if err else proc.returncode}"
    return rows


def print_rows(name: str, rows: list[dict[str, Any]], catalog: Catalog) -> None:
    print(f"\n{name}")
    print(f"{'turn':>4} {'tool calls':<44} {'input':>7} {'read':>7} {'write':>7} {'cached':>7} {'cost $':>9}")
    total = 0.0
    for i, r in enumerate(rows, start=1):
        usage = Usage(
            input_tokens=r["input"],
            output_tokens=r["output"],
            cache_read_tokens=r["read"],
            cache_write_tokens=r["write"],
            cache_write_tokens_by_ttl={"1h": r["write"]},
        )
        cost = catalog.cost(usage, MODEL, "anthropic")
        total += cost
        share = r["read"] / r["input"] if r["input"] else 0.0
        calls = ", ".join(r["calls"]) or "-"
        print(f"{i:>4} {calls[:44]:<44} {r['input']:>7} {r['read']:>7} {r['write']:>7} {share:>7.0%} {cost:>9.5f}")
    print(f"total cost ${total:.5f}")


def main() -> None:
    import logging

    logging.getLogger("segue").setLevel(logging.ERROR)
    catalog = Catalog.load()
    with serve("127.0.0.1", 0, twin=Twin()) as server:
        print_rows(f"segue (twin at {server.url})", segue_side(server), catalog)
    python = peer_python("dendrux", "0.4.1", extras="anthropic")
    if python is None:
        print("\ndendrux: skipped (dendrux[anthropic]==0.4.1 could not be installed here)")
        return
    with serve("127.0.0.1", 0, twin=Twin()) as server:
        result = dendrux_side(server, python)
    if isinstance(result, str):
        print(f"\ndendrux 0.4.1: {result}")
    else:
        print_rows("dendrux 0.4.1 (same twin rules, its own server)", result, catalog)


if __name__ == "__main__":
    main()
