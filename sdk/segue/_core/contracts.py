"""The contracts the layers share: a provider call's canonical request and response, the stream events, the
Provider protocol, and the Message.meta keys segue marks messages with.

It sits at the bottom, next to the generated types: the wire serializers, the drivers, the store, replay and the
run pipeline all import it, and it imports nothing of theirs. Drivers (segue.providers.anthropic, ...) turn a
`ProviderRequest` into the vendor's wire body through segue.wire, call the official SDK client, and turn the
answer back into canonical blocks; the run loop only ever sees these types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Hashable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeVar, cast, runtime_checkable

import attrs

from segue.generated import (
    CacheVerdict,
    Message,
    ModelSettings,
    ReasoningBlock,
    ResponseRef,
    RunNoteKind,
    ServedBy,
    ToolDefinition,
    Usage,
)

#: Message.meta key marking the trailing runtime-state fragment. Block-cache drivers keep their last
#: breakpoint before it; it is never a cache anchor.
FRAGMENT_META_KEY = "segue.fragment"
#: Message.meta key marking messages rebuilt from earlier runs (replayed): its value is the replayed run's id.
REPLAYED_META_KEY = "segue.replayed"
#: Response header segue's twin puts on every answer (no vendor sends it): a driver that reads it records the call
#: as served by the twin, whether the twin ran in-process or behind a base URL (`segue twin serve`).
TWIN_HEADER = "x-segue-twin"
#: What segue's twin did instead of what a model would have (it found no value for a tool's argument): one line,
#: recorded as a run note of kind twin-note. segue_twin.core.TWIN_NOTE_HEADER is the same name.
TWIN_NOTE_HEADER = "x-segue-twin-note"

T = TypeVar("T")


class WirePrefix:
    """One run's fixed prefix (the replayed runs and history, as laid out) and what each wire built for it.

    Every request of a run starts with the same `length` messages, the same objects each time: iterations only
    append. A wire builds its part of the body for those messages once (`built`) and continues from a copy, so
    the replayed region is serialized once per run, not once per request. A built part is shared by every
    request of the run: wires must not change it (segue.wire.common.unshare copies a block before marking it).
    Entries are checked against the messages by identity, so a request whose prefix differs (another path's
    fitted messages, a prefix fitted again after a failover) is built afresh, never served a stale body.
    """

    def __init__(self, length: int) -> None:
        self.length = length
        self._built: dict[Hashable, list[tuple[tuple[Message, ...], Any]]] = {}

    def built(self, key: Hashable, messages: Sequence[Message], build: Callable[[Sequence[Message]], T]) -> T:
        """`build(messages[:length])`, once per wire `key` and prefix (a key holds one entry per distinct
        prefix, e.g. per Failover path)."""
        head = messages[: self.length]
        entries = self._built.setdefault(key, [])
        for seen, value in entries:
            if len(seen) == len(head) and all(a is b for a, b in zip(seen, head, strict=True)):
                return cast(T, value)
        value = build(head)
        entries.append((tuple(head), value))
        return value


@attrs.frozen(kw_only=True)
class ServingPath:
    """Who a request is for, as far as replayed reasoning is concerned: the catalog vendor, the model, and the
    `ReasoningBlock.vendor` its wire takes back (None: this path's wire replays no reasoning)."""

    vendor: str
    model: str
    reasoning_vendor: str | None

    def label(self) -> str:
        return f"{self.vendor}/{self.model}"


#: The tool a serving path without native structured output (catalog llm.structured_output not `native`) is
#: offered instead: its arguments are the final answer.
FINAL_ANSWER_TOOL = "final_answer"


@attrs.frozen(kw_only=True)
class OutputFormat:
    """A structured-output request as every wire needs it: the format's name, its JSON Schema (canonical: the same
    type gives the same bytes), and whether the schema fits OpenAI's strict mode."""

    name: str
    schema: Mapping[str, Any]
    strict: bool

    def as_tool(self) -> ToolDefinition:
        """The final-answer tool for paths whose catalog row names no native mechanism."""
        return ToolDefinition(
            name=FINAL_ANSWER_TOOL,
            description=f"Give your final answer ({self.name}) by calling this tool once, with the answer as its "
            "arguments, instead of answering in text.",
            parameters=dict(self.schema),
            # Not `strict`: the paths that get this tool lack the vendor's structured outputs, and on Anthropic
            # strict tool use is part of that same feature. The answer is validated and repaired instead.
        )


@attrs.frozen(kw_only=True)
class ProviderNote:
    """Something a driver or Failover reports about one call besides the answer (see RunNoteKind).

    `message_index` (vendor-dropped only) is the index in ProviderRequest.messages of the message whose reasoning
    the vendor reported dropping, so the loop can name the replayed run it belonged to. `measured` and `limit`
    (the cache notes) are the number that fell short and the catalog's number, kept on the RunNote so every
    surface explaining a miss can state them."""

    kind: RunNoteKind
    message: str
    message_index: int | None = None
    measured: int | None = None
    limit: int | None = None


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
    #: Runtime vendor: the catalog vendor `model` is for. A Failover tries that vendor's members first.
    vendor: str | None = None
    #: How the model generates (the run's ModelSettings, the agent's merged in): each wire maps what it takes and
    #: refuses the rest (segue.wire.settings). max_tokens None: the vendor's default (or the driver's, where the
    #: vendor requires one).
    settings: ModelSettings = attrs.field(factory=ModelSettings)
    #: Opaque per-conversation key (e.g. tenant or user) for vendors that route caches by key.
    cache_key: str | None = None
    #: Only populate the vendor's prompt cache with this prompt; generate nothing. Drivers use the vendor's
    #: documented mechanism (Anthropic `max_tokens: 0`, OpenAI breakpoint caches' `prompt_cache_options.prewarm`)
    #: and raise WireError where there is none. The response has usage and no content.
    prewarm: bool = False
    #: The path `messages` were fitted to: the replayed reasoning it keeps is what the prefix rule allows there
    #: (None: nothing replayed). A Failover member on another path sends `replay_alternatives[its path]` instead,
    #: or, for a path segue did not plan, the messages without any replayed reasoning.
    replay_path: ServingPath | None = None
    #: The same messages fitted to the other paths a Failover may serve (they differ only in replayed reasoning).
    replay_alternatives: Mapping[ServingPath, list[Message]] = attrs.field(factory=dict)
    #: The run's fixed prefix, for wires to build once per run (None: build every message, e.g. a one-off call).
    wire_prefix: WirePrefix | None = attrs.field(default=None, eq=False, repr=False)
    #: Structured output: drivers send it through the serving path's native mechanism, or offer it as the
    #: FINAL_ANSWER_TOOL where the catalog names none (segue.providers._output).
    output: OutputFormat | None = None
    #: Seconds between the conversation's turns so far (each replayed run's end to the next one's start, the last
    #: one's end to this run's start), in order; empty without replayed runs. Drivers configured with
    #: `cache_ttl="auto"` choose the cache lifetime from them (segue.cache.ttl).
    pauses: tuple[float, ...] = ()
    #: Ask the vendor why this request could not reuse the prefix of `previous_response` (cache diagnostics),
    #: where the serving path's catalog row says `llm.cache_diagnostics`; off: Agent(cache_diagnostics=False).
    diagnose: bool = False
    #: The conversation's latest vendor response (the previous iteration's, or the continued run's last): a
    #: driver names it only when its own vendor answered it. None: nothing to compare with yet.
    previous_response: ResponseRef | None = None
    #: Evaluate the prompt afresh, not from the server's prompt cache: set on the one retry of an answer cut inside
    #: a tool call, where a cached evaluation gave the cut answer. Drivers send the serving path's catalog
    #: `llm.fresh_prompt_fields` (llama.cpp: cache_prompt false); a path without them sends the request as usual.
    fresh: bool = False


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
    #: What the driver or Failover reports besides the answer, typed by kind.
    notes: list[ProviderNote] = attrs.field(factory=list)
    #: The path whose fitted messages the serving member sent, when not the request's own `replay_path` (a
    #: Failover member on another path answered); None: the request's own.
    replay_path: ServingPath | None = None
    #: The serving driver's flag (a Failover's members may differ); None when the provider does not say.
    requires_stable_reasoning_prefix: bool | None = None
    #: The model the vendor says served the call (the response's `model`), when it is not `model` nor a dated
    #: snapshot of it; cost and catalog lookups use it. None: `model` served.
    served_model: str | None = None
    #: Names of tool calls the vendor cut off at the output limit (their arguments are not whole JSON): left out of
    #: `message`, whose complete calls are kept.
    truncated_calls: tuple[str, ...] = ()
    #: The output limit the request sent (max_tokens, max_completion_tokens or max_output_tokens); None: the
    #: vendor's own default applied.
    output_limit: int | None = None
    #: "twin" when segue's twin answered (its TWIN_HEADER was on the response), not the vendor.
    served_by: ServedBy = "vendor"
    #: Where the request went (the client's base_url), for the chat span's server.address and server.port.
    server_address: str | None = None
    server_port: int | None = None
    #: The serving client's own OpenTelemetry span of this request (anthropic's SDK emits one per call, with its
    #: usage): the tracer provider it goes to, SDK_SPAN_GLOBAL for the global one; None: the client emits none.
    sdk_span: Any = None
    #: The vendor's verdict on this request's cache reuse (segue.wire.cache_verdict), when the request asked.
    cache_verdict: CacheVerdict | None = None


#: ProviderResponse.sdk_span of a client whose spans go to the global tracer provider.
SDK_SPAN_GLOBAL = "global"


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
    """What the agent loop calls, and every attribute segue reads of a provider. `vendor` names the catalog vendor
    id of the serving path.

    The members below `requires_stable_reasoning_prefix` have defaults here: a provider that subclasses Provider
    (the drivers, Failover, ScriptedProvider) inherits them and overrides what it declares; one that only matches
    the protocol's shape must define them all.
    """

    vendor: str
    model: str
    requires_stable_reasoning_prefix: bool
    #: A provider made of others (Failover): its members in the order they are tried (segue.providers.base
    #: `members`); empty: the provider is a driver of its own.
    providers: Sequence[Provider] = ()
    #: The ModelSettings fields whose change changes the cached prefix on the driver's wire: they go into the
    #: prefix descriptor's settings_hash (segue.run.config); empty: none do.
    prefix_settings: Sequence[str] = ()

    @property
    def reasoning_vendor(self) -> str | None:
        """The ReasoningBlock.vendor whose blocks the driver puts back on the wire, None for none: the replay
        planner keeps replayed reasoning only for it. By default the provider's own `vendor`."""
        return self.vendor

    def check_settings(self, settings: ModelSettings) -> None:
        """Raise WireError naming the first of `settings` the driver's wire cannot send; the run pipeline asks
        before any row is written (segue.providers.base `settings_checks`). By default it takes any."""
        return None

    def default_max_tokens(self, model: str) -> int | None:
        """The max_tokens the driver sends for `model` when the run's settings set none (a vendor that requires
        one: Anthropic), for the context-window fit (segue.run.window). By default None: the vendor's own default
        applies, unknown to segue."""
        return None

    async def complete(self, request: ProviderRequest) -> ProviderResponse: ...

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]: ...


