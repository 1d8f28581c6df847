"""Anthropic Messages wire: grouping, tool-result placement, cache breakpoints, thinking replay, response parsing.

Block shapes come from the generated serializers (segue.generated.wire.anthropic); this module decides where
they go. Rules it enforces:

- canonical `tool` messages become `user` messages whose tool_result blocks come first; a following user
  message merges into the same turn, so roles alternate;
- thinking / redacted_thinking blocks of this vendor are replayed verbatim, in the order they were produced
  (before the tool_use they led to), while thinking is on for the request; reasoning of any other vendor is
  dropped, never rendered as text;
- at most four cache breakpoints: end of system, end of the stable head (a second system text block), the last
  replayed message and the last message, never on the trailing runtime-state fragment; when the last message lies
  beyond the lookback (`lookback_blocks` content blocks, each tool_use and tool_result one) from the end of the
  previous request, as after a wide parallel tool fan-out, the previous request's end too, in the last replayed
  message's place if all four are taken (segue.wire.common.breakpoint_blocks);
- with replayed thinking on the wire and thinking enabled, the binding-controls beta is requested with
  `prefix_mismatch_behavior="drop_block"`, so a stale block is dropped (and reported) instead of failing the call;
- a prewarm request sends `max_tokens: 0` ("Set to `0` to populate the prompt cache without generating a
  response", the pinned SDK's `max_tokens` docstring), with the same breakpoints as a normal request, and a
  placeholder user turn after them when its messages would otherwise end with an answer (or be empty); a prewarm
  with thinking on or structured outputs is refused before sending, as the vendor refuses `max_tokens: 0` with them;
- with thinking off (no `thinking`, or `{"type": "disabled"}`) thinking blocks are left off, with a note: binding
  controls live inside the enabled / adaptive thinking configuration only (the pinned SDK's
  `BetaThinkingConfigDisabledParam` has nothing but `type`), so a stale block could not be dropped and would fail
  the call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import attrs

from segue._core.contracts import OutputFormat, ProviderNote, ProviderRequest, WirePrefix
from segue._support.readers import Unknown, as_map, stop_reason
from segue.errors import WireError
from segue.generated import (
    CompactionBlock,
    ContentBlock,
    Message,
    ModelSettings,
    ReasoningBlock,
    TextBlock,
    ToolResultBlock,
)
from segue.generated.wire import anthropic as g
from segue.wire.anthropic.context import check_context_settings, compaction_usage, context_management
from segue.wire.anthropic.notes import applied_edit_notes, binding_notes
from segue.wire.anthropic.prewarm import check_prewarmable
from segue.wire.cache_verdict import anthropic_verdict
from segue.wire.common import (
    ASSISTANT,
    SYSTEM,
    USER,
    Comparison,
    LookbackWindow,
    ParsedResponse,
    WireRequest,
    breakpoint_blocks,
    foreign_reasoning,
    writable,
)
from segue.wire.settings import EFFORT_SETTING, TOOL_CHOICE_MODES, refuse, refuse_values, refused

if TYPE_CHECKING:
    from anthropic.types import OutputConfigParam, ToolChoiceParam

WIRE = "anthropic"
#: ReasoningBlock.vendor of the blocks this wire replays.
REASONING_VENDOR = "anthropic"
CacheTTL = Literal["5m", "1h"]
#: "You can define up to 4 cache breakpoints" (prompt caching page); the catalog's llm.cache_max_breakpoints when
#: it names the path.
MAX_BREAKPOINTS = 4
#: The user turn a prewarm ends with when its prefix does not end with one (see build_request).
PREWARM_TURN = "(cache prewarm: nothing to answer)"
#: "Cache diagnostics is in beta. Include the beta header `cache-diagnosis-2026-04-07` in your API requests to use
#: this feature" (platform.claude.com build-with-claude/cache-diagnostics; the pinned SDK's AnthropicBetaParam).
DIAGNOSTICS_BETA = "cache-diagnosis-2026-04-07"


def thinking_kind(thinking: Mapping[str, Any] | None) -> str | None:
    """The `type` of a thinking configuration (None without one)."""
    return None if thinking is None else g.parse_thinking_config(thinking).kind


def thinking_on(thinking: Mapping[str, Any] | None) -> bool:
    """Whether a request with this `thinking` configuration takes thinking blocks back (see the module notes)."""
    return thinking_kind(thinking) in g.THINKING_REPLAYS


def build_request(
    request: ProviderRequest,
    *,
    model: str,
    max_tokens: int,
    cache_ttl: CacheTTL | None,
    thinking: Mapping[str, Any] | None,
    stream: bool = False,
    output: OutputFormat | None = None,
    comparison: Comparison | None = None,
    lookback_blocks: int | None = None,
    max_breakpoints: int | None = None,
) -> WireRequest:
    """The Messages API body (and beta header) for one request; `output`: structured output (`output_config.format`,
    where the catalog says the model takes it); `comparison`: cache diagnostics (`diagnostics.previous_message_id`,
    null to opt in); `lookback_blocks` (None: no breakpoint for it), `max_breakpoints`: the path's catalog numbers."""
    if request.prewarm:
        if cache_ttl is None:
            raise WireError("prewarm needs cache breakpoints, but cache_ttl is None; configure cache_ttl='5m' or '1h'")
        check_prewarmable(thinking, thinking_on(thinking), output, request.settings)
        max_tokens = 0
    system = [g.text(TextBlock(text=text)) for text in (request.system, request.stable_head) if text]
    replays = thinking_on(thinking)
    turns = _build(request.messages, REASONING_VENDOR if replays else None, request.wire_prefix)
    messages, anchors, thinking_sent = turns.messages(), turns.anchors, turns.thinking
    notes: list[ProviderNote] = []
    left_off = (
        0
        if replays
        else sum(
            isinstance(b, ReasoningBlock) and b.vendor == REASONING_VENDOR for m in request.messages for b in m.content
        )
    )
    if left_off:
        notes.append(
            ProviderNote(
                kind="reasoning-left-off",
                message=f"thinking is off for this request, so {left_off} thinking block(s) were left off: Anthropic "
                "binds replayed thinking only through thinking.block_binding, which needs thinking enabled or adaptive",
            )
        )
    if request.prewarm and (not messages or g.parse_message(messages[-1]).role != g.ROLES[USER]):
        # The prefix of a run ends where its user message will go (after an answer, or at the start). The Messages
        # API takes at least one message and treats a trailing assistant turn as a prefill to continue, so a
        # prewarm ends with a placeholder user turn, after every breakpoint (it is not in `anchors`): the cache
        # entries written are exactly the prefix's.
        messages.append(g.message(role=g.ROLES[USER], content=[g.content_block(TextBlock(text=PREWARM_TURN))]))
    headers: dict[str, str] = {}
    config: Any = None  # the app's own thinking configuration, sent as given (plus block binding)
    if thinking is not None:
        config = dict(thinking)
        if thinking_sent and replays:
            g.block_binding(config)
            headers[g.BETA_HEADER] = g.BINDING_BETA
    diagnostics: Any = None
    if comparison is not None:
        diagnostics = {"previous_message_id": comparison.previous_id}
        betas = [b for b in (headers.get(g.BETA_HEADER), DIAGNOSTICS_BETA) if b]
        headers[g.BETA_HEADER] = ",".join(betas)
    settings = request.settings  # asked of this path before any row (segue.run.settings.check_paths)
    managed, betas = context_management(settings)
    if betas:
        headers[g.BETA_HEADER] = ",".join(b for b in (headers.get(g.BETA_HEADER), *betas) if b)
    output_config: Mapping[str, Any] = g.output_format(schema=output.schema) if output is not None else {}
    if settings.reasoning_effort is not None:
        output_config = g.output_effort(config=output_config, effort=settings.reasoning_effort)  # type: ignore[arg-type]  # checked
    body = g.request(
        model=model,
        max_tokens=max_tokens,
        system=list(system) or None,
        messages=messages,
        tools=[g.tool(t) for t in request.tools] or None,
        tool_choice=tool_choice(settings) if request.tools else None,
        stop_sequences=settings.stop,
        output_config=cast("OutputConfigParam", output_config) if output_config else None,
        thinking=config,
        diagnostics=diagnostics,
        context_management=managed,
        stream=stream,
    )
    if cache_ttl is not None:
        window = (
            None
            if lookback_blocks is None
            else LookbackWindow(
                blocks=lookback_blocks, limit=max_breakpoints or MAX_BREAKPOINTS, distance=_distance(messages)
            )
        )
        for block in breakpoint_blocks(list(system), anchors, request, window):
            g.cache_control(writable(messages, system, block), ttl=cache_ttl)
    binding = config is not None and g.parse_thinking_config(config).block_binding is not None
    return WireRequest(
        body=dict(body),
        headers=headers,
        notes=notes,
        output_limit=max_tokens,
        origins=_Origins(turns.sources) if binding else {},
        binding=binding,
        comparison=comparison,
        extra_body=g.REQUEST_EXTRA,
    )


