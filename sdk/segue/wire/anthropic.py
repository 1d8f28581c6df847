"""Anthropic Messages wire: grouping, tool-result placement, cache breakpoints, thinking replay, response parsing.

Block shapes come from the generated serializers (segue.generated.wire.anthropic); this module decides where
they go. Rules it enforces:

- canonical `tool` messages become `user` messages whose tool_result blocks come first; a following user
  message merges into the same turn, so roles alternate;
- thinking / redacted_thinking blocks of this vendor are replayed verbatim, in the order they were produced
  (before the tool_use they led to), while thinking is on for the request; reasoning of any other vendor is
  dropped, never rendered as text;
- at most four cache breakpoints: end of system, end of the stable head (a second system text block), the last
  replayed message and the last message, never on the trailing runtime-state fragment;
- with replayed thinking on the wire and thinking enabled, the binding-controls beta is requested with
  `prefix_mismatch_behavior="drop_block"`, so a stale block is dropped (and reported) instead of failing the call;
- a prewarm request sends `max_tokens: 0` ("Set to `0` to populate the prompt cache without generating a
  response", the pinned SDK's `max_tokens` docstring), with the same breakpoints as a normal request;
- with thinking off (no `thinking`, or `{"type": "disabled"}`) thinking blocks are left off, with a note: binding
  controls live inside the enabled / adaptive thinking configuration only (the pinned SDK's
  `BetaThinkingConfigDisabledParam` has nothing but `type`), so a stale block could not be dropped and would fail
  the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from segue.generated import ContentBlock, Message, ReasoningBlock, TextBlock, ToolResultBlock, Usage
from segue.generated.wire import anthropic as g
from segue.providers.base import ProviderNote, ProviderRequest
from segue.wire.common import (
    MalformedResponseError,
    ParsedResponse,
    WireError,
    WireRequest,
    as_map,
    breakpoint_blocks,
    foreign_reasoning,
    opt_int,
    opt_list,
    opt_obj,
    req_list,
    stop_reason,
    tokens_by_ttl,
)

if TYPE_CHECKING:
    from anthropic.types import CacheControlEphemeralParam, TextBlockParam

WIRE = "anthropic"
#: ReasoningBlock.vendor of the blocks this wire replays.
REASONING_VENDOR = "anthropic"
BINDING_BETA = "thinking-binding-controls-2026-08-01"
BLOCK_BINDING = {"prefix_mismatch_behavior": "drop_block"}
CacheTTL = Literal["5m", "1h"]

_ROLE = {"user": "user", "tool": "user", "assistant": "assistant", "system": "system"}
_NOT_CACHEABLE = frozenset({"thinking", "redacted_thinking"})
_THINKING_ON = ("enabled", "adaptive")


def thinking_on(thinking: Mapping[str, Any] | None) -> bool:
    """Whether a request with this `thinking` configuration takes thinking blocks back (see the module notes)."""
    return thinking is not None and thinking.get("type") in _THINKING_ON


def build_request(
    request: ProviderRequest,
    *,
    model: str,
    max_tokens: int,
    cache_ttl: CacheTTL | None,
    thinking: Mapping[str, Any] | None,
    stream: bool = False,
) -> WireRequest:
    """The Messages API body (and beta header) for one canonical request."""
    if request.prewarm:
        if cache_ttl is None:
            raise WireError("prewarm needs cache breakpoints, but cache_ttl is None; configure cache_ttl='5m' or '1h'")
        max_tokens = 0
    cache: CacheControlEphemeralParam | None = None if cache_ttl is None else {"type": "ephemeral", "ttl": cache_ttl}
    system: list[TextBlockParam] = [
        {"type": "text", "text": text} for text in (request.system, request.stable_head) if text
    ]
    replays = thinking_on(thinking)
    messages, anchors, origins = _build(request.messages, REASONING_VENDOR if replays else None)
    notes: list[ProviderNote] = []
    left_off = sum(
        isinstance(b, ReasoningBlock) and b.vendor == REASONING_VENDOR for m in request.messages for b in m.content
    )
    if left_off and not replays:
        notes.append(
            ProviderNote(
                kind="reasoning-left-off",
                message=f"thinking is off for this request, so {left_off} thinking block(s) were left off: Anthropic "
                "binds replayed thinking only through thinking.block_binding, which needs thinking enabled or adaptive",
            )
        )
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    if system:
        body["system"] = system
    body["messages"] = messages
    if request.tools:
        body["tools"] = [g.tool(t) for t in request.tools]
    if cache is not None:
        for block in breakpoint_blocks(list(system), anchors, request):
            block["cache_control"] = dict(cache)
    headers: dict[str, str] = {}
    if thinking is not None:
        config = dict(thinking)
        if _has_thinking(messages) and replays:
            config.setdefault("block_binding", dict(BLOCK_BINDING))
            headers["anthropic-beta"] = BINDING_BETA
        body["thinking"] = config
    if stream:
        body["stream"] = True
    return WireRequest(body=body, headers=headers, notes=notes, origins=origins)


def build_messages(messages: list[Message]) -> tuple[list[dict[str, Any]], list[dict[str, Any] | None]]:
    """Wire messages, plus for each canonical message the wire block that may carry its cache breakpoint.

    The anchor is the message's last cacheable block (not thinking, not empty text), or None if it put nothing
    cacheable on the wire. Blocks are fresh dicts, so adding cache_control to an anchor changes only this body.
    """
    out, anchors, _ = _build(messages, REASONING_VENDOR)
    return out, anchors


def _build(
    messages: list[Message], reasoning_vendor: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any] | None], dict[str, int]]:
    """build_messages, plus where each wire block came from: `messages.i.content.j` -> canonical message index."""
    out: list[dict[str, Any]] = []
    anchors: list[dict[str, Any] | None] = []
    sources: list[list[int]] = []  # per wire message, per block: the canonical message it came from
    reorder: set[int] = set()
    for index, m in enumerate(messages):
        role = _ROLE[m.role]
        blocks: list[dict[str, Any]] = []
        anchor = None
        for b in m.content:
            if foreign_reasoning(b, reasoning_vendor) or (isinstance(b, TextBlock) and not b.text):
                continue  # other vendors' reasoning never goes on the wire; Anthropic rejects empty text blocks
            if role == "system" and not isinstance(b, TextBlock):
                raise WireError(f"a system message may hold only text on the anthropic wire, got {type(b).__name__}")
            block: dict[str, Any] = g.content_block(b)  # type: ignore[assignment]
            blocks.append(block)
            if block["type"] not in _NOT_CACHEABLE:
                anchor = block
        anchors.append(anchor)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            last = out[-1]["content"]
            if (
                role == "user"
                and last[-1]["type"] != "tool_result"
                and any(isinstance(b, ToolResultBlock) for b in m.content)
            ):
                reorder.add(len(out) - 1)
            last.extend(blocks)
            sources[-1].extend([index] * len(blocks))
        else:
            out.append({"role": role, "content": blocks})
            sources.append([index] * len(blocks))
    for i in reorder:
        # tool_result blocks must open the user turn that answers the tool_use; text goes after them.
        pairs = sorted(zip(out[i]["content"], sources[i], strict=True), key=lambda p: p[0]["type"] != "tool_result")
        out[i]["content"], sources[i] = [p[0] for p in pairs], [p[1] for p in pairs]
    origins = {f"messages.{i}.content.{j}": src for i, row in enumerate(sources) for j, src in enumerate(row)}
    return out, anchors, origins


def _has_thinking(messages: list[dict[str, Any]]) -> bool:
    return any(b["type"] in _NOT_CACHEABLE for m in messages if m["role"] == "assistant" for b in m["content"])


def parse_response(
    data: Mapping[str, Any],
    *,
    model: str | None = None,
    binding: bool = False,
    origins: Mapping[str, int] | None = None,
) -> ParsedResponse:
    """A Messages API response (or one assembled from a stream) as canonical blocks, usage and notes.

    With `binding` (block binding was requested) every `thinking_dropped` entry of `input_transformations` is a
    vendor-dropped note, pointing through `origins` (wire path -> canonical message index) at the message it came
    from; a response without `input_transformations` is an `unconfirmed` note. `model` is recorded on reasoning
    blocks (default: the response's own `model`).
    """
    where = "anthropic response"
    model = model or data.get("model")
    content: list[ContentBlock] = []
    notes: list[ProviderNote] = []
    for raw in req_list(data, "content", where):
        block = g.parse_content_block(as_map(raw, f"{where} content block"), model)
        if block is None:
            notes.append(
                ProviderNote(
                    kind="unknown-output",
                    message=f"anthropic returned a {raw.get('type')!r} content block segue does not keep; dropped",
                )
            )
        else:
            content.append(block)
    transformations = [dict(as_map(t, where)) for t in opt_list(data, "input_transformations", where) or []]
    if binding:
        notes.extend(_binding_notes(transformations, "input_transformations" in data, origins or {}))
    return ParsedResponse(
        message=Message(role="assistant", content=content),
        usage=parse_usage(as_map(data.get("usage"), f"{where} usage")),
        stop_reason=stop_reason(data.get("stop_reason"), {}),  # segue's vocabulary is Anthropic's
        notes=notes,
        input_transformations=transformations,
    )


def _binding_notes(
    transformations: list[dict[str, Any]], reported: bool, origins: Mapping[str, int]
) -> list[ProviderNote]:
    if not reported:
        return [
            ProviderNote(
                kind="unconfirmed",
                message="anthropic did not report input_transformations although thinking block binding was "
                "requested; whether it dropped replayed thinking blocks is unknown",
            )
        ]
    return [
        ProviderNote(
            kind="vendor-dropped",
            message=f"anthropic dropped the thinking block at {t.get('path')} ({t.get('reason')}): the model did "
            "not see it",
            message_index=origins.get(str(t.get("path"))),
        )
        for t in transformations
        if t.get("type") == "thinking_dropped"
    ]


def parse_usage(u: Mapping[str, Any]) -> Usage:
    """Anthropic's input_tokens counts only what follows the last breakpoint: add the cached parts back."""
    where = "anthropic usage"
    uncached = opt_int(u, "input_tokens", where) or 0
    read = opt_int(u, "cache_read_input_tokens", where)
    write = opt_int(u, "cache_creation_input_tokens", where)
    by_ttl = tokens_by_ttl(opt_obj(u, "cache_creation", where), "ephemeral_", "_input_tokens", where)
    details = opt_obj(u, "output_tokens_details", where)
    output = opt_int(u, "output_tokens", where)
    if output is None:
        raise MalformedResponseError(f"{where}: missing output_tokens (got keys {sorted(u)})")
    return Usage(
        input_tokens=uncached + (read or 0) + (write or 0),
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_tokens=write,
        cache_write_tokens_by_ttl=by_ttl,
        reasoning_tokens=None if details is None else opt_int(details, "thinking_tokens", where),
    )
