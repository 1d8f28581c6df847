"""OpenAI Chat Completions (`POST /v1/chat/completions`): tool-call pairing, prefix caching, streamed chunks.

Gemini's OpenAI-compatible endpoint is served by the same handler with `vendor="gemini"`: its thought-signature
rule (segue_twin.gemini) on top, and no cache emulation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from segue._core.image_tokens import ImageFormula
from segue_twin import gemini
from segue_twin._wire import ordered_json, pieces, sse
from segue_twin.cache import prompt_tokens
from segue_twin.errors import bad_request
from segue_twin.openai_cache import CacheOutcome, PromptPiece, item_pieces
from segue_twin.openai_common import (
    VENDOR,
    CommonParams,
    SizedTurn,
    cache_outcome,
    common_params,
    content_text,
    expect,
    model_param,
    parse_arguments,
    size_turn,
)
from segue_twin.state import Reply, TwinState
from segue_twin.structured import openai_schema, respond
from segue_twin.view import ConversationView, ToolCall, ToolResult, Turn, tool_spec

_ROLES = ("system", "developer", "user", "assistant", "tool")
#: `prompt_cache_options` keys Chat Completions takes (the pinned SDK's chat `PromptCacheOptions`: no prewarm).
_CACHE_OPTION_FIELDS = ("mode", "ttl")


def handle_chat(state: TwinState, body: Mapping[str, Any], *, vendor: str = VENDOR) -> Reply:
    """A completion; ``vendor`` "gemini" for Gemini's OpenAI-compatible endpoint (signatures, no cache)."""
    # The twin emulates OpenAI's cache only; on Gemini's endpoint the cache parameters are not checked.
    rules = state.rules(model_param(body), VENDOR) if vendor == VENDOR else None
    params = common_params(
        body,
        max_tokens_fields=("max_tokens", "max_completion_tokens"),
        rules=rules,
        option_fields=_CACHE_OPTION_FIELDS,
        # The chat `ttl` "Defaults to `30m`, which is currently the only supported value": the default only.
        option_ttls=(rules.default_ttl,) if rules is not None else (),
        vendor=vendor,
    )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request(
            "Missing required parameter: 'messages'.", param="messages", code="missing_required_parameter"
        )
    _check_messages(messages)
    if vendor == gemini.VENDOR:
        gemini.check_signatures(params.model, messages)
    tools = [
        expect(t, (dict,), f"tools[{i}]", optional=False)
        for i, t in enumerate(expect(body.get("tools"), (list,), "tools") or [])
    ]
    for i, tool in enumerate(tools):
        expect(tool.get("function"), (dict,), f"tools[{i}].function", optional=False)
    expect(body.get("stream_options"), (dict,), "stream_options")

    schema = openai_schema(_chat_format(body.get("response_format")), "response_format")
    turn = respond(state.policy, attrs.evolve(_view(params, tools, messages), output_schema=schema))
    sized = size_turn(turn, reasons=params.reasons, max_output=params.max_output)
    header = {"response_format": body.get("response_format"), "reasoning_effort": params.effort}
    prompt = _pieces(header, tools, messages, rules.image_tokens if rules is not None else None, params.model)
    outcome: CacheOutcome | None = None
    if rules is not None:
        outcome = cache_outcome(state, params, prompt)
        input_tokens = outcome.input_tokens
    else:
        input_tokens = prompt_tokens(b"\n".join(ordered_json(piece.render) for piece in prompt))

    message: dict[str, Any] = {"role": "assistant", "content": sized.text or None, "refusal": None, "annotations": []}
    tool_calls = [
        {"id": state.ids.next("call"), "type": "function", "function": {"name": name, "arguments": arguments}}
        for name, arguments in sized.calls
    ]
    if vendor == gemini.VENDOR:
        gemini.sign_calls(state.secret, params.model, tool_calls)
    if tool_calls:
        message["tool_calls"] = tool_calls
    finish = "length" if sized.truncated else ("tool_calls" if tool_calls else "stop")
    completion = {
        "id": state.ids.next("chatcmpl"),
        "object": "chat.completion",
        "created": int(state.clock()),
        "model": params.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": _usage(input_tokens, outcome, sized),
        "service_tier": "default",
        "system_fingerprint": "fp_segue_twin",
    }
    if not params.stream:
        return Reply(body=completion, note=turn.note)
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    events = tuple(stream_chunks(completion, include_usage=include_usage))
    return Reply(body=completion, events=events, note=turn.note)


def _check_messages(messages: list[Any]) -> None:
    pending: dict[str, int] = {}
    owner = -1
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            role = message.get("role") if isinstance(message, dict) else message
            raise bad_request(
                f"Invalid value for 'messages[{i}].role': {role!r}; expected one of {list(_ROLES)}.",
                param=f"messages.[{i}].role",
            )
        role = message["role"]
        _check_fields(message, i)
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                raise bad_request(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                    f"'tool_calls' (messages[{i}].tool_call_id={call_id!r}).",
                    param=f"messages.[{i}].role",
                )
            del pending[call_id]
            continue
        if pending:
            break
        if role == "assistant":
            calls = message.get("tool_calls") or []
            pending = {str(c.get("id")): i for c in calls if isinstance(c, dict)}
            owner = i
    if pending:
        raise bad_request(
            "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}",
            param=f"messages.[{owner}].role",
        )


def _check_fields(message: dict[str, Any], i: int) -> None:
    expect(message.get("content"), (str, list), f"messages[{i}].content")
    if message["role"] == "tool":
        expect(message.get("tool_call_id"), (str,), f"messages[{i}].tool_call_id", optional=False)
    calls = expect(message.get("tool_calls"), (list,), f"messages[{i}].tool_calls")
    for j, call in enumerate(calls or []):
        where = f"messages[{i}].tool_calls[{j}]"
        expect(call, (dict,), where, optional=False)
        expect(call.get("id"), (str,), f"{where}.id", optional=False)
        function = expect(call.get("function"), (dict,), f"{where}.function", optional=False)
        expect(function.get("name"), (str,), f"{where}.function.name", optional=False)
        expect(function.get("arguments"), (str,), f"{where}.function.arguments", optional=False)


