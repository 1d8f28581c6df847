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
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock, Usage
from segue.generated.wire import openai_responses as g
from segue.providers.base import ProviderNote, ProviderRequest
from segue.wire.breakpoints import BreakpointCache, mark
from segue.wire.common import (
    ParsedResponse,
    WireError,
    WireRequest,
    as_map,
    foreign_reasoning,
    opt_int,
    opt_obj,
    req_list,
    tokens_by_ttl,
)

if TYPE_CHECKING:
    from openai.types.responses import ResponseInputImageParam, ResponseInputItemParam, ResponseInputTextParam
    from openai.types.responses.response_create_params import PromptCacheOptions

    Part = ResponseInputTextParam | ResponseInputImageParam

WIRE = "openai_responses"
REASONING_VENDOR = "openai"
ENCRYPTED_REASONING = "reasoning.encrypted_content"
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
) -> WireRequest:
    """The Responses body for one canonical request; `breakpoints` when the serving path is a breakpoint cache."""
    if request.prewarm and breakpoints is None:
        raise WireError(
            f"prewarm: {model!r} is not a breakpoint cache in the catalog (llm.cache_kind), and the Responses API "
            "warms a cache without generating only through prompt_cache_options.prewarm, which breakpoint caches "
            "(GPT-5.6 and later) take; send a normal request instead"
        )
    notes: list[ProviderNote] = []
    items: list[ResponseInputItemParam] = []
    fixed: list[Any] = []
    body: dict[str, Any] = {"model": model}
    if breakpoints is not None and request.system:
        items.append(_developer(request.system, fixed))
    elif request.system:
        body["instructions"] = request.system
    if request.stable_head:
        items.append(_developer(request.stable_head, fixed))
    anchors = []
    for m in request.messages:
        own = message_items(m, store=store, notes=notes, tool_parts=breakpoints is not None)
        items.extend(own)
        anchors.append(_last_part(own))
    body["input"] = items
    if request.tools:
        body["tools"] = [g.tool(t) for t in request.tools]
    if reasoning is not None:
        body["reasoning"] = dict(reasoning)
        body["include"] = [ENCRYPTED_REASONING]
    body["store"] = store
    key = cache_key(cache_key_prefix, request.cache_key)
    if key is not None:
        body["prompt_cache_key"] = key
    if breakpoints is not None:
        mark(fixed, anchors, request, breakpoints)
        options: PromptCacheOptions = {"mode": breakpoints.mode, "ttl": breakpoints.ttl}
        if request.prewarm:
            options["prewarm"] = True  # "Prepares the prompt cache without generating output"
        body["prompt_cache_options"] = options
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if stream:
        body["stream"] = True
    return WireRequest(body=body, notes=notes)


def _developer(text: str, fixed: list[Any]) -> ResponseInputItemParam:
    """A developer message of one text part; the part is a fixed breakpoint position (system, stable head)."""
    part = g.input_text(TextBlock(text=text))
    fixed.append(part)
    return {"type": "message", "role": "developer", "content": [part]}


def _last_part(items: list[Any]) -> dict[str, Any] | None:
    """The last content part of one message's items (input text or image, tool output): its breakpoint anchor."""
    for item in reversed(items):
        parts = item.get("output", item.get("content"))
        if isinstance(parts, list) and parts:
            part: dict[str, Any] = parts[-1]
            return part
    return None


def cache_key(prefix: str | None, key: str | None) -> str | None:
    """prompt_cache_key per user or customer (never per run), so their requests share a cache routing key.

    Keys longer than OpenAI accepts keep the prefix and replace the rest with a stable hash.
    """
    if prefix is None and key is None:
        return None
    joined = ":".join(part for part in (prefix, key) if part)
    if len(joined) <= MAX_CACHE_KEY:
        return joined
    digest = hashlib.sha256(joined.encode()).hexdigest()[:24]
    head = (prefix or "")[: MAX_CACHE_KEY - len(digest) - 1]
    return f"{head}:{digest}" if head else digest


