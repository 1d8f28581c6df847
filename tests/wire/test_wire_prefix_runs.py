"""Across the runs of a conversation: the next run's replayed prefix opens with the same message objects as the
one before and adds the last run, so the Anthropic wire continues the prefix it built before instead of building
every earlier run again, and the body is the one it would build from scratch."""

from __future__ import annotations

import json
from itertools import pairwise

from segue._core.contracts import REPLAYED_META_KEY, ProviderRequest, WirePrefix
from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from segue.wire.anthropic import request as anthropic

MODEL = "claude-sonnet-4-6"
THINKING = {"type": "enabled", "budget_tokens": 1024}


def run(i: int, *, answered: bool = True) -> list[Message]:
    """A replayed run: its question, thinking + a call, the result, the answer (or none: it ended on the result,
    so the next run's question joins the result's user turn on the wire)."""
    meta = {REPLAYED_META_KEY: f"run-{i}"}
    call = ToolCallBlock(id=f"toolu_{i}", name="run_query", arguments={"sql": f"SELECT {i}"})
    thinking = ReasoningBlock(vendor="anthropic", model=MODEL, format="anthropic.thinking", text=f"t{i}", signature="s")
    out = [
        Message(role="user", content=[TextBlock(text=f"question {i}")], meta=meta),
        Message(role="assistant", content=[thinking, call], meta=meta),
        Message(role="tool", content=[ToolResultBlock(tool_call_id=call.id, content=f"[[{i}]]")], meta=meta),
    ]
    return out + ([Message(role="assistant", content=[TextBlock(text=f"answer {i}")], meta=meta)] if answered else [])


def body(prefix: list[Message], memo: WirePrefix | None) -> str:
    messages = [*prefix, Message(role="user", content=[TextBlock(text="the new question")])]
    request = ProviderRequest(system="sys", messages=messages, replay_end=len(prefix) - 1, wire_prefix=memo)
    built = anthropic.build_request(request, model=MODEL, max_tokens=1024, cache_ttl="5m", thinking=THINKING)
    return json.dumps(built.body)


def test_a_later_run_continues_the_prefix_an_earlier_run_built_and_sends_the_same_body() -> None:
    prefix: list[Message] = []
    wire_messages: list[list[object]] = []  # held, so no id is reused
    for i in range(5):
        # run 2 ended without an answer: the next question goes into the open user turn of its tool result
        prefix = prefix + run(i, answered=i != 2)
        memo = WirePrefix(len(prefix))
        assert body(prefix, memo) == body(prefix, None), i
        (turns,) = [t for entries in memo._built.values() for _, t in entries]
        wire_messages.append(list(turns.sealed))
    # The wire messages of the runs before the last are the objects the previous run built: continued, not rebuilt.
    for before, now in pairwise(wire_messages):
        shared = len(before) - 1  # the previous prefix's last turn was still open, so it is built again
        assert all(a is b for a, b in zip(now[:shared], before[:shared], strict=True))
