"""The vendors' own context management as model settings (ModelSettings.compaction, .context_editing): the exact
request each vendor receives through its official SDK client (mock transport), the refusal on a path without
them before any row, context editing in the prefix descriptor, and the pricing of Anthropic's usage.iterations.

Sources quoted by the tests:
- Anthropic compaction: "Include the beta header compact-2026-01-12 in your API requests to use this feature";
  "Compaction is supported on the following models: Claude Mythos Preview, Claude Opus 4.7, Claude Opus 4.6,
  Claude Sonnet 4.6" (platform.claude.com/docs/en/build-with-claude/compaction); the pinned SDK's
  BetaCompact20260112EditParam and BetaUsage.iterations ("A `compaction` entry's tokens are not included in the
  top-level `usage` fields").
- Anthropic context editing: "use the beta header context-management-2025-06-27"; "Applied before the prompt
  reaches Claude" (platform.claude.com/docs/en/build-with-claude/context-editing); the pinned SDK's
  BetaClearToolUses20250919EditParam, BetaClearThinking20251015EditParam, BetaContextManagementResponse.
- OpenAI: "You can enable server-side compaction in a Responses create request (POST /responses or
  client.responses.create) by setting context_management with compact_threshold"
  (developers.openai.com/api/docs/guides/compaction); the pinned SDK's ResponseCreateParams.ContextManagement.
"""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types.beta.message_create_params import MessageCreateParamsNonStreaming as BetaCreateParams
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

from segue import (
    Agent,
    ClearThinking,
    ClearToolUses,
    ContextEditing,
    InputError,
    ModelSettings,
    RunStore,
    Usage,
    VendorCompaction,
)
from segue.catalog import Catalog
from segue.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider, OpenRouterProvider
from segue.wire.anthropic.request import parse_response
from tests._support.responses_bodies import response, text_output
from tests._support.vendor_http import Recorder, anthropic_client, assert_typed, json_response, openai_client


def anthropic_message(*, content: Any = None, usage: Any = None, context_management: Any = None) -> Any:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content if content is not None else [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 20, "output_tokens": 5},
    }
    if context_management is not None:
        body["context_management"] = context_management
    return body


EDITING = ContextEditing(
    clear_tool_uses=ClearToolUses(
        trigger_tokens=30_000, keep_tool_uses=3, clear_at_least_tokens=5_000, exclude_tools=["memory"]
    ),
    clear_thinking=ClearThinking(keep_turns="all"),
)


async def test_anthropic_sends_context_editing_and_compaction_as_context_management_edits() -> None:
    rec = Recorder(json_response(anthropic_message()))
    driver = AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(rec))
    settings = ModelSettings(
        context_editing=EDITING,
        compaction=VendorCompaction(trigger_tokens=100_000, pause_after=True, instructions="Keep the order ids."),
    )
    await Agent(driver, model_settings=settings).run("hi")
    body = rec.body
    assert_typed(body, BetaCreateParams)  # the beta request type: context_management is a beta parameter
    assert body["context_management"] == {
        "edits": [
            {"type": "clear_thinking_20251015", "keep": {"type": "all"}},
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": 30_000},
                "keep": {"type": "tool_uses", "value": 3},
                "clear_at_least": {"type": "input_tokens", "value": 5_000},
                "exclude_tools": ["memory"],
            },
            {
                "type": "compact_20260112",
                "trigger": {"type": "input_tokens", "value": 100_000},
                "pause_after_compaction": True,
                "instructions": "Keep the order ids.",
            },
        ]
    }
    # Each feature's beta, as its page asks.
    assert (
        rec.headers["anthropic-beta"] == "cache-diagnosis-2026-04-07,context-management-2025-06-27,compact-2026-01-12"
    )


async def test_anthropic_without_the_settings_sends_no_context_management_and_no_beta() -> None:
    rec = Recorder(json_response(anthropic_message()))
    await Agent(AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(rec))).run("hi")
    assert "context_management" not in rec.body
    assert rec.headers["anthropic-beta"] == "cache-diagnosis-2026-04-07"  # the cache diagnostics' only


