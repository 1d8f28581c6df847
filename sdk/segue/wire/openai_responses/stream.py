"""Responses API stream assembly: events in, StreamDeltas out, and at the end the Response JSON.

Each assembler rebuilds exactly the response body the vendor would have returned without streaming, and the
driver parses it with the same function as a non-streamed call, so the final message of a stream equals the
non-streamed one by construction. Events arrive as dicts (the SDK's event models via `to_dict()`).

A malformed event, an event out of order, or a stream that ends before its terminal event raises
MalformedResponseError naming what was wrong; drivers report it as ProviderError(kind="stream").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segue._core.contracts import StreamDelta
from segue.errors import MalformedResponseError, ProviderError
from segue.generated.wire import openai_responses
from segue.wire.common import reasoning_delta, text_delta

__all__ = ["ResponsesStream"]


class ResponsesStream:
    """Responses API events -> the Response JSON (taken from the terminal event, items from output_item.done)."""

    def __init__(self) -> None:
        self.calls: dict[str, tuple[str | None, str | None]] = {}  # item id -> (call_id, name)
        self.items: dict[int, dict[str, Any]] = {}
        self.final: openai_responses.Completed | openai_responses.Incomplete | None = None

    def feed(self, event: Mapping[str, Any]) -> list[StreamDelta]:
        e = openai_responses.parse_stream_event(event)
        if isinstance(e, openai_responses.TextDelta):
            return [text_delta(e.delta)]
        if isinstance(e, openai_responses.ReasoningSummaryDelta | openai_responses.ReasoningTextDelta):
            return [reasoning_delta(e.delta)]
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
