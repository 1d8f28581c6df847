"""The twin answers cache diagnostics as the vendors document them (segue_twin.diagnostics), through the official
clients, so segue's asking and listening run offline.

Sources quoted per rule: Anthropic's cache-diagnostics page (platform.claude.com/docs/en/build-with-claude/
cache-diagnostics) and the pinned anthropic SDK's Diagnostics / CacheMiss* docstrings; OpenAI's prompt-caching
diagnostics guide (developers.openai.com/api/docs/guides/prompt-caching/diagnostics) and the pinned openai SDK's
PromptCacheDiagnostics types.
"""

from __future__ import annotations

from typing import Any

import pytest

from segue_twin import Twin

SYSTEM = "You answer questions about the shop database, precisely and briefly. " * 120
TOOLS: list[dict[str, Any]] = [
    {"name": name, "description": name.replace("_", " "), "input_schema": {"type": "object"}}
    for name in ("list_tables", "describe_table", "run_query")
]
MODEL = "claude-sonnet-4-6"
BETA = {"anthropic-beta": "cache-diagnosis-2026-04-07"}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


async def _ask(client: Any, *, previous: str | None, **overrides: Any) -> Any:
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 256,
        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "tools": TOOLS,
        "messages": [_user("how many customers?")],
        "diagnostics": {"previous_message_id": previous},
        "extra_headers": BETA,
    }
    body.update(overrides)
    return await client.messages.create(**body)


async def test_anthropic_no_divergence_is_null_and_the_first_turn_opts_in_with_null() -> None:
    """ "On the first turn, pass "previous_message_id": null to opt in without a prior message to compare against",
    and `diagnostics` is "`null` ... when it did and no prompt-cache divergence was detected" (SDK Message
    docstring): a request that only appends to the previous one gets `diagnostics: null`."""
    client = Twin().anthropic_client()
    first = await _ask(client, previous=None)
    assert first.diagnostics is None
    answer = {"role": "assistant", "content": [{"type": "text", "text": "42"}]}
    later = await _ask(client, previous=first.id, messages=[_user("how many customers?"), answer, _user("and orders?")])
    assert later.diagnostics is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"tools": list(reversed(TOOLS))}, "tools_changed"),
        ({"system": [{"type": "text", "text": SYSTEM + " Today is Tuesday."}]}, "system_changed"),
        ({"model": "claude-opus-4-6"}, "model_changed"),
        ({"messages": [_user("how many customers are there?")]}, "messages_changed"),
    ],
)
async def test_anthropic_names_the_first_divergence_with_missed_tokens(change: dict[str, Any], reason: str) -> None:
    """The API "attaches a `diagnostics` object to the response describing the first point of divergence" (cache
    diagnostics page): CacheMissToolsChanged ("tools were added, removed, or reordered"), CacheMissSystemChanged,
    CacheMissModelChanged ("`model` or `speed` differs"), CacheMissMessagesChanged ("differ ... in an earlier entry,
    instead of only having entries appended"), each with `cache_missed_input_tokens`, "Approximate number of input
    tokens that would have been read from cache had the prefix matched the previous request"."""
    client = Twin().anthropic_client()
    first = await _ask(client, previous=None)
    later = await _ask(client, previous=first.id, **change)
    assert later.diagnostics is not None and later.diagnostics.cache_miss_reason is not None
    found = later.diagnostics.cache_miss_reason
    assert found.type == reason
    assert getattr(found, "cache_missed_input_tokens", 0) > 0