async def test_anthropic_compaction_with_the_vendors_defaults_is_the_bare_edit() -> None:
    """An empty VendorCompaction sends `{"type": "compact_20260112"}`: the trigger "Defaults to 150000 input
    tokens" (the pinned SDK's BetaCompact20260112EditParam.trigger); segue does not write the default itself."""
    rec = Recorder(json_response(anthropic_message()))
    driver = AnthropicProvider("claude-opus-4-6", client=anthropic_client(rec))
    await Agent(driver).run("hi", model_settings={"compaction": {}})
    assert rec.body["context_management"] == {"edits": [{"type": "compact_20260112"}]}
    assert rec.headers["anthropic-beta"].split(",")[-1] == "compact-2026-01-12"


async def test_openai_responses_sends_compaction_with_its_threshold() -> None:
    rec = Recorder(json_response(response([text_output("ok")], model="gpt-5.4")))
    driver = OpenAIResponsesProvider("gpt-5.4", client=openai_client(rec))
    await Agent(driver).run("hi", model_settings=ModelSettings(compaction=VendorCompaction(trigger_tokens=200_000)))
    assert_typed(rec.body, ResponseCreateParamsNonStreaming)
    assert rec.body["context_management"] == [{"type": "compaction", "compact_threshold": 200_000}]


def _driver(kind: str, rec: Recorder) -> Any:
    if kind == "anthropic-haiku":
        return AnthropicProvider("claude-haiku-4-5", client=anthropic_client(rec))
    if kind == "anthropic":
        return AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(rec))
    if kind == "responses":
        return OpenAIResponsesProvider("gpt-5.4", client=openai_client(rec))
    if kind == "openrouter":
        return OpenRouterProvider("anthropic/claude-sonnet-4-6", client=openai_client(rec))
    url = "http://127.0.0.1:8080/v1"
    return OpenAIChatProvider("gemma-3-270m", base_url=url, vendor="llamacpp", client=openai_client(rec, url))


@pytest.mark.parametrize(
    ("kind", "settings", "match"),
    [
        # Not among the models the compaction page lists (catalog: no llm.vendor_compaction on the row).
        ("anthropic-haiku", {"compaction": {}}, r"model_settings.compaction=.*claude-haiku-4-5@anthropic.*"),
        ("responses", {"context_editing": {"clear_tool_uses": {}}}, r"model_settings.context_editing=.*cannot be sent"),
        ("responses", {"compaction": {"pause_after": True}}, r"model_settings.compaction.pause_after=True"),
        ("responses", {"compaction": {"instructions": "short"}}, r"model_settings.compaction.instructions="),
        ("chat", {"compaction": {"trigger_tokens": 9000}}, r"model_settings.compaction=.*openai_chat wire"),
        ("chat", {"context_editing": {"clear_thinking": {}}}, r"model_settings.context_editing=.*openai_chat wire"),
        ("openrouter", {"compaction": {}}, r"model_settings.compaction=.*openai_chat wire"),
        ("anthropic", {"context_editing": {}}, r"context_editing names no strategy"),
        (
            "anthropic",
            {"context_editing": {"clear_tool_uses": {"trigger_tokens": 1000, "trigger_tool_uses": 4}}},
            r"takes one trigger",
        ),
    ],
)
async def test_a_vendor_context_setting_a_path_cannot_take_is_refused_before_any_row(
    kind: str, settings: dict[str, Any], match: str, sqlite_store: RunStore
) -> None:
    rec = Recorder()  # any request would fail the test: nothing may be sent
    with pytest.raises(InputError, match=match):
        Agent(_driver(kind, rec), model_settings=settings)
    agent = Agent(_driver(kind, rec), store=sqlite_store)
    with pytest.raises(InputError, match=match):
        await agent.run("hi", model_settings=settings)
    assert sqlite_store.list_runs() == [] and rec.requests == []


def test_the_catalog_says_which_paths_have_them_with_sources() -> None:
    catalog = Catalog.load(env=False)
    sonnet, haiku = catalog.resolve("claude-sonnet-4-6", "anthropic"), catalog.resolve("claude-haiku-4-5", "anthropic")
    assert (sonnet.vendor_compaction, sonnet.context_editing) == (True, True)
    assert (haiku.vendor_compaction, haiku.context_editing) == (False, True)
    assert catalog.resolve("gpt-5.4", "openai").vendor_compaction is True
    for path, key in ((sonnet, "vendor_compaction"), (haiku, "context_editing")):
        source = path.source("llm", key)
        assert source is not None and "platform.claude.com" in (catalog.row_notes(source) or "")
    # OpenRouter's rows say neither: absent, so refused.
    routed = catalog.resolve("anthropic/claude-sonnet-4-6", "openrouter")
    assert (routed.vendor_compaction, routed.context_editing) == (False, False)


