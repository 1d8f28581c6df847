"""The in-process vendor's answers for bench/replay.py, shared with bench/peers/_dendrux_overhead.py (which runs in
dendrux's own virtual environment, so this module uses the standard library only).

Per question: `calls` turns of thinking + a tool_use, then the answer, as the Messages API returns them.
"""

from __future__ import annotations

from typing import Any

SQL = "SELECT strftime('%m', placed_at) AS month, SUM(total) FROM orders"
USAGE = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}


def own_turns(body: dict[str, Any]) -> int:
    """Assistant turns in a Messages request since its question (the newest user turn of text only)."""
    own = 0
    for m in reversed(body["messages"]):
        content = m["content"]
        if m["role"] == "user" and (isinstance(content, str) or all(b["type"] == "text" for b in content)):
            break
        own += m["role"] == "assistant"
    return own


def answer(body: dict[str, Any], n: int, calls: int, model: str) -> dict[str, Any]:
    """The `n`th response of the vendor to `body`."""
    if own_turns(body) < calls:
        content: list[dict[str, Any]] = [
            {"type": "thinking", "thinking": f"Next step {n}.", "signature": f"sig-{n:06d}" * 4},
            {"type": "tool_use", "id": f"toolu_m{n}", "name": "run_query", "input": {"sql": SQL}},
        ]
        stop = "tool_use"
    else:
        content, stop = [{"type": "text", "text": f"Revenue by month, answer {n}: Jan $1,234."}], "end_turn"
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": USAGE,
    }
