"""What the OpenAI Responses and Chat Completions endpoints share: parameters, caching, output sizing.

Caching (segue_twin.openai_cache) runs inside a bucket of (model, prompt_cache_key); requests without a key share
one bucket per model (the prefix-hash routing).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import attrs

from segue._core.tokens import count_tokens
from segue_twin._wire import truncate_to_tokens
from segue_twin.errors import bad_request
from segue_twin.openai_cache import CacheOptions, CacheOutcome, PromptPiece, account, cache_options, check_retention
from segue_twin.rules import CacheRules, openai_model_reasons
from segue_twin.state import TwinState
from segue_twin.view import AssistantTurn

VENDOR = "openai"
#: Reasoning text used when a reasoning model's policy turn carries none (reasoning items are always emitted).
DEFAULT_REASONING = "Deciding the next step."


@attrs.frozen(kw_only=True)
class CommonParams:
    model: str
    stream: bool
    cache_key: str | None
    retention: str | None
    reasons: bool
    effort: str | None
    max_output: int | None
    #: `prompt_cache_options` as applied; None on models without a breakpoint cache.
    cache_options: CacheOptions | None


def common_params(
    body: Mapping[str, Any],
    *,
    max_tokens_fields: Sequence[str],
    rules: CacheRules | None,
    option_fields: Collection[str],
    option_ttls: Collection[str],
    vendor: str = VENDOR,
) -> CommonParams:
    """The parameters both endpoints take; ``option_fields`` / ``option_ttls``: what `prompt_cache_options` may
    hold and which TTLs it may name on this endpoint. ``rules`` None: the twin emulates no cache for ``vendor``
    (Gemini's OpenAI-compatible endpoint), so the cache parameters are not checked."""
    model = model_param(body)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad_request(f"Invalid type for 'stream': expected a boolean, got {stream!r}.", param="stream")
    key = body.get("prompt_cache_key")
    if key is not None and not isinstance(key, str):
        raise bad_request(
            f"Invalid type for 'prompt_cache_key': expected a string, got {key!r}.", param="prompt_cache_key"
        )
    retention = expect(body.get("prompt_cache_retention"), (str,), "prompt_cache_retention")
    options = None
    if rules is not None:
        check_retention(retention, rules)
        options = cache_options(body, rules, model, fields=option_fields, ttls=option_ttls)
    reasons = openai_model_reasons(model, vendor)
    reasoning = expect(body.get("reasoning"), (dict,), "reasoning")
    effort = expect(
        reasoning.get("effort") if reasoning is not None else body.get("reasoning_effort"), (str,), "reasoning.effort"
    )
    if effort not in (None, "none") and not reasons:
        raise bad_request(
            f"Unsupported parameter: reasoning effort is not supported with the model {model!r}.",
            param="reasoning.effort",
            code="unsupported_parameter",
        )
    max_output: int | None = None
    for name in max_tokens_fields:
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise bad_request(f"Invalid '{name}': expected an integer >= 1, got {value!r}.", param=name)
        max_output = value
    return CommonParams(
        model=model,
        stream=stream,
        cache_key=key,
        retention=retention,
        reasons=reasons and effort != "none",
        effort=effort,
        max_output=max_output,
        cache_options=options,
    )


def model_param(body: Mapping[str, Any]) -> str:
    """The request's `model`, read first: every other check depends on the model's rules."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad_request("Missing required parameter: 'model'.", param="model", code="missing_required_parameter")
    return model


def cache_outcome(state: TwinState, params: CommonParams, pieces: Sequence[PromptPiece]) -> CacheOutcome:
    """Input tokens and what the model's cache read and wrote for ``pieces``; its writes are stored."""
    return account(
        state,
        model=params.model,
        cache_key=params.cache_key,
        retention=params.retention,
        options=params.cache_options,
        pieces=pieces,
        breakpoint_ttls=tuple(state.rules(params.model, VENDOR).ttl_seconds),
    )


def arguments_json(arguments: Mapping[str, Any]) -> str:
    return json.dumps(dict(arguments), separators=(",", ":"), ensure_ascii=False)


@attrs.frozen(kw_only=True)
class SizedTurn:
    """A policy turn cut to the output limit: what is emitted and how many tokens it costs."""

    reasoning: str
    text: str
    calls: tuple[tuple[str, str], ...]  # (name, arguments JSON)
    reasoning_tokens: int
    output_tokens: int
    truncated: bool


def size_turn(turn: AssistantTurn, *, reasons: bool, max_output: int | None) -> SizedTurn:
    """Output tokens = reasoning + text + each call's name and arguments, all by `segue._core.tokens.count_tokens`."""
    reasoning = (turn.reasoning or DEFAULT_REASONING) if reasons else ""
    reasoning_tokens = count_tokens(reasoning)
    calls = tuple((c.name, arguments_json(c.arguments)) for c in turn.tool_calls)
    needed = count_tokens(turn.text) + sum(count_tokens(n) + count_tokens(a) for n, a in calls)
    if max_output is None or reasoning_tokens + needed <= max_output:
        return SizedTurn(
            reasoning=reasoning,
            text=turn.text,
            calls=calls,
            reasoning_tokens=reasoning_tokens,
            output_tokens=reasoning_tokens + needed,
            truncated=False,
        )
    text = truncate_to_tokens(turn.text, max(max_output - reasoning_tokens, 0))
    return SizedTurn(
        reasoning=reasoning,
        text=text,
        calls=(),
        reasoning_tokens=reasoning_tokens,
        output_tokens=reasoning_tokens + count_tokens(text),
        truncated=True,
    )


def content_text(content: Any) -> str:
    """Text of a message content: a string, or the text of its text-like parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, dict) and isinstance(part.get("refusal"), str):
                texts.append(part["refusal"])
        return "\n".join(texts)
    return json.dumps(content)


def parse_arguments(arguments: Any, where: str) -> dict[str, Any]:
    """Tool-call arguments (a JSON object string) as a dict; bad JSON is a 400 naming the item."""
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except json.JSONDecodeError:
        raise bad_request(f"Invalid 'arguments' in {where}: not valid JSON: {arguments!r}.", param=where) from None
    if not isinstance(value, dict):
        raise bad_request(f"Invalid 'arguments' in {where}: expected a JSON object, got {arguments!r}.", param=where)
    return value


_TYPE_NAMES = {str: "a string", list: "an array", dict: "an object", bool: "a boolean", int: "an integer"}


def expect(value: Any, kinds: tuple[type, ...], param: str, *, optional: bool = True) -> Any:
    """``value`` if it has one of ``kinds`` (or is None when optional); otherwise a 400 naming ``param``."""
    if value is None and optional:
        return value
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
        return value
    wanted = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
    raise bad_request(
        f"Invalid type for '{param}': expected {wanted}, but got {value!r}.", param=param, code="invalid_type"
    )


#: An assistant message's phase values (the pinned openai SDK's ResponseOutputMessage.phase literal).
PHASES = ("commentary", "final_answer")
_GPT_VERSION = re.compile(r"gpt-(\d+)(?:\.(\d+))?")


def labels_phase(model: str) -> bool:
    """Whether the model labels its assistant messages with `phase`: the pinned SDK's ResponseOutputMessage.phase
    "Labels an `assistant` message as intermediate commentary (`commentary`) or the final answer (`final_answer`).
    For models like `gpt-5.3-codex` and beyond, ... preserve and resend phase". The twin labels GPT 5.3 and later;
    text that comes with tool calls is commentary, text alone the final answer."""
    version = _GPT_VERSION.match(model)
    return version is not None and (int(version[1]), int(version[2] or 0)) >= (5, 3)