def test_applied_context_edits_become_a_note() -> None:
    """BetaContextManagementResponse.applied_edits: "List of context management edits that were applied"."""
    parsed = parse_response(
        anthropic_message(
            context_management={
                "applied_edits": [
                    {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 4, "cleared_input_tokens": 12_000}
                ]
            }
        )
    )
    (note,) = [n for n in parsed.notes if n.kind == "context-edited"]
    assert "cleared 4 tool uses, 12000 input tokens" in note.message


def test_compaction_iterations_are_priced_on_top_of_the_top_level_usage() -> None:
    """'A `compaction` entry's tokens are not included in the top-level `usage` fields' (the pinned SDK's
    BetaUsage.iterations): the call's cost is the top-level usage plus each compaction iteration."""
    usage = {
        "input_tokens": 3_000,
        "output_tokens": 200,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "iterations": [
            {
                "type": "compaction",
                "input_tokens": 150_000,
                "output_tokens": 2_500,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            },
            {
                "type": "message",
                "input_tokens": 3_000,
                "output_tokens": 200,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            },
        ],
    }
    parsed = parse_response(anthropic_message(usage=usage))
    assert parsed.usage.compaction_iterations == [
        Usage(input_tokens=150_000, output_tokens=2_500, cache_read_tokens=0, cache_write_tokens=0)
    ]
    catalog = Catalog.load(env=False)
    top = Usage(input_tokens=3_000, output_tokens=200, cache_read_tokens=0, cache_write_tokens=0)
    summary = Usage(input_tokens=150_000, output_tokens=2_500, cache_read_tokens=0, cache_write_tokens=0)
    whole = catalog.cost(parsed.usage, "claude-sonnet-4-6", "anthropic")
    assert whole == pytest.approx(
        catalog.cost(top, "claude-sonnet-4-6", "anthropic") + catalog.cost(summary, "claude-sonnet-4-6", "anthropic")
    )
    assert whole > catalog.cost(top, "claude-sonnet-4-6", "anthropic")


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"compaction": {"trigger_tokens": 0}}, r"compaction must be a segue.VendorCompaction .*trigger_tokens"),
        ({"compaction": {"trigger": 5}}, r"compaction must be a segue.VendorCompaction"),
        ({"context_editing": {"clear_thinking": {"keep_turns": "some"}}}, r"context_editing must be"),
    ],
)
async def test_a_bad_vendor_context_value_is_one_clear_error_before_any_row(
    settings: dict[str, Any], match: str, sqlite_store: RunStore
) -> None:
    rec = Recorder()
    agent = Agent(_driver("anthropic", rec), store=sqlite_store)
    with pytest.raises(InputError, match=match):
        await agent.run("hi", model_settings=settings)
    assert sqlite_store.list_runs() == [] and rec.requests == []


def test_runs_explain_reads_a_context_editing_change_as_a_messages_change() -> None:
    """Edits apply "before the prompt reaches Claude": another configuration changes what the model saw of the
    messages, so `segue runs explain` names it in the messages section."""
    from segue.cache.explain import compare_bodies

    base = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    keep = {"edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 3}}]}
    other = {"edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 1}}]}
    _, _, change = compare_bodies({**base, "context_management": keep}, {**base, "context_management": other})
    assert change is not None and change.section == "messages" and change.path.startswith("context_management")


async def test_retry_sends_the_same_vendor_context_settings(sqlite_store: RunStore) -> None:
    """The settings are stored with the run (StoredRequest.model_settings), objects included, so a retry sends the
    same context_management."""
    rec = Recorder(json_response(anthropic_message()), json_response(anthropic_message()))
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(rec)), store=sqlite_store)
    settings = ModelSettings(context_editing=EDITING, compaction=VendorCompaction(trigger_tokens=100_000))
    first = await agent.run("hi", model_settings=settings)
    sent = rec.body
    await agent.retry(first.run_id)
    assert rec.body == sent and "context_management" in sent
    stored = sqlite_store.get_run(first.run_id)
    assert stored is not None and stored.meta is not None and stored.meta.segue_request is not None
    assert stored.meta.segue_request.model_settings == settings
