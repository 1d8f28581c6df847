"""Anthropic Messages (`POST /v1/messages`): thinking signatures, block-cache accounting, JSON and SSE replies."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from segue._core.image_tokens import ImageFormula
from segue._core.tokens import count_json, count_tokens
from segue_twin._wire import ordered_json, pieces, sse, strip_for_binding, truncate_to_tokens
from segue_twin.anthropic_context import (
    after_last_compaction,
    compacted,
    edit_context,
    parse_context_management,
    summary_of,
)
from segue_twin.anthropic_request import AnthropicRequest, parse_request
from segue_twin.cache import BlockUsage, CacheBlock
from segue_twin.diagnostics import anthropic_answer, anthropic_fingerprint
from segue_twin.errors import bad_request
from segue_twin.images import block_tokens
from segue_twin.signing import check_thinking, prefix_digests, sign_thinking
from segue_twin.state import Reply, TwinState
from segue_twin.structured import respond
from segue_twin.view import AssistantTurn, ConversationView, Summarizer, ToolCall, ToolResult, Turn, tool_spec

VENDOR = "anthropic"
#: Thinking text used when thinking is on but the policy gave no reasoning (a thinking block must still lead).
DEFAULT_THINKING = "Deciding the next step."
_THINKING_TYPES = ("thinking", "redacted_thinking")
#: The effort of a request that sends none: "Setting effort to `"high"` produces exactly the same behavior as
#: omitting the effort parameter entirely" (https://platform.claude.com/docs/en/build-with-claude/effort), and the
#: prompt-caching page: "setting effort explicitly to the model's default is equivalent to omitting it and does
#: not invalidate".
DEFAULT_EFFORT = "high"
#: "Include the beta header `cache-diagnosis-2026-04-07` in your API requests to use this feature"
#: (platform.claude.com build-with-claude/cache-diagnostics).
DIAGNOSTICS_BETA = "cache-diagnosis-2026-04-07"


def handle_messages(state: TwinState, body: Mapping[str, Any], headers: Mapping[str, str]) -> Reply:
    request = parse_request(body, headers, lambda model: state.rules(model, VENDOR))
    managed = parse_context_management(body, headers)
    rules = state.rules(request.model, VENDOR)
    digests = prefix_digests(request.tools, request.system, request.messages)
    messages, transformations = _bind_thinking(state, request, digests)
    edited = edit_context(
        managed,
        after_last_compaction(messages),
        tokens_of=lambda b: block_tokens(strip_for_binding(b), rules.image_tokens, request.model),
        prompt_tokens=lambda ms: sum(b.tokens for b in _cache_blocks(request, ms, rules.image_tokens)),
    )
    messages = edited.messages

    def account(blocks: list[CacheBlock]) -> BlockUsage:
        return state.block_cache.account(
            namespace=request.model, blocks=blocks, rules=rules, now=state.clock(), writer=state.writer
        )

    note = edited.note
    compaction: dict[str, Any] | None = None
    iterations: list[dict[str, Any]] = []
    if managed.compact is not None and not request.prewarm:
        blocks = _cache_blocks(request, messages, rules.image_tokens)
        if sum(b.tokens for b in blocks) > managed.compaction_trigger:
            policy = state.policy
            own = policy.summarize(_view(request, messages)) if isinstance(policy, Summarizer) else None
            summary = own if own is not None else summary_of(messages)
            compaction = {"type": "compaction", "content": summary}
            iterations.append({"type": "compaction", **_usage(account(blocks), count_tokens(summary))})
            messages = compacted(messages, compaction)
    paused = compaction is not None and bool((managed.compact or {}).get("pause_after_compaction"))
    if request.prewarm:  # max_tokens 0: the prompt is cached, nothing is generated
        content: list[dict[str, Any]] = []
        stop_reason, output_tokens = "max_tokens", 0
    elif paused:
        content, stop_reason, output_tokens = [], "compaction", 0
    else:
        turn = respond(state.policy, _view(request, messages))
        content, stop_reason, output_tokens = _render_turn(state, request, turn, digests[-1])
        note = note + turn.note
    if paused:
        top = _usage(BlockUsage(input_tokens=0, cache_read_input_tokens=0, cache_creation={}, total_tokens=0), 0)
    else:
        top = _usage(account(_cache_blocks(request, messages, rules.image_tokens)), output_tokens)
    if compaction is not None:
        content = [compaction, *content]
        iterations += [] if paused else [{"type": "message", **top}]
    message: dict[str, Any] = {
        "id": state.ids.next("msg"),
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {**top, "iterations": iterations} if iterations else top,
    }
    if edited.applied:
        message["context_management"] = {"applied_edits": edited.applied}
    if request.binding_requested:
        message["input_transformations"] = transformations
    _diagnose(state, request, body, headers, message, rules.diagnostics)
    if not request.stream:
        return Reply(body=message, note=note)
    return Reply(body=message, events=tuple(stream_events(message)), note=note)


def _diagnose(
    state: TwinState,
    request: AnthropicRequest,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    message: dict[str, Any],
    offered: bool,
) -> None:
    """Cache diagnostics (segue_twin.diagnostics): the request's fingerprint is kept when it asks (the
    `diagnostics` object, or the beta header), and a request naming an earlier response gets the comparison."""
    requested = body.get("diagnostics")
    beta = DIAGNOSTICS_BETA in headers.get("anthropic-beta", "").split(",")
    if not offered or (not isinstance(requested, dict) and not beta):
        return
    current = anthropic_fingerprint(
        model=request.model,
        speed=request.speed,
        tools=request.tools,
        system=request.system,
        messages=request.messages,
        settings={
            "thinking": _thinking_setting(request),
            "effort": DEFAULT_EFFORT if request.effort is None else request.effort,
            "tool_choice": request.tool_choice,
        },
    )
    fingerprints = state.fingerprints[VENDOR]
    if isinstance(requested, dict):
        message["diagnostics"] = anthropic_answer(fingerprints, requested, current)
    fingerprints.remember(message["id"], current)


def _bind_thinking(
    state: TwinState, request: AnthropicRequest, digests: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Verify every replayed thinking block against the prefix it claims; drop or reject on mismatch.

    From the first failing block on, every later thinking block is dropped too: its own prefix contains the
    changed part, so it could not be valid either.
    """
    kept: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    failing = False
    for i, message in enumerate(request.messages):
        if message["role"] != "assistant":
            kept.append(message)
            continue
        content: list[dict[str, Any]] = []
        for j, block in enumerate(message["content"]):
            if block["type"] not in _THINKING_TYPES:
                content.append(block)
                continue
            is_thinking = block["type"] == "thinking"
            verdict = check_thinking(
                state.secret,
                block.get("signature") if is_thinking else block.get("data"),
                model=request.model,
                prefix_digest=digests[i],
                text=str(block.get("thinking", "")) if is_thinking else "",
            )
            if verdict == "ok" and not failing:
                content.append(block)
                continue
            path = f"messages.{i}.content.{j}"
            if not failing and not request.drop_block:
                what = "model that produced it" if verdict == "model_binding_mismatch" else "conversation before it"
                raise bad_request(
                    f"{path}: Invalid `signature` in `{block['type']}` block: the {what} differs from the request "
                    "that produced it. Pass thinking blocks back unmodified after an unchanged prefix (tools, "
                    'system, earlier messages), or send thinking.block_binding = {"prefix_mismatch_behavior": '
                    '"drop_block"} with the beta header anthropic-beta: thinking-binding-controls-2026-08-01'
                )
            failing = True
            reason = verdict if verdict != "ok" else "prefix_binding_mismatch"
            dropped.append({"type": "thinking_dropped", "path": path, "reason": reason})
        kept.append({"role": message["role"], "content": content})
    return kept, dropped


