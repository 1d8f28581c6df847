"""The provider protocol: a canonical request in, a canonical response plus usage out.

Drivers (segue.providers.anthropic, ...) turn a `ProviderRequest` into the vendor's wire body through
segue.wire, call the official SDK client, and turn the answer back into canonical blocks. The agent loop only
ever sees these types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, runtime_checkable

import attrs

from segue.generated import Message, ToolDefinition, Usage

#: Message.meta key marking the trailing runtime-state fragment. Block-cache drivers keep their last
#: breakpoint before it; it is never a cache anchor.
FRAGMENT_META_KEY = "segue.fragment"
#: Message.meta key marking messages rebuilt from earlier runs (replayed), for display and explain.
REPLAYED_META_KEY = "segue.replayed"


@attrs.frozen(kw_only=True)
class ProviderRequest:
    """Everything a driver needs for one call, in canonical form.

    The wire order is: system, stable_head, messages. `replay_end` is the index in `messages` of the last
    replayed message (None when nothing was replayed): block-cache drivers put a breakpoint there.
    """

    system: str
    messages: list[Message]
    tools: list[ToolDefinition] = attrs.field(factory=list)
    stable_head: str | None = None
    replay_end: int | None = None
    model: str | None = None  # runtime override; None = the driver's own model
    max_tokens: int | None = None
    #: Opaque per-conversation key (e.g. tenant or user) for vendors that route caches by key.
    cache_key: str | None = None
    #: Reasoning blocks segue predicted the vendor must drop (for comparing with the vendor's own report).
    expected_reasoning_drops: int = 0
    #: Only populate the vendor's prompt cache with this prompt; generate nothing. Drivers use the vendor's
    #: documented mechanism (Anthropic `max_tokens: 0`, OpenAI breakpoint caches' `prompt_cache_options.prewarm`)
    #: and raise WireError where there is none. The response has usage and no content.
    prewarm: bool = False


@attrs.frozen(kw_only=True)
class ProviderResponse:
    """One completed call. `request_body` is exactly what the vendor received (no credentials)."""

    message: Message
    usage: Usage
    stop_reason: str
    vendor: str
    model: str
    request_body: dict[str, Any]
    response_body: dict[str, Any]
    request_headers: dict[str, str] = attrs.field(factory=dict)
    #: The vendor's own report of what it changed in the input (Anthropic `input_transformations`).
    input_transformations: list[dict[str, Any]] = attrs.field(factory=list)
    #: Warnings the driver raises for the replay summary (e.g. vendor dropped more reasoning than predicted).
    warnings: list[str] = attrs.field(factory=list)


@attrs.frozen(kw_only=True)
class StreamDelta:
    """A piece of a streamed answer. kind: text, reasoning, or tool_call (partial JSON arguments)."""

    kind: Literal["text", "reasoning", "tool_call"]
    text: str
    tool_call_id: str | None = None
    tool_name: str | None = None


@attrs.frozen(kw_only=True)
class StreamDone:
    """The last stream event: the same response a non-streamed call would have returned."""

    response: ProviderResponse


StreamEvent = StreamDelta | StreamDone


@runtime_checkable
class Provider(Protocol):
    """What the agent loop calls. `vendor` names the catalog vendor id of the serving path."""

    vendor: str
    model: str
    requires_stable_reasoning_prefix: bool

    async def complete(self, request: ProviderRequest) -> ProviderResponse: ...

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]: ...