async def test_anthropic_other_prompt_settings_are_unavailable_and_an_unknown_id_is_not_found() -> None:
    """CacheMissUnavailable: "a request whose `model`, `system`, and `tools` match the previous request's but whose
    other prompt-affecting parameters, such as `thinking` or `tool_choice`, differ"; CacheMissPreviousMessageNotFound:
    "the API doesn't have a stored record of the request that `diagnostics.previous_message_id` references", and
    the page: "When the beta header is present, the API stores a lightweight fingerprint" (so a request that did not
    ask left none)."""
    client = Twin().anthropic_client()
    first = await _ask(client, previous=None)
    thinking = await _ask(client, previous=first.id, thinking={"type": "adaptive"})
    assert thinking.diagnostics is not None and thinking.diagnostics.cache_miss_reason is not None
    assert thinking.diagnostics.cache_miss_reason.type == "unavailable"
    unknown = await _ask(client, previous="msg_nobody_sent_this")
    assert unknown.diagnostics is not None and unknown.diagnostics.cache_miss_reason is not None
    assert unknown.diagnostics.cache_miss_reason.type == "previous_message_not_found"
    silent = await client.messages.create(model=MODEL, max_tokens=64, messages=[_user("hi")])
    assert silent.diagnostics is None, "a request that does not ask gets no diagnostics"
    named = await _ask(client, previous=silent.id)
    assert named.diagnostics is not None and named.diagnostics.cache_miss_reason is not None
    assert named.diagnostics.cache_miss_reason.type == "previous_message_not_found"


async def test_anthropic_an_expired_entry_is_no_divergence() -> None:
    """ "The comparison is about request structure, independent of whether the cache actually hit": past the TTL the
    same request reads nothing and its diagnostics still say no divergence (segue's own reasoning explains it)."""
    now = [1_800_000_000.0]
    client = Twin(clock=lambda: now[0]).anthropic_client()
    first = await _ask(client, previous=None)
    now[0] += 3600
    later = await _ask(client, previous=first.id)
    assert later.usage.cache_read_input_tokens == 0
    assert later.diagnostics is None


def _input(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "developer", "content": [{"type": "input_text", "text": SYSTEM}]},
        {"role": "user", "content": [{"type": "input_text", "text": text}]},
    ]


async def _respond(client: Any, compare: str | None, **overrides: Any) -> Any:
    body: dict[str, Any] = {
        "model": "gpt-5.6-sol",
        "input": _input("how many customers?"),
        "prompt_cache_key": "tenant-a",
        "tools": [{"type": "function", "name": "run_query", "parameters": {"type": "object"}, "strict": False}],
    }
    if compare is not None:
        body["prompt_cache_options"] = {"comparison_response_id": compare}
    body.update(overrides)
    return await client.responses.create(**body)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"prompt_cache_key": "tenant-b"}, "prompt_cache_key_changed"),
        ({"tools": []}, "tools_changed"),
        ({"reasoning": {"effort": "high"}}, "reasoning_effort_changed"),
        ({"input": _input("how many orders?")}, "input_changed"),
        ({"model": "gpt-6-sol"}, "model_changed"),
    ],
)
async def test_openai_cache_miss_reasons(change: dict[str, Any], reason: str) -> None:
    """ "Set `prompt_cache_options.comparison_response_id` to the baseline response's `id`" and "Check
    `prompt_cache_diagnostics` on the current response" (diagnostics guide); a miss is the SDK's
    PromptCacheDiagnosticsCacheMiss with `reason`, `cache_missed_tokens` ("input tokens affected after the first
    detected divergence") and `comparison_reusable_tokens` ("the reusable prefix in the compared response")."""
    client = Twin().openai_client()
    first = await _respond(client, None)
    later = await _respond(client, first.id, **change)
    found = later.prompt_cache_diagnostics
    assert found is not None and found.type == "cache_miss"
    assert found.reason == reason and found.cache_missed_tokens > 0
    assert found.comparison_reusable_tokens is not None


async def test_openai_hit_not_found_and_where_the_feature_is_absent() -> None:
    """No divergence is `cache_hit`; an unknown id `comparison_response_not_found`; "Diagnostics are available in
    the Responses API for GPT-5.6 and later supported models", so an older model answers without them (the SDK:
    the field requests diagnostics "when the feature is enabled")."""
    client = Twin().openai_client()
    first = await _respond(client, None)
    same = await _respond(client, first.id)
    assert same.prompt_cache_diagnostics is not None and same.prompt_cache_diagnostics.type == "cache_hit"
    unknown = await _respond(client, "resp_unknown")
    assert unknown.prompt_cache_diagnostics is not None
    assert unknown.prompt_cache_diagnostics.type == "comparison_response_not_found"
    older = await client.responses.create(model="gpt-4.1", input="q")
    assert older.prompt_cache_diagnostics is None