def _chat_format(response_format: Any) -> Any:
    """Chat's `response_format` nests the format under `json_schema`; the same fields as Responses' text.format."""
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        inner = response_format.get("json_schema")
        return {**inner, "type": "json_schema"} if isinstance(inner, dict) else {"type": "json_schema"}
    return response_format


def _pieces(
    header: Any, tools: list[Any], messages: list[dict[str, Any]], images: ImageFormula | None, model: str
) -> list[PromptPiece]:
    """The prompt as the caches see it: settings, tools, then every message's content parts (images by the
    model's formula, `images`).

    An assistant message (text and tool calls) is one piece; its parts never carry breakpoints.
    """
    pieces = [PromptPiece(render=header), PromptPiece(render=tools)]
    for i, message in enumerate(messages):
        role, path = message["role"], f"messages[{i}]"
        if role == "assistant":
            render: dict[str, Any] = {"role": role, "content": content_text(message.get("content"))}
            if message.get("tool_calls"):
                render["tool_calls"] = [
                    {
                        "id": c.get("id"),
                        "name": (c.get("function") or {}).get("name"),
                        "arguments": (c.get("function") or {}).get("arguments"),
                    }
                    for c in message["tool_calls"]
                ]
            pieces.append(PromptPiece(render=render))
            continue
        tail = {"tool_call_id": message.get("tool_call_id")} if role == "tool" else None
        pieces += item_pieces(
            {"role": role},
            message.get("content"),
            eligible=True,
            field="content",
            path=path,
            tail=tail,
            images=images,
            model=model,
        )
    return pieces


def _view(params: CommonParams, tools: list[Any], messages: list[dict[str, Any]]) -> ConversationView:
    system: list[str] = []
    turns: list[Turn] = []
    calls: dict[str, ToolCall] = {}
    results: list[ToolResult] = []
    for i, message in enumerate(messages):
        role = message["role"]
        if role != "tool" and results:
            turns.append(Turn(role="user", tool_results=tuple(results)))
            results = []
        text = content_text(message.get("content"))
        if role in ("system", "developer"):
            system.append(text)
        elif role == "user":
            turns.append(Turn(role="user", text=text))
        elif role == "assistant":
            made = tuple(
                ToolCall(
                    id=str(c.get("id")),
                    name=str((c.get("function") or {}).get("name")),
                    arguments=parse_arguments((c.get("function") or {}).get("arguments"), f"messages[{i}].tool_calls"),
                )
                for c in message.get("tool_calls") or []
            )
            calls.update((c.id, c) for c in made)
            turns.append(Turn(role="assistant", text=text, tool_calls=made))
        else:
            made_call = calls.get(str(message.get("tool_call_id")))
            results.append(
                ToolResult(
                    call_id=str(message.get("tool_call_id")),
                    content=text,
                    name=made_call.name if made_call else None,
                    arguments=made_call.arguments if made_call else None,
                )
            )
    if results:
        turns.append(Turn(role="user", tool_results=tuple(results)))
    return ConversationView(
        vendor=VENDOR,
        model=params.model,
        system="\n".join(system),
        turns=tuple(turns),
        tool_specs=tuple(
            tool_spec(f.get("name"), f.get("description"), f.get("parameters"))
            for t in tools
            if isinstance(t, dict) and t.get("type") == "function" and isinstance(f := t.get("function"), dict)
        ),
        reasoning_enabled=params.reasons,
    )


def _usage(input_tokens: int, outcome: CacheOutcome | None, sized: SizedTurn) -> dict[str, Any]:
    """The usage; without a cache `outcome` (an endpoint whose cache the twin does not emulate) the cached part
    is left out, so a reader records "not said", never a miss."""
    usage: dict[str, Any] = {
        "prompt_tokens": input_tokens,
        "completion_tokens": sized.output_tokens,
        "total_tokens": input_tokens + sized.output_tokens,
    }
    if outcome is not None:
        usage["prompt_tokens_details"] = {
            "cached_tokens": outcome.cached_tokens,
            "cache_write_tokens": outcome.write_tokens,
            "audio_tokens": 0,
        }
    usage["completion_tokens_details"] = {
        "reasoning_tokens": sized.reasoning_tokens,
        "audio_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    }
    return usage


def stream_chunks(completion: dict[str, Any], *, include_usage: bool) -> list[bytes]:
    """The chunks of a finished completion, ending with an optional usage chunk and `[DONE]`."""
    base = {k: completion[k] for k in ("id", "created", "model", "service_tier", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    events: list[bytes] = []

    def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
        body: dict[str, Any] = {
            **base,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        if include_usage:
            body["usage"] = None
        events.append(sse(None, body))

    choice = completion["choices"][0]
    message = choice["message"]
    chunk({"role": "assistant", "content": "", "refusal": None})
    for part in pieces(message["content"] or ""):
        chunk({"content": part})
    for index, call in enumerate(message.get("tool_calls", [])):
        opening = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        if "extra_content" in call:  # Gemini: the thought signature comes with the call's first chunk
            opening["extra_content"] = call["extra_content"]
        chunk({"tool_calls": [opening]})
        for part in pieces(call["function"]["arguments"]):
            chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
    chunk({}, choice["finish_reason"])
    if include_usage:
        events.append(sse(None, {**base, "choices": [], "usage": completion["usage"]}))
    events.append(sse(None, "[DONE]"))
    return events
