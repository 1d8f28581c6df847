"""Anthropic's stream assembly: Messages stream events in, StreamDeltas out, and at the end the Message JSON.

Each assembler rebuilds exactly the response body the vendor would have returned without streaming, and the
driver parses it with the same function as a non-streamed call, so the final message of a stream equals the
non-streamed one by construction. Events arrive as dicts (the SDK's event models via `to_dict()`).

A malformed event, an event out of order, or a stream that ends before its terminal event raises
MalformedResponseError naming what was wrong; drivers report it as ProviderError(kind="stream").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from segue._core.contracts import StreamDelta
from segue._support.readers import Unknown, loads_arguments
from segue.errors import MalformedResponseError
from segue.generated.wire import anthropic
from segue.wire.common import reasoning_delta, text_delta

__all__ = ["AnthropicStream"]


@attrs.define
class _Block:
    """One Messages API content block being streamed: its start event and what the deltas added."""

    start: anthropic.BlockStart
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    partial_json: str | None = None  # a tool_use's arguments so far; None for other blocks and once finished
    input: dict[str, Any] | None = None
    citations: list[Any] | None = None
    summary: str | None = None  # a compaction block's content so far
    encrypted_content: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.start.tool_use:
            self.partial_json = ""

    def feed(self, delta: Any) -> list[StreamDelta]:
        if isinstance(delta, anthropic.TextDelta):
            self.text = (self.text if self.text is not None else self.start.text or "") + delta.text
            return [text_delta(delta.text)]
        if isinstance(delta, anthropic.ThinkingDelta):
            self.thinking = (self.thinking if self.thinking is not None else self.start.thinking or "") + delta.thinking
            return [reasoning_delta(delta.thinking)]
        if isinstance(delta, anthropic.SignatureDelta):
            self.signature = delta.signature
        elif isinstance(delta, anthropic.InputJsonDelta):
            if self.partial_json is None:
                raise MalformedResponseError(
                    f"anthropic stream: tool arguments for block {self.start.index}, which is not a tool call"
                )
            self.partial_json += delta.partial_json
            return [
                StreamDelta(
                    kind="tool_call", text=delta.partial_json, tool_call_id=self.start.id, tool_name=self.start.name
                )
            ]
        elif isinstance(delta, anthropic.CitationsDelta):
            self.citations = [*(self.citations or self.start.citations or []), delta.citation]
        elif isinstance(delta, anthropic.CompactionDelta):
            if delta.content is not None:
                self.summary = (self.summary or "") + delta.content
            if delta.encrypted_content is not None:
                self.encrypted_content = delta.encrypted_content
        return []  # a delta type the API may add later

    def finish(self) -> None:
        if self.partial_json is not None:
            where = f"anthropic stream tool call {self.start.name!r} ({self.start.id})"
            self.input = (
                loads_arguments(self.partial_json, where) if self.partial_json else dict(self.start.input or {})
            )
            self.partial_json = None

    def body(self) -> dict[str, Any]:
        self.finish()
        return anthropic.streamed_block(
            start=self.start.block,
            text=self.text,
            thinking=self.thinking,
            signature=self.signature,
            input=self.input,
            citations=self.citations,
            summary=self.summary,
            encrypted_content=self.encrypted_content,
        )


class AnthropicStream:
    """Messages API server-sent events -> the Message JSON."""

    def __init__(self) -> None:
        self.start: dict[str, Any] | None = None  # message_start's message
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.transformations: list[Any] | None = None
        self.context_management: Any = None  # the applied context edits, reported on message_delta
        self.blocks: dict[int, _Block] = {}
        self.done = False

    def feed(self, event: Mapping[str, Any]) -> list[StreamDelta]:
        e = anthropic.parse_stream_event(event)
        if isinstance(e, Unknown):
            return []  # ping, and event types the API may add later
        if isinstance(e, anthropic.MessageStart):
            self.start = e.message
            self.usage = dict(e.usage or {})
            return []
        if isinstance(e, anthropic.MessageStop):
            self.done = True
            return []
        if self.start is None:
            raise MalformedResponseError(f"anthropic stream: a {type(e).__name__} event arrived before message_start")
        if isinstance(e, anthropic.MessageDelta):
            self.stop_reason = e.stop_reason if e.stop_reason is not None else self.stop_reason
            self.stop_sequence = e.stop_sequence if e.stop_sequence is not None else self.stop_sequence
            self.usage.update({k: v for k, v in (e.usage or {}).items() if v is not None})
            if e.input_transformations is not None:
                self.transformations = e.input_transformations
            if e.context_management is not None:
                self.context_management = e.context_management
            return []
        if isinstance(e, anthropic.BlockStart):
            self.blocks[e.index] = _Block(start=e)
            return []
        block = self.blocks.get(e.index)
        if block is None:
            raise MalformedResponseError(f"anthropic stream: a {type(e).__name__} for block {e.index} before its start")
        if isinstance(e, anthropic.BlockStop):
            block.finish()
            return []
        return block.feed(e.delta)

    def result(self) -> dict[str, Any]:
        if self.start is None:
            raise MalformedResponseError("anthropic stream end arrived before message_start")
        if not self.done:
            raise MalformedResponseError("anthropic stream ended before message_stop (connection cut or truncated)")
        return anthropic.streamed_message(
            start=self.start,
            content=[self.blocks[i].body() for i in sorted(self.blocks)],
            stop_reason=self.stop_reason,
            stop_sequence=self.stop_sequence,
            usage=self.usage,
            input_transformations=self.transformations,
            context_management=self.context_management,
        )