def _distance(messages: list[Any]) -> Callable[[Any, Any], int]:
    """Content blocks from one wire block of `messages` to a later one (the lookback's unit), counted from the end,
    where the anchors are: the cost is the blocks after `earlier`."""

    def distance(earlier: Any, later: Any) -> int:
        count: int | None = None
        for message in reversed(messages):
            for block in reversed(g.parse_message(message).content):
                if block is later:
                    count = 0
                elif count is not None:
                    count += 1
                if block is earlier:
                    return count or 0
        return count or 0  # `earlier` not found: every block before `later`

    return distance


#: What the Messages API has no parameter for: the pinned SDK's MessageCreateParams has no temperature, top_p or
#: seed key.
REFUSED_SETTINGS = refused(
    temperature="the pinned anthropic SDK's MessageCreateParams has no temperature",
    top_p="the pinned anthropic SDK's MessageCreateParams has no top_p",
    seed="the Messages API has no seed (MessageCreateParams has no `seed`)",
)


def check_settings(settings: ModelSettings) -> None:
    refuse(settings, WIRE, REFUSED_SETTINGS)
    refuse_values(WIRE, EFFORT_SETTING, settings.reasoning_effort, g.EFFORTS)
    check_context_settings(settings)


def tool_choice(settings: ModelSettings) -> ToolChoiceParam | None:
    """tool_choice and parallel_tool_calls as the Messages API takes them: auto, any (required), none, or the
    named tool, with disable_parallel_tool_use for parallel_tool_calls=False (a `none` choice takes no flag)."""
    choice, parallel = settings.tool_choice, settings.parallel_tool_calls
    if choice is None and parallel is None:
        return None
    auto, required, none = TOOL_CHOICE_MODES
    disable = None if parallel is None else not parallel
    if choice == none:
        return g.tool_choice_none()
    if choice is None or choice == auto:
        return g.tool_choice_auto(disable_parallel_tool_use=disable)
    if choice == required:
        return g.tool_choice_any(disable_parallel_tool_use=disable)
    return g.tool_choice_tool(name=choice, disable_parallel_tool_use=disable)


