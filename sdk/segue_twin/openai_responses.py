"""OpenAI Responses (`POST /v1/responses`): reasoning items with verifiable encrypted_content, prefix caching.

Rules (https://developers.openai.com/api/docs/guides/reasoning and the SDK's `types/responses`):
- a reasoning item replayed without `encrypted_content` under `store: false` is "not found" (404);
- `encrypted_content` that does not verify is a 400 (`invalid_encrypted_content`);
- reasoning from another model is omitted, not rejected;
- a `function_call` carrying its server `id` must come with the reasoning item of the same output
  (reasoning models only), otherwise 400 "... was provided without its required 'reasoning' item".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from segue._core.image_tokens import ImageFormula
from segue._core.tokens import count_tokens
from segue_twin.diagnostics import openai_answer, openai_fingerprint
from segue_twin.errors import TwinHTTPError, bad_request
from segue_twin.openai_cache import CacheOutcome, PromptPiece, item_pieces
from segue_twin.openai_common import (
    PHASES,
    VENDOR,
    CommonParams,
    SizedTurn,
    cache_outcome,
    common_params,
    content_text,
    expect,
    labels_phase,
    model_param,
    parse_arguments,
    size_turn,
)
from segue_twin.openai_compaction import after_last_compaction, compacted, compaction_item, compaction_threshold
from segue_twin.responses_stream import stream_events
from segue_twin.signing import seal, unseal
from segue_twin.state import Reply, TwinState
from segue_twin.structured import openai_schema, respond
from segue_twin.view import ConversationView, ToolCall, ToolResult, Turn, tool_spec

_OUTPUT_KINDS = frozenset({"reasoning", "function_call", "assistant"})
#: `prompt_cache_options` keys the Responses API takes (the pinned SDK's `PromptCacheOptions`).
_CACHE_OPTION_FIELDS = ("mode", "ttl", "prewarm", "comparison_response_id")
#: Input message roles whose content parts may carry `prompt_cache_breakpoint` (not assistant output).
_BREAKPOINT_ROLES = ("user", "system", "developer")
#: Per input item type: field -> (accepted JSON types, required).
_ITEM_FIELDS: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "message": {"role": ((str,), True), "content": ((str, list), True), "phase": ((str,), False)},
    "function_call": {
        "call_id": ((str,), True),
        "name": ((str,), True),
        "arguments": ((str,), True),
        "id": ((str,), False),
    },
    "function_call_output": {"call_id": ((str,), True), "output": ((str, list), True)},
    "reasoning": {"id": ((str,), False), "summary": ((list,), False), "encrypted_content": ((str,), False)},
    "item_reference": {"id": ((str,), True)},
    "compaction": {"encrypted_content": ((str,), True), "id": ((str,), False)},
}


def handle_responses(state: TwinState, body: Mapping[str, Any]) -> Reply:
    rules = state.rules(model_param(body), VENDOR)
    params = common_params(
        body,
        max_tokens_fields=("max_output_tokens",),
        rules=rules,
        option_fields=_CACHE_OPTION_FIELDS,
        option_ttls=tuple(rules.ttl_seconds),
    )
    if body.get("previous_response_id") is not None:
        raise bad_request(
            "The twin does not emulate 'previous_response_id'; send the full input (with reasoning items) instead.",
            param="previous_response_id",
        )
    store = body.get("store", True)
    if not isinstance(store, bool):
        raise bad_request(f"Invalid type for 'store': expected a boolean, got {store!r}.", param="store")
    include = expect(body.get("include"), (list,), "include") or []
    instructions = expect(body.get("instructions"), (str,), "instructions")
    tools = [
        expect(t, (dict,), f"tools[{i}]", optional=False)
        for i, t in enumerate(expect(body.get("tools"), (list,), "tools") or [])
    ]
    expect(body.get("text"), (dict,), "text")
    items = after_last_compaction(state, _resolve_items(state, _input_items(body.get("input")), params, store))
    _check_reasoning_pairing(items, params)
    threshold = compaction_threshold(body)

    prewarm = params.cache_options is not None and params.cache_options.prewarm
    header = {"text": body.get("text"), "reasoning_effort": params.effort}
    prompt = _pieces(header, tools, instructions, items, rules.image_tokens, params.model)
    compaction = None if prewarm else compaction_item(state, items, prompt, threshold)
    # prewarm "Prepares the prompt cache without generating output": the model is not asked.
    note = ""
    if prewarm:
        sized = SizedTurn(reasoning="", text="", calls=(), reasoning_tokens=0, output_tokens=0, truncated=False)
    else:
        schema = openai_schema((body.get("text") or {}).get("format"), "text.format")
        seen = items if compaction is None else compacted(items, compaction)
        turn = respond(state.policy, attrs.evolve(_view(params, instructions, tools, seen), output_schema=schema))
        sized = size_turn(turn, reasons=params.reasons, max_output=params.max_output)
        note = turn.note
    outcome = cache_outcome(state, params, prompt)

    summary_wanted = isinstance(body.get("reasoning"), dict) and body["reasoning"].get("summary") is not None
    encrypted = "reasoning.encrypted_content" in include or not store
    output = (
        []
        if prewarm
        else _output_items(state, params, sized, summary_wanted=summary_wanted, encrypted=encrypted, store=store)
    )
    output = output if compaction is None else [{k: v for k, v in compaction.items() if k != "twin_summary"}, *output]
    response: dict[str, Any] = {
        "id": state.ids.next("resp"),
        "object": "response",
        "created_at": int(state.clock()),
        "status": "incomplete" if sized.truncated else "completed",
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if sized.truncated else None,
        "instructions": instructions,
        "max_output_tokens": params.max_output,
        "model": params.model,
        "output": output,
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "prompt_cache_key": params.cache_key,
        "prompt_cache_options": params.cache_options.applied() if params.cache_options else None,
        "prompt_cache_retention": params.retention,
        "reasoning": {"effort": params.effort, "summary": (body.get("reasoning") or {}).get("summary")},
        "store": store,
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": tools,
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "metadata": body.get("metadata") or {},
        "usage": _usage(outcome, sized),
    }
    _diagnose(state, params, body, tools, instructions, items, response, rules.diagnostics)
    if not params.stream:
        return Reply(body=response, note=note)
    return Reply(body=response, events=tuple(stream_events(response)), note=note)


def _diagnose(
    state: TwinState,
    params: Any,
    body: Mapping[str, Any],
    tools: list[Any],
    instructions: Any,
    items: list[dict[str, Any]],
    response: dict[str, Any],
    offered: bool,
) -> None:
    """Cache diagnostics (segue_twin.diagnostics): every response leaves a fingerprint; a request naming an earlier
    one in `prompt_cache_options.comparison_response_id` gets `prompt_cache_diagnostics` where the path has them
    (elsewhere nothing comes back: the field requests diagnostics "when the feature is enabled")."""
    raw_text = body.get("text")
    text: Mapping[str, Any] = raw_text if isinstance(raw_text, dict) else {}
    prompt = [p.render for p in _pieces(None, [], instructions, items, None, params.model)[2:]]
    current = openai_fingerprint(
        model=params.model,
        cache_key=params.cache_key,
        service_tier=body.get("service_tier"),
        tools=tools,
        text_format=text.get("format"),
        effort=params.effort,
        verbosity=text.get("verbosity"),
        prompt=prompt,
    )
    fingerprints = state.fingerprints[VENDOR]
    compared = params.cache_options.comparison_response_id if params.cache_options is not None else None
    if offered and compared is not None:
        response["prompt_cache_diagnostics"] = openai_answer(fingerprints, compared, current)
    fingerprints.remember(response["id"], current)


def handle_compact(state: TwinState, body: Mapping[str, Any]) -> Reply:
    """`POST /v1/responses/compact` (the pinned SDK's `responses.compact`): the input compacted, answered as a
    CompactedResponse whose output "is a list of all user messages, followed by a single compaction item" and whose
    usage is the "Token accounting for the compaction pass" (the SDK's CompactedResponse docstrings)."""
    rules = state.rules(model_param(body), VENDOR)
    params = common_params(body, max_tokens_fields=(), rules=rules, option_fields=(), option_ttls=())
    instructions = expect(body.get("instructions"), (str,), "instructions")
    items = after_last_compaction(state, _resolve_items(state, _input_items(body.get("input")), params, False))
    prompt = _pieces({}, [], instructions, items, rules.image_tokens, params.model)
    compaction = compaction_item(state, items, prompt, 0)  # the endpoint always compacts
    assert compaction is not None
    summary = compaction.pop("twin_summary")
    users = [i for i in items if i["type"] == "message" and i.get("role") == "user"]
    output = [{"id": state.ids.next("msg"), "status": "completed", **u} for u in users] + [compaction]
    sized = SizedTurn(
        reasoning="", text="", calls=(), reasoning_tokens=0, output_tokens=count_tokens(summary), truncated=False
    )
    answer = {
        "id": state.ids.next("resp"),
        "object": "response.compaction",
        "created_at": int(state.clock()),
        "output": output,
        "usage": _usage(cache_outcome(state, params, prompt), sized),
    }
    return Reply(body=answer)


def _input_items(raw: Any) -> list[dict[str, Any]]:
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise bad_request("Missing required parameter: 'input'.", param="input", code="missing_required_parameter")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise bad_request(f"Invalid 'input[{i}]': expected an object.", param=f"input[{i}]")
        kind = item.get("type", "message" if "role" in item else None)
        if kind not in _ITEM_FIELDS:
            raise bad_request(f"Invalid 'input[{i}].type': {kind!r} is not supported by the twin.", param=f"input[{i}]")
        for name, (kinds, required) in _ITEM_FIELDS[kind].items():
            expect(item.get(name), kinds, f"input[{i}].{name}", optional=not required)
        if kind == "message" and item.get("phase") is not None and item["phase"] not in PHASES:
            raise bad_request(
                f"Invalid value for 'input[{i}].phase': {item['phase']!r}; expected commentary or final_answer.",
                param=f"input[{i}].phase",
            )
        if kind == "message" and item["role"] not in ("user", "assistant", "system", "developer"):
            raise bad_request(
                f"Invalid value for 'input[{i}].role': {item['role']!r}; expected user, assistant, system or "
                "developer.",
                param=f"input[{i}].role",
            )
        out.append({**item, "type": kind})
    return out


def _not_found(item_id: Any, store: bool) -> TwinHTTPError:
    hint = (
        " Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this "
        "item from your input."
        if not store
        else ""
    )
    return TwinHTTPError(404, f"Item with id '{item_id}' not found.{hint}", param="input")


def _resolve_items(
    state: TwinState, items: list[dict[str, Any]], params: CommonParams, store: bool
) -> list[dict[str, Any]]:
    """Replace references by stored items, verify reasoning, and mark reasoning from other models as omitted."""
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        if item["type"] == "item_reference":
            found = state.stored_items.get(str(item.get("id"))) if store else None
            if found is None:
                raise _not_found(item.get("id"), store)
            item = found
        if item["type"] == "reasoning":
            item = _verified_reasoning(state, item, params, store, i)
        out.append(item)
    return out


def _verified_reasoning(
    state: TwinState, item: dict[str, Any], params: CommonParams, store: bool, index: int
) -> dict[str, Any]:
    token = item.get("encrypted_content")
    if token is None:
        stored = state.stored_items.get(str(item.get("id"))) if store else None
        if stored is None:
            raise _not_found(item.get("id"), store)
        payload = stored["twin_payload"]
    else:
        opened = unseal(state.secret, token)
        if opened is None:
            raise bad_request(
                f"The encrypted content for item {item.get('id')!r} could not be verified. Replay reasoning items "
                "exactly as they were returned.",
                param=f"input[{index}].encrypted_content",
                code="invalid_encrypted_content",
            )
        payload = opened
    # Reasoning is reusable only within the model that wrote it; other models' reasoning is omitted silently.
    omitted = payload.get("model") != params.model
    return {**item, "twin_payload": payload, "twin_omitted": omitted}


def _check_reasoning_pairing(items: list[dict[str, Any]], params: CommonParams) -> None:
    if not params.reasons:
        return
    group_has_reasoning = False
    for item in items:
        kind = _kind(item)
        if kind not in _OUTPUT_KINDS:
            group_has_reasoning = False
            continue
        if kind == "reasoning":
            group_has_reasoning = True
        elif kind == "function_call" and item.get("id") and not group_has_reasoning:
            raise bad_request(
                f"Item '{item['id']}' of type 'function_call' was provided without its required 'reasoning' item. "
                "Replay the reasoning item that preceded it (with encrypted_content), or drop the function_call's "
                "'id'.",
                param="input",
            )


def _kind(item: dict[str, Any]) -> str:
    if item["type"] == "message":
        return "assistant" if item.get("role") == "assistant" else "message"
    return str(item["type"])


def _pieces(
    header: Any,
    tools: list[Any],
    instructions: Any,
    items: list[dict[str, Any]],
    images: ImageFormula | None,
    model: str,
) -> list[PromptPiece]:
    """The prompt as the caches see it: settings, tools, instructions, then every item's content parts (images by
    the model's formula, `images`).

    Ids, statuses and content representation do not matter; reasoning contributes its decoded text.
    """
    pieces = [PromptPiece(render=header), PromptPiece(render=tools), PromptPiece(render=instructions)]
    for i, item in enumerate(items):
        kind, path = item["type"], f"input[{i}]"
        if kind == "message":
            eligible = item.get("role") in _BREAKPOINT_ROLES
            pieces += item_pieces(
                {"role": item.get("role")},
                item.get("content"),
                eligible=eligible,
                field="content",
                path=path,
                images=images,
                model=model,
            )
        elif kind == "function_call_output":
            head = {"type": kind, "call_id": item.get("call_id")}
            pieces += item_pieces(
                head, item.get("output"), eligible=True, field="output", path=path, images=images, model=model
            )
        elif kind == "function_call":
            render = {k: item.get(k) for k in ("type", "call_id", "name", "arguments")}
            pieces.append(PromptPiece(render=render))
        elif kind == "compaction":
            pieces.append(PromptPiece(render={"type": kind, "summary": item.get("twin_summary", "")}))
        elif item.get("twin_omitted"):
            pieces.append(PromptPiece(render={"type": "reasoning", "omitted": True}))
        else:
            pieces.append(PromptPiece(render={"type": "reasoning", "text": item["twin_payload"].get("reasoning", "")}))
    return pieces


def _usage(outcome: CacheOutcome, sized: SizedTurn) -> dict[str, Any]:
    details: dict[str, Any] = {"cached_tokens": outcome.cached_tokens, "cache_write_tokens": outcome.write_tokens}
    if (per_ttl := outcome.write_details()) is not None:
        details["cache_write_tokens_details"] = per_ttl
    return {
        "input_tokens": outcome.input_tokens,
        "input_tokens_details": details,
        "output_tokens": sized.output_tokens,
        "output_tokens_details": {"reasoning_tokens": sized.reasoning_tokens},
        "total_tokens": outcome.input_tokens + sized.output_tokens,
    }


def _view(params: CommonParams, instructions: Any, tools: list[Any], items: list[dict[str, Any]]) -> ConversationView:
    system = [instructions] if isinstance(instructions, str) and instructions else []
    turns: list[dict[str, Any]] = []
    calls: dict[str, ToolCall] = {}

    def current(role: str) -> dict[str, Any]:
        if not turns or turns[-1]["role"] != role:
            turns.append({"role": role, "text": [], "tool_calls": [], "tool_results": [], "reasoning": []})
        return turns[-1]

    for i, item in enumerate(items):
        kind = _kind(item)
        if kind == "message":
            if item.get("role") in ("system", "developer"):
                system.append(content_text(item.get("content")))
            else:
                current("user")["text"].append(content_text(item.get("content")))
        elif kind == "assistant":
            current("assistant")["text"].append(content_text(item.get("content")))
        elif kind == "compaction":
            current("user")["text"].append(str(item.get("twin_summary", "")))
        elif kind == "reasoning":
            if not item.get("twin_omitted"):
                current("assistant")["reasoning"].append(str(item["twin_payload"].get("reasoning", "")))
        elif kind == "function_call":
            call = ToolCall(
                id=str(item.get("call_id")),
                name=str(item.get("name")),
                arguments=parse_arguments(item.get("arguments"), f"input[{i}].arguments"),
            )
            calls[call.id] = call
            current("assistant")["tool_calls"].append(call)
        else:
            call_id = str(item.get("call_id"))
            made = calls.get(call_id)
            current("user")["tool_results"].append(
                ToolResult(
                    call_id=call_id,
                    content=content_text(item.get("output")),
                    name=made.name if made else None,
                    arguments=made.arguments if made else None,
                )
            )
    return ConversationView(
        vendor=VENDOR,
        model=params.model,
        system="\n".join(system),
        turns=tuple(
            Turn(
                role=t["role"],
                text="\n".join(t["text"]),
                tool_calls=tuple(t["tool_calls"]),
                tool_results=tuple(t["tool_results"]),
                reasoning="\n".join(t["reasoning"]),
            )
            for t in turns
        ),
        tool_specs=tuple(
            tool_spec(t.get("name"), t.get("description"), t.get("parameters"))
            for t in tools
            if isinstance(t, dict) and t.get("type") == "function"
        ),
        reasoning_enabled=params.reasons,
    )


def _output_items(
    state: TwinState, params: CommonParams, sized: SizedTurn, *, summary_wanted: bool, encrypted: bool, store: bool
) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if params.reasons:
        rs_id = state.ids.next("rs")
        payload = {"model": params.model, "id": rs_id, "reasoning": sized.reasoning}
        item: dict[str, Any] = {
            "id": rs_id,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": sized.reasoning}] if summary_wanted else [],
        }
        if encrypted:
            item["encrypted_content"] = seal(state.secret, payload)
        if store:
            state.stored_items[rs_id] = {**item, "twin_payload": payload}
        output.append(item)
    if sized.text:
        message: dict[str, Any] = {
            "id": state.ids.next("msg"),
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": sized.text, "annotations": [], "logprobs": []}],
        }
        if labels_phase(params.model):
            message["phase"] = "commentary" if sized.calls else "final_answer"
        output.append(message)
    for name, arguments in sized.calls:
        output.append(
            {
                "id": state.ids.next("fc"),
                "type": "function_call",
                "call_id": state.ids.next("call"),
                "name": name,
                "arguments": arguments,
                "status": "completed",
            }
        )
    if store:
        state.stored_items.update((i["id"], i) for i in output if i["type"] != "reasoning")
    return output
