"""Test helpers for apps and for segue itself: a provider that answers from a script and records what it got."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import attrs

from segue._core.contracts import Provider, ProviderRequest, ProviderResponse, StreamDelta, StreamDone, StreamEvent
from segue._core.tokens import count_json
from segue.errors import ProviderError
from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock, Usage, get_converter

Reply = Message | Exception | Callable[[ProviderRequest], Message]


def text(answer: str) -> Message:
    return Message(role="assistant", content=[TextBlock(text=answer)])


def call(name: str, arguments: dict[str, Any] | None = None, *, id: str | None = None) -> Message:
    return Message(
        role="assistant", content=[ToolCallBlock(id=id or f"call_{name}", name=name, arguments=arguments or {})]
    )


@attrs.define(kw_only=True)
class ScriptedProvider(Provider):
    """Answers each call with the next scripted reply and records every request.

    Usage is estimated with segue._core.tokens over the canonical request, so token numbers are deterministic.
    When the script runs out it raises, naming how many calls were scripted. `reasoning_vendor` (default: the
    vendor) is the ReasoningBlock.vendor it takes back; its "wire" is the canonical request as is.
    """

    replies: list[Reply]
    vendor: str = "scripted"
    model: str = "scripted-1"
    requires_stable_reasoning_prefix: bool = False
    reasoning_vendor: str | None = attrs.field(default=attrs.Factory(lambda self: self.vendor, takes_self=True))
    requests: list[ProviderRequest] = attrs.field(factory=list)

    @classmethod
    def of(cls, *replies: Reply, **kwargs: Any) -> ScriptedProvider:
        return cls(replies=list(replies), **kwargs)

    def _next(self, request: ProviderRequest) -> ProviderResponse:
        self.requests.append(request)
        index = len(self.requests) - 1
        if index >= len(self.replies):
            raise ProviderError(
                f"ScriptedProvider has {len(self.replies)} scripted replies and was called {index + 1} times",
                vendor=self.vendor,
                kind="other",
            )
        reply = self.replies[index]
        if isinstance(reply, Exception):
            raise reply
        message = reply(request) if callable(reply) else reply
        body = wire_body(request)
        usage = Usage(input_tokens=count_json(body), output_tokens=count_json(get_converter().unstructure(message)))
        stop = "tool_use" if any(isinstance(b, ToolCallBlock) for b in message.content) else "end_turn"
        return ProviderResponse(
            message=message,
            usage=usage,
            stop_reason=stop,
            vendor=self.vendor,
            model=request.model or self.model,
            request_body=body,
            response_body={"message": get_converter().unstructure(message)},
            requires_stable_reasoning_prefix=self.requires_stable_reasoning_prefix,
        )

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        return self._next(request)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        response = self._next(request)
        for block in response.message.content:
            if isinstance(block, TextBlock):
                for i in range(0, len(block.text), 8):
                    yield StreamDelta(kind="text", text=block.text[i : i + 8])
            elif isinstance(block, ReasoningBlock) and block.text:
                yield StreamDelta(kind="reasoning", text=block.text)
            elif isinstance(block, ToolCallBlock):
                yield StreamDelta(
                    kind="tool_call", text=json.dumps(block.arguments), tool_call_id=block.id, tool_name=block.name
                )
        yield StreamDone(response=response)


def wire_body(request: ProviderRequest) -> dict[str, Any]:
    """The scripted vendor's 'wire': the canonical request as JSON (what tests compare)."""
    conv = get_converter()
    body: dict[str, Any] = {
        "model": request.model,
        "system": request.system,
        "messages": [conv.unstructure(m, Message) for m in request.messages],
        "tools": [conv.unstructure(t) for t in request.tools],
    }
    if request.stable_head is not None:
        body["stable_head"] = request.stable_head
    return body


def canonical_messages(request: ProviderRequest) -> list[dict[str, Any]]:
    """The request's messages as plain dicts without segue's meta, for byte-level comparisons."""
    conv = get_converter()
    return [{k: v for k, v in conv.unstructure(m, Message).items() if k != "meta"} for m in request.messages]
