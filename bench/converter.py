"""Benchmark: the generated cattrs converter vs hand-written to/from-dict code for the same attrs classes.

A 200-message conversation (text, tool calls, tool results, reasoning) is structured into attrs objects and
unstructured back to dicts, both ways, in the same run. The printed ratio is converter time / hand-written time
(target <= 3x). Run: python bench/converter.py

Both paths construct the generated classes, which check their own fields when constructed (segue._support.checks,
issue 42): that cost is in both times. Measured beside it with attrs' validators switched off
(`attrs.validators.set_disabled`), which is what the figures were before the classes checked their fields, and
the checks' own cost per conversation (on minus off, through the converter).
"""

from __future__ import annotations

import timeit
from typing import Any

import attrs

from segue.generated import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    get_converter,
)


def conversation(n_messages: int = 200) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    i = 0
    while len(messages) < n_messages:
        messages.append({"role": "user", "content": [{"type": "text", "text": f"Question {i}: revenue per month?"}]})
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "reasoning",
                        "vendor": "anthropic",
                        "model": "claude-sonnet-4-6",
                        "format": "anthropic.thinking",
                        "text": "I should query the orders table.",
                        "signature": "c2ln" * 20,
                    },
                    {
                        "type": "tool_call",
                        "id": f"call_{i}",
                        "name": "run_query",
                        "arguments": {"sql": "SELECT month, SUM(total) FROM orders GROUP BY month"},
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "tool",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_call_id": f"call_{i}",
                        "content": '[{"month": "2025-01", "total": 1234.5}]',
                    }
                ],
            }
        )
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "January: $1,234.50."}]})
        i += 1
    return messages[:n_messages]


# Hand-written equivalents: what a careful developer would write without a converter.
def block_from_dict(d: dict[str, Any]) -> ContentBlock:
    t = d["type"]
    if t == "text":
        return TextBlock(text=d["text"])
    if t == "tool_call":
        return ToolCallBlock(id=d["id"], name=d["name"], arguments=dict(d["arguments"]))
    if t == "tool_result":
        return ToolResultBlock(tool_call_id=d["tool_call_id"], content=d["content"], is_error=d.get("is_error"))
    if t == "reasoning":
        return ReasoningBlock(
            vendor=d["vendor"],
            model=d.get("model"),
            format=d["format"],
            text=d.get("text"),
            signature=d.get("signature"),
        )
    raise ValueError(t)


def block_to_dict(b: ContentBlock) -> dict[str, Any]:
    if isinstance(b, TextBlock):
        return {"type": "text", "text": b.text}
    if isinstance(b, ToolCallBlock):
        return {"type": "tool_call", "id": b.id, "name": b.name, "arguments": dict(b.arguments)}
    if isinstance(b, ToolResultBlock):
        out: dict[str, Any] = {"type": "tool_result", "tool_call_id": b.tool_call_id, "content": b.content}
        if b.is_error is not None:
            out["is_error"] = b.is_error
        return out
    if isinstance(b, ReasoningBlock):
        r: dict[str, Any] = {"type": "reasoning", "vendor": b.vendor, "format": b.format}
        for key in ("model", "text", "signature"):
            if getattr(b, key) is not None:
                r[key] = getattr(b, key)
        return r
    raise TypeError(b)


def by_hand(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    messages = [Message(role=m["role"], content=[block_from_dict(b) for b in m["content"]]) for m in data]
    return [{"role": m.role, "content": [block_to_dict(b) for b in m.content]} for m in messages]


def by_converter(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    conv = get_converter()
    messages = conv.structure(data, list[Message])
    result: list[dict[str, Any]] = conv.unstructure(messages, list[Message])
    return result


def timed(data: list[dict[str, Any]]) -> tuple[float, float]:
    """Seconds per round trip: by hand, through the converter (the best of 5 repeats of 30 rounds each)."""
    rounds = 30
    hand = min(timeit.repeat(lambda: by_hand(data), number=rounds, repeat=5)) / rounds
    conv = min(timeit.repeat(lambda: by_converter(data), number=rounds, repeat=5)) / rounds
    return hand, conv


def main() -> None:
    data = conversation()
    assert by_hand(data) == data and by_converter(data) == data, "both paths must round-trip exactly"
    hand, conv = timed(data)
    attrs.validators.set_disabled(True)
    try:
        hand_off, conv_off = timed(data)
    finally:
        attrs.validators.set_disabled(False)
    print("structure + unstructure of a 200-message conversation")
    print(f"  hand-written: {hand * 1e3:8.3f} ms   (field checks off: {hand_off * 1e3:.3f} ms)")
    print(f"  converter:    {conv * 1e3:8.3f} ms   (field checks off: {conv_off * 1e3:.3f} ms)")
    print(f"  ratio converter / hand-written: {conv / hand:.2f}x (target <= 3x)")
    print(
        f"  with the field checks off:      {conv_off / hand_off:.2f}x (the figure before the classes checked fields)"
    )
    print(f"  the field checks' own cost:     {(conv - conv_off) * 1e3:.3f} ms a conversation")


if __name__ == "__main__":
    main()
