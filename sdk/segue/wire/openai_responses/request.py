"""OpenAI Responses wire: canonical messages -> input items, and output items -> canonical blocks.

Every canonical block becomes one item, in order, so reasoning items stay exactly where they were produced:
before the function_call they led to. User and system text/images become one message item per canonical
message; assistant text becomes an assistant message item; tool results become function_call_output items.
Reasoning of another vendor is dropped. With `store=False` nothing is kept server-side, so a reasoning item is
only replayable with its `encrypted_content` (requested through `include`); one without it is left off the wire
with a warning instead of failing the call with "Item with id 'rs_…' not found".

On a breakpoint cache (`breakpoints`, GPT-5.6 and later) the system prompt goes as the first developer message
instead of `instructions`, because only content parts can carry `prompt_cache_breakpoint`; tool outputs go as a
list of parts for the same reason (always, so an output reads the same whether or not it carries the marker).
segue.wire.breakpoints decides where the markers go; `prompt_cache_options` carries the mode, TTL and `prewarm`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import attrs

from segue._core.contracts import OutputFormat, ProviderNote, ProviderRequest
from segue._support.readers import Unknown, as_map
from segue.errors import MalformedResponseError, WireError
from segue.generated import (
    CompactionBlock,
    Message,
    ModelSettings,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VendorCompaction,
)
from segue.generated.wire import openai_responses as g
from segue.wire.breakpoints import BreakpointCache, mark
from segue.wire.cache_verdict import openai_verdict
from segue.wire.common import ASSISTANT, Comparison, ParsedResponse, WireRequest, foreign_reasoning
from segue.wire.settings import EFFORT_SETTING, TOOL_CHOICE_MODES, refuse, refuse_values, refused

if TYPE_CHECKING:
    from openai.types.responses import (
        ResponseInputImageParam,
        ResponseInputItemParam,
        ResponseInputTextParam,
    )
    from openai.types.responses.response_create_params import ToolChoice

    Part = ResponseInputTextParam | ResponseInputImageParam

WIRE = "openai_responses"
REASONING_VENDOR = "openai"
#: TextBlock.phase: an assistant message's phase (the generated PHASES are its values).
Phase = Literal["commentary", "final_answer"]
#: OpenAI rejects longer prompt_cache_key values.
MAX_CACHE_KEY = 64


def build_request(
    request: ProviderRequest,
    *,
    model: str,
    reasoning: Mapping[str, Any] | None,
    store: bool,
    cache_key_prefix: str | None,
    breakpoints: BreakpointCache | None = None,
    stream: bool = False,
    output: OutputFormat | None = None,
    comparison: Comparison | None = None,
) -> WireRequest:
    """The Responses body for one canonical request; `breakpoints` when the serving path is a breakpoint cache;
    `output`: structured output as `text.format` (json_schema); `comparison`: cache diagnostics against an
    earlier response (`prompt_cache_options.comparison_response_id`; nothing is sent without one)."""
    if request.prewarm and breakpoints is None:
        raise WireError(
            f"prewarm: {model!r} is not a breakpoint cache in the catalog (llm.cache_kind), and the Responses API "
            "warms a cache without generating only through prompt_cache_options.prewarm, which breakpoint caches "
            "(GPT-5.6 and later) take; send a normal request instead"
        )
    settings = request.settings  # asked of this path before any row (segue.run.settings.check_paths)
    notes: list[ProviderNote] = []
    items: list[ResponseInputItemParam] = []
    fixed: list[Any] = []
    instructions = None
    if breakpoints is not None and request.system:
        items.append(_developer(request.system, fixed))
    elif request.system:
        instructions = request.system
    if request.stable_head:
        items.append(_developer(request.stable_head, fixed))
    built, anchors, left_off = _input(request, store=store, tool_parts=breakpoints is not None)
    items.extend(built)
    notes.extend(left_off)
    options: Any = None
    compared = comparison.previous_id if comparison is not None else None
    if breakpoints is not None:
        mark(items, fixed, anchors, request, breakpoints, g.prompt_cache_breakpoint)
        options = g.prompt_cache_options(
            mode=breakpoints.mode, ttl=breakpoints.ttl, prewarm=request.prewarm, comparison_response_id=compared
        )
    elif compared is not None:
        options = g.prompt_cache_options(prewarm=False, comparison_response_id=compared)
    body = g.request(
        model=model,
        instructions=instructions,
        input=items,
        tools=[g.tool(t) for t in request.tools] or None,
        text_format=None
        if output is None
        else g.text_format(name=output.name, schema=output.schema, strict=output.strict),
        reasoning=_reasoning(reasoning, settings.reasoning_effort),
        store=store,
        prompt_cache_key=cache_key(cache_key_prefix, request.cache_key),
        prompt_cache_options=options,
        max_output_tokens=settings.max_tokens,
        temperature=settings.temperature,
        top_p=settings.top_p,
        tool_choice=_tool_choice(settings.tool_choice),
        parallel_tool_calls=settings.parallel_tool_calls if request.tools else None,
        context_management=None
        if settings.compaction is None
        else [g.compaction_management(compact_threshold=settings.compaction.trigger_tokens)],
        stream=stream,
    )
    return WireRequest(
        body=dict(body),
        notes=notes,
        output_limit=settings.max_tokens,
        comparison=comparison if compared is not None else None,
    )


#: The ModelSettings fields the Responses API has no parameter for (the pinned SDK's ResponseCreateParams has
#: neither key).
REFUSED_SETTINGS = refused(
    stop="the Responses API has no stop sequences (ResponseCreateParams has no `stop`)",
    seed="the Responses API has no seed (ResponseCreateParams has no `seed`)",
    context_editing="context editing is Anthropic's; the Responses API's context_management takes only compaction "
    "(the pinned SDK's ContextManagement.type: \"Currently only 'compaction' is supported\")",
)


def check_settings(settings: ModelSettings) -> None:
    refuse(settings, WIRE, REFUSED_SETTINGS)
    refuse_values(WIRE, EFFORT_SETTING, settings.reasoning_effort, g.REASONING_EFFORTS)
    compaction = settings.compaction
    anthropic_only = attrs.fields(VendorCompaction)
    for name in (anthropic_only.pause_after.name, anthropic_only.instructions.name):
        value = getattr(compaction, name, None)
        if value is not None:
            # The pinned SDK's ContextManagement has `type` and `compact_threshold` only.
            raise WireError(
                f"model_settings.compaction.{name}={value!r} cannot be sent on the {WIRE} wire: OpenAI's "
                "context_management compaction takes only a threshold (compaction.trigger_tokens); leave "
                f"{name} unset, or serve the run from an Anthropic path"
            )


def _reasoning(reasoning: Mapping[str, Any] | None, effort: Any) -> dict[str, Any] | None:
    """The driver's reasoning configuration with the run's reasoning_effort (checked) as its effort."""
    if effort is None:
        return None if reasoning is None else dict(reasoning)
    return g.reasoning_effort(reasoning=reasoning or {}, effort=effort)


def _tool_choice(choice: str | None) -> ToolChoice | None:
    if choice is None:
        return None
    for mode in TOOL_CHOICE_MODES:  # the three modes are spelled alike on the wire
        if choice == mode:
            return mode
    return g.named_tool_choice(name=choice)


Built = tuple[list["ResponseInputItemParam"], list[Any], list[ProviderNote]]


def _input(request: ProviderRequest, *, store: bool, tool_parts: bool) -> Built:
    """The input items of the request's messages, per message its breakpoint anchor, and the notes; the run's
    prefix (if any) is built once per run."""

    def build(messages: Sequence[Message]) -> Built:
        items: list[ResponseInputItemParam] = []
        anchors: list[Any] = []
        notes: list[ProviderNote] = []
        for m in messages:
            own, last = _items(m, store=store, notes=notes, tool_parts=tool_parts)
            items.extend(own)
            anchors.append(last)
        return items, anchors, notes

    if request.wire_prefix is None:
        return build(request.messages)
    items, anchors, notes = request.wire_prefix.built((WIRE, store, tool_parts), request.messages, build)
    more = build(request.messages[len(anchors) :])
    return [*items, *more[0]], [*anchors, *more[1]], [*notes, *more[2]]


def _developer(text: str, fixed: list[Any]) -> ResponseInputItemParam:
    """A developer message of one text part; the part is a fixed breakpoint position (system, stable head)."""
    part = g.input_text(TextBlock(text=text))
    fixed.append(part)
    return g.developer_message(content=[part])


def cache_key(key_prefix: str | None, key: str | None) -> str | None:
    """prompt_cache_key from the driver's `cache_key_prefix` and the request's key (per tenant or conversation, never
    per run: segue.run.request.RunRequest.cache_key); a key longer than OpenAI accepts keeps the key prefix and a
    stable hash."""
    if key_prefix is None and key is None:
        return None
    joined = ":".join(part for part in (key_prefix, key) if part)
    if len(joined) <= MAX_CACHE_KEY:
        return joined
    digest = hashlib.sha256(joined.encode()).hexdigest()[:24]
    head = (key_prefix or "")[: MAX_CACHE_KEY - len(digest) - 1]
    return f"{head}:{digest}" if head else digest


def message_items(
    m: Message, *, store: bool, notes: list[ProviderNote], tool_parts: bool = False
) -> list[ResponseInputItemParam]:
    """The input items for one canonical message, in block order; `tool_parts`: tool outputs as a list of parts."""
    return _items(m, store=store, notes=notes, tool_parts=tool_parts)[0]


def _items(
    m: Message, *, store: bool, notes: list[ProviderNote], tool_parts: bool
) -> tuple[list[ResponseInputItemParam], Any]:
    """message_items, and the message's last content part (input text or image, tool output): its breakpoint
    anchor."""
    items: list[ResponseInputItemParam] = []
    parts: list[Part] = []
    last: Any = None
    role = g.PART_ROLES[m.role]
    for b in m.content:
        if isinstance(b, ToolResultBlock):
            _flush(items, parts, role)
            if tool_parts:
                last = g.tool_output_text(b)
                items.append(g.function_call_output_parts(b, parts=[last]))
            else:
                items.append(g.function_call_output(b))
        elif isinstance(b, ToolCallBlock):
            _flush(items, parts, role)
            items.append(g.function_call(b))
        elif isinstance(b, ReasoningBlock):
            if foreign_reasoning(b, REASONING_VENDOR):
                continue
            if not store and b.encrypted_content is None:
                notes.append(
                    ProviderNote(
                        kind="reasoning-left-off",
                        message=f"openai reasoning item {b.id!r} has no encrypted_content and store=False, so OpenAI "
                        "cannot resolve it; left off the wire (request it with reasoning=... so include asks for it)",
                    )
                )
                continue
            _flush(items, parts, role)
            items.append(g.reasoning_item(b))
        elif isinstance(b, CompactionBlock):
            if b.vendor != REASONING_VENDOR:
                continue  # "Only the provider that produced a compaction item can read it"
            _flush(items, parts, role)
            items.append(g.compaction_item(b))
        elif m.role == ASSISTANT and isinstance(b, TextBlock):
            items.append(g.assistant_text(b))
        else:
            last = g.user_part(b)
            parts.append(last)
    _flush(items, parts, role)
    return items, last


def _flush(items: list[ResponseInputItemParam], parts: list[Part], role: Any) -> None:
    if parts:
        items.append(g.message(role=role, content=list(parts)))
        parts.clear()


def parse_response(
    data: Mapping[str, Any], *, model: str | None = None, comparison: Comparison | None = None
) -> ParsedResponse:
    """A Response (or one assembled from a stream) as canonical blocks in output order."""
    where = "openai response"
    response = g.parse_response(data)
    model = model or response.model
    content: list[Any] = []
    notes: list[ProviderNote] = []
    for raw in response.output:
        item = g.parse_output_item(as_map(raw, f"{where} output item"), model)
        if isinstance(item, g.OutputMessage):
            content.extend(_message_blocks(item, model, notes))
        elif isinstance(item, Unknown):
            notes.append(_unknown(f"openai returned a {item.tag!r} output item segue does not keep; dropped"))
        else:
            content.append(item)
    if any(isinstance(b, ToolCallBlock) for b in content):
        stop = g.TOOL_CALLS_STOP
    elif response.incomplete:
        reason = str(response.incomplete_reason)
        stop = g.INCOMPLETE_STOP.get(reason, reason)
    else:
        stop = "end_turn"
    return ParsedResponse(
        message=Message(role=ASSISTANT, content=content),
        usage=response.usage,
        stop_reason=stop,
        notes=notes,
        served_model=response.model,
        cache_verdict=openai_verdict(response.prompt_cache_diagnostics, comparison),
    )


def _unknown(message: str) -> ProviderNote:
    return ProviderNote(kind="unknown-output", message=message)


def _message_blocks(item: g.OutputMessage, model: str | None, notes: list[ProviderNote]) -> list[TextBlock]:
    """The message item's text parts as TextBlocks, each keeping the item's `phase` (see `message_phase`)."""
    phase = message_phase(item, notes)
    if isinstance(item.content, str):  # an input-style assistant message (as segue sends them)
        return [TextBlock(text=item.content, phase=phase)]
    if not isinstance(item.content, list):
        raise MalformedResponseError(f"openai message item: content must be a list, got {type(item.content).__name__}")
    blocks = []
    for raw in item.content:
        block = g.parse_message_part(as_map(raw, "openai message part"), model)
        if isinstance(block, Unknown):
            notes.append(_unknown(f"openai returned a {block.tag!r} message part segue does not keep; dropped"))
        else:
            blocks.append(block if phase is None else attrs.evolve(block, phase=phase))
    return blocks


def message_phase(item: g.OutputMessage, notes: list[ProviderNote]) -> Phase | None:
    """The assistant message's `phase`, kept so it is resent as received: the pinned SDK's
    ResponseOutputMessage.phase says "preserve and resend phase on all assistant messages — dropping it can degrade
    performance". A value the pinned SDK does not know is left off with a note rather than failing the run."""
    if item.phase is None or item.phase in g.PHASES:
        return cast("Phase | None", item.phase)
    notes.append(_unknown(f"openai labelled a message with phase {item.phase!r}, which segue does not know; dropped"))
    return None


#: Usage as canonical Usage, the writes split per TTL (schemas/wire/openai_responses.json).
parse_usage = g.parse_usage