def message_items(
    m: Message, *, store: bool, notes: list[ProviderNote], tool_parts: bool = False
) -> list[ResponseInputItemParam]:
    """The input items for one canonical message, in block order; `tool_parts`: tool outputs as a list of parts."""
    items: list[ResponseInputItemParam] = []
    parts: list[Part] = []
    role: Literal["user", "system", "developer", "assistant"] = "user" if m.role == "tool" else m.role
    for b in m.content:
        if isinstance(b, ToolResultBlock):
            _flush(items, parts, role)
            output = g.function_call_output(b)
            if tool_parts:
                output["output"] = [g.tool_output_text(b)]
            items.append(output)
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
        elif role == "assistant" and isinstance(b, TextBlock):
            items.append(g.assistant_text(b))
        else:
            parts.append(g.user_part(b))
    _flush(items, parts, role)
    return items


def _flush(
    items: list[ResponseInputItemParam], parts: list[Part], role: Literal["user", "system", "developer", "assistant"]
) -> None:
    if parts:
        # Only assistant text goes out as items of its own, so an assistant message collects no parts.
        items.append({"type": "message", "role": "user" if role == "assistant" else role, "content": list(parts)})
        parts.clear()


_INCOMPLETE = {"max_output_tokens": "max_tokens", "content_filter": "content_filter"}


def parse_response(data: Mapping[str, Any], *, model: str | None = None) -> ParsedResponse:
    """A Response (or one assembled from a stream) as canonical blocks in output order."""
    where = "openai response"
    model = model or data.get("model")
    content: list[Any] = []
    notes: list[ProviderNote] = []
    for raw in req_list(data, "output", where):
        item = as_map(raw, f"{where} output item")
        if item.get("type") == "message":
            content.extend(_message_blocks(item, model, notes))
            continue
        block = g.parse_output_item(item, model)
        if block is None:
            notes.append(_unknown(f"openai returned a {item.get('type')!r} output item segue does not keep; dropped"))
        else:
            content.append(block)
    if any(isinstance(b, ToolCallBlock) for b in content):
        stop = "tool_use"
    elif data.get("status") == "incomplete":
        reason = (data.get("incomplete_details") or {}).get("reason")
        stop = _INCOMPLETE.get(str(reason), str(reason))
    else:
        stop = "end_turn"
    return ParsedResponse(
        message=Message(role="assistant", content=content),
        usage=parse_usage(as_map(data.get("usage"), f"{where} usage")),
        stop_reason=stop,
        notes=notes,
    )


def _unknown(message: str) -> ProviderNote:
    return ProviderNote(kind="unknown-output", message=message)


def _message_blocks(item: Mapping[str, Any], model: str | None, notes: list[ProviderNote]) -> list[TextBlock]:
    content = item.get("content")
    if isinstance(content, str):  # an input-style assistant message (as segue sends them)
        return [TextBlock(text=content)]
    blocks = []
    for raw in req_list(item, "content", "openai message item"):
        block = g.parse_message_part(as_map(raw, "openai message part"), model)
        if block is None:
            notes.append(_unknown(f"openai returned a {raw.get('type')!r} message part segue does not keep; dropped"))
        else:
            blocks.append(block)
    return blocks


def parse_usage(u: Mapping[str, Any]) -> Usage:
    """input_tokens is already the whole prompt; cached_tokens and cache_write_tokens are parts of it, and
    `cache_write_tokens_details` splits the writes per TTL (`ttl_30m_tokens`, `ttl_12h_tokens`; GPT-5.6 and later)."""
    where = "openai usage"
    inputs = opt_obj(u, "input_tokens_details", where)
    outputs = opt_obj(u, "output_tokens_details", where)
    details = None if inputs is None else opt_obj(inputs, "cache_write_tokens_details", where)
    return Usage(
        input_tokens=opt_int(u, "input_tokens", where) or 0,
        output_tokens=opt_int(u, "output_tokens", where) or 0,
        cache_read_tokens=None if inputs is None else opt_int(inputs, "cached_tokens", where),
        cache_write_tokens=None if inputs is None else opt_int(inputs, "cache_write_tokens", where),
        cache_write_tokens_by_ttl=tokens_by_ttl(details, "ttl_", "_tokens", where),
        reasoning_tokens=None if outputs is None else opt_int(outputs, "reasoning_tokens", where),
    )