#: Every member of Provider, for naming what an object offered as one lacks.
PROVIDER_MEMBERS = tuple(
    dict.fromkeys([*Provider.__annotations__, *(n for n in vars(Provider) if not n.startswith("_"))])
)


def require_provider(candidate: object, what: str) -> None:
    """Raise TypeError naming the Provider members `candidate` (`what`: "provider", "Failover members") lacks."""
    if gaps := [name for name in PROVIDER_MEMBERS if not hasattr(candidate, name)]:
        raise TypeError(
            f"{what} must implement segue.providers.Provider, got {type(candidate).__name__}, which lacks "
            f"{', '.join(gaps)}: subclass segue.providers.Provider to inherit the optional members' defaults"
        )


def without_replayed_reasoning(messages: Sequence[Message], keep: Collection[str] = ()) -> list[Message]:
    """`messages` with the reasoning of replayed runs left out, except the runs in `keep`; the run's own messages
    and history's keep theirs."""
    out: list[Message] = []
    for m in messages:
        replayed = (m.meta or {}).get(REPLAYED_META_KEY)
        if replayed and replayed not in keep and any(isinstance(b, ReasoningBlock) for b in m.content):
            m = attrs.evolve(m, content=[b for b in m.content if not isinstance(b, ReasoningBlock)])
        out.append(m)
    return out