def _view(request: AnthropicRequest, messages: list[dict[str, Any]]) -> ConversationView:
    calls: dict[str, ToolCall] = {}
    turns: list[Turn] = []
    for message in messages:
        blocks = message["content"]
        text = "\n".join(b["text"] if b["type"] == "text" else str(b["content"]) for b in blocks if _readable(b))
        if message["role"] == "assistant":
            made = tuple(
                ToolCall(id=b["id"], name=str(b.get("name", "")), arguments=b["input"])
                for b in blocks
                if b["type"] == "tool_use"
            )
            calls.update((c.id, c) for c in made)
            reasoning = "\n".join(str(b.get("thinking", "")) for b in blocks if b["type"] == "thinking")
            turns.append(Turn(role="assistant", text=text, tool_calls=made, reasoning=reasoning))
            continue
        results = tuple(
            ToolResult(
                call_id=b["tool_use_id"],
                content=_result_text(b.get("content")),
                is_error=bool(b.get("is_error", False)),
                name=calls[b["tool_use_id"]].name if b["tool_use_id"] in calls else None,
                arguments=calls[b["tool_use_id"]].arguments if b["tool_use_id"] in calls else None,
            )
            for b in blocks
            if b["type"] == "tool_result"
        )
        turns.append(Turn(role="user", text=text, tool_results=results))
    return ConversationView(
        vendor=VENDOR,
        model=request.model,
        system="\n".join(b["text"] for b in request.system),
        turns=tuple(turns),
        tool_specs=tuple(tool_spec(t["name"], t.get("description"), t.get("input_schema")) for t in request.tools),
        reasoning_enabled=request.thinking_on,
        output_schema=request.output_schema,
    )


