"""The turn protocol between bench/peers.py and a peer script running in the peer's own virtual environment.

Standard library only (it is imported inside the peers' environments). The bench starts the script with one
argument, a JSON config file ({"thinking", "ttl", "window", "shop_db", "shop_sql", "anthropic_url",
"openai_url", "workdir"}), then writes one JSON line per turn to its stdin ({"question", "vendor", "model",
"prompt", "conversation"}) and waits for the script's answer line ({"ok": bool, "error": str | null}) before
it advances the twin's clock and sends the next turn. So the bench attributes the twin's responses to turns
and controls the time between them; the peer never needs to know the twin's clock.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Any


def config() -> dict[str, Any]:
    with open(sys.argv[1], encoding="utf-8") as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


def shop(cfg: dict[str, Any]) -> Any:
    """segue's own shop database (segue/demo/shop_db.py, standard library only) loaded by path, on its SQL."""
    spec = importlib.util.spec_from_file_location("bench_shop_db", cfg["shop_db"])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ShopDatabase(cfg["shop_sql"])


def serve(turn: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    """Answer the bench's turn lines until stdin closes: run `turn(spec)`, print {"ok", "error"}."""

    async def loop() -> None:
        for line in sys.stdin:
            if not line.strip():
                continue
            spec = json.loads(line)
            try:
                await turn(spec)
                answer: dict[str, Any] = {"ok": True, "error": None}
            except Exception as error:  # a failed turn is a result of the bench, not the end of the peer
                last = traceback.format_exception_only(type(error), error)[-1].strip()
                answer = {"ok": False, "error": last[:1000]}
            print(json.dumps(answer), flush=True)

    asyncio.run(loop())
