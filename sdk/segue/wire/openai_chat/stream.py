"""Chat Completions stream assembly: chunks in, StreamDeltas out, and at the end the ChatCompletion JSON.

Chunks keep fields the SDK does not model (`reasoning_content`, `reasoning_details`, `timings`); OpenRouter's
wire streams through this assembler too (so do vLLM and llama.cpp servers).

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
from segue.errors import MalformedResponseError
from segue.generated.wire import openai_chat
from segue.wire.common import reasoning_delta, text_delta

__all__ = ["ChatStream"]


@attrs.define
class _Call:
    """A Chat Completions tool call being streamed."""

    id: str | None = None
    name: str | None = None
    arguments: str | None = None
    #: Gemini's thought signature (extra_content.google.thought_signature), kept for the call's replay.
    signature: str | None = None


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
            out.append(reasoning_delta(delta.reasoning))
        if isinstance(delta.reasoning_content, str) and delta.reasoning_content:
            self.reasoning_content = (self.reasoning_content or "") + delta.reasoning_content
            out.append(reasoning_delta(delta.reasoning_content))
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
                out.append(reasoning_delta(text))
        if isinstance(delta.content, str) and delta.content:
            self.content = (self.content or "") + delta.content
            out.append(text_delta(delta.content))
        for call_piece in delta.tool_calls or []:
            call = self.calls.setdefault(call_piece.index, _Call())
            call.id = call_piece.id or call.id
            call.name = call_piece.name or call.name
            call.signature = call_piece.signature or call.signature
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
        tool_calls = []
        for i in sorted(self.calls):
            c = self.calls[i]
            entry = openai_chat.streamed_tool_call(id=c.id, name=c.name, arguments=c.arguments)
            if c.signature is not None:
                openai_chat.thought_signature(entry, signature=c.signature)
            tool_calls.append(entry)
        message = openai_chat.streamed_message(
            content=self.content,
            reasoning=self.reasoning,
            reasoning_content=self.reasoning_content,
            reasoning_details=[self.details[i] for i in sorted(self.details)] or None,
            tool_calls=tool_calls or None,
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
