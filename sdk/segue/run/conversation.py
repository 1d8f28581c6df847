"""Assembling what goes in front of the model: validated history, the user message, usage arithmetic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from segue.errors import InputError
from segue.generated import Message, TextBlock, ToolCallBlock, ToolResultBlock, Usage
from segue.wire.history import ACCEPTED, history_messages


def as_history(history: Any) -> list[Message]:
    """Canonical messages from segue Messages, their JSON, or the vendor SDKs' own message shapes (segue.wire.history);
    after conversion they must alternate user / assistant."""
    if history is None:
        return []
    if isinstance(history, str | bytes) or not isinstance(history, Sequence):
        raise InputError(f"history must be a list of messages, got {type(history).__name__}; {ACCEPTED}")
    messages, starts = history_messages(history)
    check_alternation(messages, "history", positions=starts)
    return messages


def check_alternation(messages: Sequence[Message], what: str, positions: Sequence[int] | None = None) -> None:
    """user, then assistant (with optional tool turns between assistant turns), then user, ...

    ``positions``: where each message started in what the caller passed (several items may make one message), so
    errors name the caller's index."""
    at = list(positions) if positions is not None else list(range(len(messages)))
    previous: str | None = None
    for i, m in enumerate(messages):
        name = f"{what}[{at[i]}]"
        if m.role == "system":
            raise InputError(f"{name} has role 'system'; put system text in the agent's prompt instead")
        if not m.content:
            raise InputError(f"{name} ({m.role}) has no content blocks")
        expected = {None: {"user"}, "user": {"assistant"}, "assistant": {"user", "tool"}, "tool": {"assistant"}}
        if m.role not in expected[previous]:
            raise InputError(
                f"{name} is a {m.role} message after "
                f"{'the start' if previous is None else 'a ' + previous + ' message'}; "
                f"{what} must alternate user / assistant, starting with user"
            )
        if m.role == "tool":
            calls = {b.id for b in messages[i - 1].content if isinstance(b, ToolCallBlock)}
            results = {b.tool_call_id for b in m.content if isinstance(b, ToolResultBlock)}
            if results != calls:
                raise InputError(f"{name} answers tool calls {sorted(results)} but {sorted(calls)} were made")
        previous = m.role
    # It may end with tool results: the new input then follows them in the same turn, as a fork's sub-task follows
    # its caller's messages (segue.run.subrun); every wire sends a user message after tool results.
    if previous not in (None, "assistant", "tool"):
        raise InputError(
            f"{what} must end with an assistant message (or its tool results); the new input is the next user turn"
        )


def user_message(text: str) -> Message:
    return Message(role="user", content=[TextBlock(text=text)])


def answer_text(message: Message) -> str:
    return "".join(b.text for b in message.content if isinstance(b, TextBlock))


def tool_calls(message: Message) -> list[ToolCallBlock]:
    return [b for b in message.content if isinstance(b, ToolCallBlock)]


def add_usage(a: Usage, b: Usage) -> Usage:
    """Sum; a cache field stays None (unknown) only while every part is unknown. Per-TTL writes add up per TTL."""

    def opt(x: int | None, y: int | None) -> int | None:
        return None if x is None and y is None else (x or 0) + (y or 0)

    def per_ttl(x: Mapping[str, int] | None, y: Mapping[str, int] | None) -> dict[str, int] | None:
        if x is None and y is None:
            return None
        total = dict(x or {})
        for ttl, tokens in (y or {}).items():
            total[ttl] = total.get(ttl, 0) + tokens
        return total

    return Usage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cache_read_tokens=opt(a.cache_read_tokens, b.cache_read_tokens),
        cache_write_tokens=opt(a.cache_write_tokens, b.cache_write_tokens),
        cache_write_tokens_by_ttl=per_ttl(a.cache_write_tokens_by_ttl, b.cache_write_tokens_by_ttl),
        reasoning_tokens=opt(a.reasoning_tokens, b.reasoning_tokens),
        # each compaction stays its own entry: a run's usage lists every compaction its calls made
        compaction_iterations=[*(a.compaction_iterations or ()), *(b.compaction_iterations or ())] or None,
    )


ZERO_USAGE = Usage(input_tokens=0, output_tokens=0)
