"""Stream assembly: vendor stream events in, StreamDeltas out, and at the end the vendor's own non-streamed JSON.

Each assembler rebuilds exactly the response body the vendor would have returned without streaming, and the
driver parses it with the same function as a non-streamed call, so the final message of a stream equals the
non-streamed one by construction. Events arrive as dicts (the SDK's event models via `to_dict()`), keeping
fields the SDK does not model (`input_transformations`, `reasoning_content`, `reasoning_details`, `timings`).

A malformed event, an event out of order, or a stream that ends before its terminal event raises
MalformedResponseError naming what was wrong; drivers report it as ProviderError(kind="stream").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from segue._core.contracts import StreamDelta
from segue.errors import ProviderError
from segue.generated.wire import anthropic, openai_chat, openai_responses
from segue.wire.common import MalformedResponseError, Unknown, loads_arguments

__all__ = ["AnthropicStream", "ChatStream", "ResponsesStream"]


def _text(text: str) -> StreamDelta:
    return StreamDelta(kind="text", text=text)


def _reasoning(text: str) -> StreamDelta:
    return StreamDelta(kind="reasoning", text=text)


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

    def __attrs_post_init__(self) -> None:
        if self.start.tool_use:
            self.partial_json = ""

    def feed(self, delta: Any) -> list[StreamDelta]:
        if isinstance(delta, anthropic.TextDelta):
            self.text = (self.text if self.text is not None else self.start.text or "") + delta.text
            return [_text(delta.text)]
        if isinstance(delta, anthropic.ThinkingDelta):
            self.thinking = (self.thinking if self.thinking is not None else self.start.thinking or "") + delta.thinking
            return [_reasoning(delta.thinking)]
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
        )


class AnthropicStream:
    """Messages API server-sent events -> the Message JSON."""

    def __init__(self) -> None:
        self.start: dict[str, Any] | None = None  # message_start's message
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.transformations: list[Any] | None = None
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
        )


@attrs.define
class _Call:
    """A Chat Completions tool call being streamed."""

    id: str | None = None
    name: str | None = None
    arguments: str | None = None


class ChatStream:
    """Chat Completions chunks -> the ChatCompletion JSON (OpenAI, vLLM, llama.cpp, OpenRouter...)."""

    def __init__(self) -> None:
        self.head: openai_chat.Chunk | None = None
        self.content: str | None = None
        self.reasoning: str | None = None
        self.reasoning_content: str | None = None
        self.details: dict[int, dict[str, Any]] = {}
        self.calls: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.timings: dict[str, Any] | None = None

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamDelta]:
        c = openai_chat.parse_chunk(chunk)
        if self.head is None:
            self.head = c
        self.usage = c.usage if c.usage is not None else self.usage
        self.timings = c.timings if c.timings is not None else self.timings
        out: list[StreamDelta] = []
        for choice in c.choices or []:
            if choice.index != 0:
                continue
            if choice.finish_reason is not None:
                self.finish_reason = choice.finish_reason
            if choice.delta is not None:
                out += self._delta(choice.delta)
        return out

    def _delta(self, delta: openai_chat.Delta) -> list[StreamDelta]:
        out: list[StreamDelta] = []
        if isinstance(delta.reasoning, str) and delta.reasoning:
            self.reasoning = (self.reasoning or "") + delta.reasoning
            out.append(_reasoning(delta.reasoning))
        if isinstance(delta.reasoning_content, str) and delta.reasoning_content:
            self.reasoning_content = (self.reasoning_content or "") + delta.reasoning_content
            out.append(_reasoning(delta.reasoning_content))
        plain = bool(out)
        for piece in delta.reasoning_details or []:
            slot = self.details.setdefault(piece.index if piece.index is not None else len(self.details), {})
            for k, v in piece.entry.items():
                if k in openai_chat.DETAIL_TEXT_KEYS and isinstance(v, str):
                    slot[k] = slot.get(k, "") + v
                elif v is not None or k not in slot:
                    slot[k] = v
            text = piece.text or piece.summary
            if isinstance(text, str) and text and not plain:
                out.append(_reasoning(text))
        if isinstance(delta.content, str) and delta.content:
            self.content = (self.content or "") + delta.content
            out.append(_text(delta.content))
        for call_piece in delta.tool_calls or []:
            call = self.calls.setdefault(call_piece.index, _Call())
            call.id = call_piece.id or call.id
            call.name = call_piece.name or call.name
            if isinstance(call_piece.arguments, str):
                call.arguments = (call.arguments or "") + call_piece.arguments
                if call_piece.arguments:
                    out.append(
                        StreamDelta(
                            kind="tool_call", text=call_piece.arguments, tool_call_id=call.id, tool_name=call.name
                        )
                    )
        return out

    def result(self) -> dict[str, Any]:
        if self.head is None or self.finish_reason is None:
            raise MalformedResponseError("chat stream ended before a finish_reason (connection cut or truncated)")
        calls = [self.calls[i] for i in sorted(self.calls)]
        message = openai_chat.streamed_message(
            content=self.content,
            reasoning=self.reasoning,
            reasoning_content=self.reasoning_content,
            reasoning_details=[self.details[i] for i in sorted(self.details)] or None,
            tool_calls=[openai_chat.streamed_tool_call(id=c.id, name=c.name, arguments=c.arguments) for c in calls]
            or None,
        )
        head = self.head
        return openai_chat.streamed_completion(
            id=head.id,
            created=head.created,
            model=head.model,
            system_fingerprint=head.system_fingerprint,
            message=message,
            finish_reason=self.finish_reason,
            usage=self.usage,
            timings=self.timings,
        )


class ResponsesStream:
    """Responses API events -> the Response JSON (taken from the terminal event, items from output_item.done)."""

    def __init__(self) -> None:
        self.calls: dict[str, tuple[str | None, str | None]] = {}  # item id -> (call_id, name)
        self.items: dict[int, dict[str, Any]] = {}
        self.final: openai_responses.Completed | openai_responses.Incomplete | None = None

    def feed(self, event: Mapping[str, Any]) -> list[StreamDelta]:
        e = openai_responses.parse_stream_event(event)
        if isinstance(e, openai_responses.TextDelta):
            return [_text(e.delta)]
        if isinstance(e, openai_responses.ReasoningSummaryDelta | openai_responses.ReasoningTextDelta):
            return [_reasoning(e.delta)]
        if isinstance(e, openai_responses.ArgumentsDelta):
            call_id, name = self.calls.get(str(e.item_id), (None, None))
            return [StreamDelta(kind="tool_call", text=e.delta, tool_call_id=call_id, tool_name=name)]
        if isinstance(e, openai_responses.ItemAdded) and e.function_call:
            self.calls[str(e.item_id)] = (e.call_id, e.name)
        elif isinstance(e, openai_responses.ItemDone):
            # The copy in the added event may be incomplete (e.g. encrypted_content): keep the finished one.
            self.items[e.output_index] = e.item
        elif isinstance(e, openai_responses.Completed | openai_responses.Incomplete):
            self.final = e
        elif isinstance(e, openai_responses.Failed | openai_responses.ErrorEvent):
            message = e.message or f"the response failed ({e.code})"
            raise ProviderError(
                f"openai stream failed: {message}",
                vendor="openai",
                kind=openai_responses.FAILED_KIND.get(str(e.code), "server"),
                vendor_message=message,
            )
        return []

    def result(self) -> dict[str, Any]:
        if self.final is None:
            raise MalformedResponseError("openai stream ended before response.completed (connection cut or truncated)")
        items = [self.items[i] for i in sorted(self.items)]
        if self.final.output is None and not items:
            raise MalformedResponseError("openai stream's terminal response has no output items")
        output = items if not self.final.output and items else None
        return openai_responses.streamed_response(response=self.final.response, output=output)