class _Origins(Mapping[str, int]):
    """Wire block path (as input_transformations names it) -> index of the canonical message it came from; worked
    out only if a response reports a dropped block."""

    def __init__(self, sources: list[list[int]]) -> None:
        self._sources = sources
        self._paths: dict[str, int] | None = None

    def _get(self) -> dict[str, int]:
        if self._paths is None:
            self._paths = {
                g.block_path(message=i, block=j): index
                for i, row in enumerate(self._sources)
                for j, index in enumerate(row)
            }
        return self._paths

    def __getitem__(self, path: str) -> int:
        return self._get()[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __bool__(self) -> bool:
        # `origins or {}` must not work out every path of a long conversation's body just to test for emptiness.
        return any(self._sources)


def build_messages(messages: list[Message]) -> tuple[list[dict[str, Any]], list[Any]]:
    """Wire messages, plus for each canonical message the wire block that may carry its cache breakpoint.

    The anchor is the message's last cacheable block (not thinking, not empty text), or None if it put nothing
    cacheable on the wire. Blocks are fresh dicts, so adding cache_control to an anchor changes only this body.
    """
    turns = _Turns(REASONING_VENDOR)
    turns.add(messages)
    return turns.messages(), turns.anchors


def _build(messages: list[Message], reasoning_vendor: str | None, wire_prefix: WirePrefix | None) -> _Turns:
    """The turns for `messages`; the run's prefix (if any) is built once per run and continued from a copy."""
    if wire_prefix is None:
        turns = _Turns(reasoning_vendor)
    else:

        def build(head: Sequence[Message]) -> _Turns:
            built = _continued(reasoning_vendor, head)
            built.seal()
            _PREFIXES.append((reasoning_vendor, tuple(head), built))
            if len(_PREFIXES) > _PREFIXES_KEPT:
                del _PREFIXES[0]
            return built

        turns = wire_prefix.built((WIRE, reasoning_vendor), messages, build).copy()
    turns.add(messages[len(turns.anchors) :])
    return turns


#: The prefixes built last, (reasoning vendor, messages, sealed turns): the next turn of a conversation replays the
#: same message objects (the store's, marked once: segue.replay.planner) and one more run, so it continues a copy
#: instead of building every earlier run again, and its wire messages are the same objects (the body store keeps
#: them hashed by identity). Never changed once built: continued from copies, marked through `unshare`.
_PREFIXES: list[tuple[str | None, tuple[Message, ...], _Turns]] = []
_PREFIXES_KEPT = 8


def _continued(reasoning_vendor: str | None, head: Sequence[Message]) -> _Turns:
    """Turns for `head`: a copy of the longest prefix built before whose messages open `head` (the same objects),
    continued with the rest; else built afresh."""
    best: _Turns | None = None
    for vendor, seen, turns in list(_PREFIXES):
        n = len(seen)
        if vendor != reasoning_vendor or n > len(head) or (best is not None and n <= len(best.anchors)):
            continue
        if all(a is b for a, b in zip(seen, head[:n], strict=True)):
            best = turns
    turns = best.copy() if best is not None else _Turns(reasoning_vendor)
    turns.add(head[len(turns.anchors) :])
    return turns


class _Turns:
    """The Messages API turns built so far, canonical message by message.

    Per turn: its role, its blocks, the canonical message each block came from, and which blocks are tool results
    (they must open a user turn). `anchors` holds per canonical message its cacheable anchor; `thinking` says
    whether replayed thinking went on the wire in an assistant turn. Turns before the last are `sealed` into
    their wire messages (no later message can join them); `copy` shares those and copies only the open last turn.
    """

    def __init__(self, reasoning_vendor: str | None) -> None:
        self.reasoning_vendor = reasoning_vendor
        self.roles: list[str] = []
        self.contents: list[list[Any]] = []
        self.sources: list[list[int]] = []
        self.results: list[list[bool]] = []
        self.anchors: list[Any] = []
        self.reorder: set[int] = set()
        self.thinking = False
        self.sealed: list[dict[str, Any]] = []

    def copy(self) -> _Turns:
        n = len(self.sealed)
        other = _Turns(self.reasoning_vendor)
        other.roles = list(self.roles)
        other.contents = [*self.contents[:n], *(list(c) for c in self.contents[n:])]
        other.sources = [*self.sources[:n], *(list(c) for c in self.sources[n:])]
        other.results = [*self.results[:n], *(list(c) for c in self.results[n:])]
        other.anchors = list(self.anchors)
        other.reorder = set(self.reorder)
        other.thinking = self.thinking
        other.sealed = list(self.sealed)
        return other

    def add(self, messages: Sequence[Message]) -> None:
        user = g.ROLES[USER]
        for index, m in enumerate(messages, start=len(self.anchors)):
            role = g.ROLES[m.role]
            blocks: list[Any] = []
            flags: list[bool] = []
            anchor = None
            for b in m.content:
                if (
                    foreign_reasoning(b, self.reasoning_vendor)
                    or (isinstance(b, TextBlock) and not b.text)
                    or (isinstance(b, CompactionBlock) and b.vendor != WIRE)
                ):
                    continue  # other vendors' reasoning and compactions never go on the wire; nor empty text
                if m.role == SYSTEM and not isinstance(b, TextBlock):
                    raise WireError(
                        f"a system message may hold only text on the anthropic wire, got {type(b).__name__}"
                    )
                block = g.content_block(b)
                blocks.append(block)
                flags.append(isinstance(b, ToolResultBlock))
                if isinstance(b, ReasoningBlock):
                    self.thinking = self.thinking or m.role == ASSISTANT
                else:
                    anchor = block
            self.anchors.append(anchor)
            if not blocks:
                continue
            if self.roles and self.roles[-1] == role:
                if role == user and not self.results[-1][-1] and any(flags):
                    self.reorder.add(len(self.roles) - 1)  # text then tool results in one user turn: results first
                self.contents[-1].extend(blocks)
                self.sources[-1].extend([index] * len(blocks))
                self.results[-1].extend(flags)
            else:
                self.roles.append(role)
                self.contents.append(blocks)
                self.sources.append([index] * len(blocks))
                self.results.append(flags)

    def seal(self, last: bool = False) -> None:
        """Build the wire messages of every turn but the open last one (with `last`, of that one too)."""
        for i in range(len(self.sealed), len(self.roles) - (0 if last else 1)):
            if i in self.reorder:
                # tool_result blocks must open the user turn that answers the tool_use; text goes after them.
                order = sorted(range(len(self.contents[i])), key=lambda j: not self.results[i][j])
                self.contents[i] = [self.contents[i][j] for j in order]
                self.sources[i] = [self.sources[i][j] for j in order]
            self.sealed.append(g.message(role=self.roles[i], content=self.contents[i]))

    def messages(self) -> list[dict[str, Any]]:
        """The wire messages: every turn sealed."""
        self.seal(last=True)
        return list(self.sealed)


def parse_response(
    data: Mapping[str, Any],
    *,
    model: str | None = None,
    binding: bool = False,
    origins: Mapping[str, int] | None = None,
    comparison: Comparison | None = None,
) -> ParsedResponse:
    """A Messages API response (or one assembled from a stream) as canonical blocks, usage and notes.

    With `binding` (block binding was requested) every `thinking_dropped` entry of `input_transformations` is a
    vendor-dropped note, pointing through `origins` (wire path -> canonical message index) at the message it came
    from; a response without `input_transformations` is an `unconfirmed` note. `model` is recorded on reasoning
    blocks (default: the response's own `model`).
    """
    where = "anthropic response"
    response = g.parse_response(data)
    model = model or response.model
    content: list[ContentBlock] = []
    notes: list[ProviderNote] = []
    for raw in response.content:
        raw_block = as_map(raw, f"{where} content block")
        block = g.parse_content_block(raw_block, model)
        if isinstance(block, CompactionBlock):
            changes = g.parse_compaction_extra(raw_block).tool_changes
            block = block if changes is None else attrs.evolve(block, tool_changes=list(changes))
        if isinstance(block, Unknown):
            notes.append(
                ProviderNote(
                    kind="unknown-output",
                    message=f"anthropic returned a {block.tag!r} content block segue does not keep; dropped",
                )
            )
        else:
            content.append(block)
    reported = response.input_transformations
    transformations = [dict(as_map(t, where)) for t in reported or []]
    if binding:
        notes.extend(binding_notes(transformations, reported is not None, origins or {}))
    notes.extend(applied_edit_notes(response.applied_edits))
    usage = response.usage
    compacted = compaction_usage(response.iterations)
    return ParsedResponse(
        message=Message(role=ASSISTANT, content=content),
        usage=attrs.evolve(usage, compaction_iterations=compacted) if compacted else usage,
        stop_reason=stop_reason(response.stop_reason, {}),  # segue's vocabulary is Anthropic's
        notes=notes,
        input_transformations=transformations,
        served_model=response.model,
        cache_verdict=anthropic_verdict(response.diagnostics, comparison),
    )


#: Usage as canonical Usage: the cached parts added back to input_tokens (schemas/wire/anthropic.json).
parse_usage = g.parse_usage