def _readable(block: Mapping[str, Any]) -> bool:
    """A text block, or a compaction block with its summary (what the model reads in place of the span)."""
    return block["type"] == "text" or (block["type"] == "compaction" and block.get("content") is not None)


def _result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) if isinstance(part, dict) and part.get("type") == "text" else "[non-text]"
            for part in content
        )
    return json.dumps(content)


def _render_turn(
    state: TwinState, request: AnthropicRequest, turn: AssistantTurn, prefix_digest: str
) -> tuple[list[dict[str, Any]], str, int]:
    """Content blocks, stop reason and output tokens; output beyond max_tokens is cut like the vendor does."""
    content: list[dict[str, Any]] = []
    budget = request.max_tokens
    if request.thinking_on:
        text = "" if request.thinking_omitted else (turn.reasoning or DEFAULT_THINKING)
        signature = sign_thinking(state.secret, model=request.model, prefix_digest=prefix_digest, text=text)
        content.append({"type": "thinking", "thinking": text, "signature": signature})
        budget -= count_tokens(text)
    calls: list[dict[str, Any]] = [
        {"type": "tool_use", "id": state.ids.next("toolu"), "name": c.name, "input": dict(c.arguments)}
        for c in turn.tool_calls
    ]
    needed = count_tokens(turn.text) + sum(count_tokens(c["name"]) + count_json(c["input"]) for c in calls)
    if needed <= budget:
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        content.extend(calls)
        return content, "tool_use" if calls else "end_turn", request.max_tokens - budget + needed
    cut = truncate_to_tokens(turn.text, max(budget, 0))
    if cut:
        content.append({"type": "text", "text": cut})
    return content, "max_tokens", request.max_tokens - budget + count_tokens(cut)


def _cache_blocks(
    request: AnthropicRequest, messages: list[dict[str, Any]], images: ImageFormula | None
) -> list[CacheBlock]:
    """The prompt as cache blocks in the vendor's order: tools, system, messages; an image's tokens by the model's
    formula (`images`, segue_twin.images).

    Settings the prompt-caching page lists as invalidating a level are folded into the key of that level's first
    block, so changing them misses that level's entries and every later one: speed the system level; thinking,
    effort (which has "the same model-specific effect on tool and system caches as thinking parameters"),
    tool_choice and the images in the prompt the message level. Tool entries always survive them.
    """
    bp = request.breakpoints
    blocks = [
        CacheBlock(key=b"tool" + _key(tool), tokens=count_json(strip_for_binding(tool)), breakpoint_ttl=bp.get(path))
        for path, tool in ((f"tools.{i}", t) for i, t in enumerate(request.tools))
    ]
    first_after_tools = len(blocks)
    blocks += [
        CacheBlock(
            key=b"system" + _key(b), tokens=count_json(strip_for_binding(b)), breakpoint_ttl=bp.get(f"system.{j}")
        )
        for j, b in enumerate(request.system)
    ]
    first_message = len(blocks)
    for i, message in enumerate(messages):
        original = request.messages[i]["content"] if i < len(request.messages) else []
        for block in message["content"]:
            # Dropped thinking blocks shift positions; breakpoints are keyed by the position as sent. A block the
            # request did not send (the compaction block the twin continues from) carries none.
            j = next((k for k, candidate in enumerate(original) if candidate is block), None)
            blocks.append(
                CacheBlock(
                    key=ordered_json({"role": message["role"]}) + _key(block),
                    tokens=block_tokens(strip_for_binding(block), images, request.model),
                    breakpoint_ttl=None if j is None else bp.get(f"messages.{i}.content.{j}"),
                )
            )
    message_settings = {
        "thinking": _thinking_setting(request),
        "effort": DEFAULT_EFFORT if request.effort is None else request.effort,
        "tool_choice": request.tool_choice,
        "images": _image_count(request.messages),
    }
    _fold(blocks, first_message, message_settings)
    _fold(blocks, first_after_tools, {"speed": request.speed})
    return blocks


def _fold(blocks: list[CacheBlock], index: int, settings: dict[str, Any]) -> None:
    """Prefix ``settings`` to the key of ``blocks[index]`` (nothing to do when that level is empty)."""
    if index < len(blocks):
        blocks[index] = attrs.evolve(blocks[index], key=ordered_json(settings) + blocks[index].key)


def _image_count(messages: list[dict[str, Any]]) -> int:
    """Image blocks anywhere in the messages, tool results included: adding or removing one changes the count."""
    count = 0
    for message in messages:
        for block in message["content"]:
            nested = block.get("content") if block["type"] == "tool_result" else None
            parts = [block, *(nested if isinstance(nested, list) else [])]
            count += sum(1 for part in parts if isinstance(part, dict) and part.get("type") == "image")
    return count


def _thinking_setting(request: AnthropicRequest) -> Any:
    if request.thinking is None:
        return None
    return {k: v for k, v in request.thinking.items() if k in ("type", "budget_tokens")}


def _key(block: Any) -> bytes:
    return ordered_json(strip_for_binding(block))


def _usage(usage: BlockUsage, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation": {f"ephemeral_{name}_input_tokens": n for name, n in usage.cache_creation.items()},
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def stream_events(message: dict[str, Any]) -> list[bytes]:
    """The SSE events of a finished message, in the vendor's order; they assemble to ``message``."""
    usage = message["usage"]
    start = {k: v for k, v in message.items() if k not in ("content", "stop_reason", "usage")}
    start.update(content=[], stop_reason=None, usage={**usage, "output_tokens": 1})
    events = [sse("message_start", {"type": "message_start", "message": start}), sse("ping", {"type": "ping"})]
    for index, block in enumerate(message["content"]):
        events.extend(_block_events(index, block))
    final_usage = {k: usage[k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")}
    final_usage["output_tokens"] = usage["output_tokens"]
    if "iterations" in usage:  # BetaMessageDeltaUsage.iterations
        final_usage["iterations"] = usage["iterations"]
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    event: dict[str, Any] = {"type": "message_delta", "delta": delta, "usage": final_usage}
    if "context_management" in message:  # BetaRawMessageDeltaEvent.context_management
        event["context_management"] = message["context_management"]
    events.append(sse("message_delta", event))
    events.append(sse("message_stop", {"type": "message_stop"}))
    return events


def _block_events(index: int, block: dict[str, Any]) -> list[bytes]:
    kind = block["type"]
    deltas: list[dict[str, Any]] = []
    if kind == "text":
        opening: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": part} for part in pieces(block["text"])]
    elif kind == "compaction":  # BetaCompactionContentBlockDelta carries the summary
        opening = {"type": "compaction", "content": None}
        deltas = [{"type": "compaction_delta", "content": block["content"]}]
    elif kind == "thinking":
        opening = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": part} for part in pieces(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:
        opening = {**block, "input": {}}
        arguments = json.dumps(block["input"], separators=(",", ":"), ensure_ascii=False)
        deltas = [{"type": "input_json_delta", "partial_json": part} for part in pieces(arguments)]
    out = [sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})]
    out += [sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
    out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    return out
