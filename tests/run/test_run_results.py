"""What a RunResult and a RunSummary answer without arithmetic: the cached share, the cost with where its prices
came from, the replay in one line, pending approvals, the run a retry retried, and a cache note when caching
could not happen."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from segue import Agent
from segue._core.run_text import question, replay_text
from segue.cache.misses import cache_notes
from segue.catalog import Catalog
from segue.catalog.costs import run_cost
from segue.generated import ReplaySummary, ReplayWarning, Usage
from segue.providers import AnthropicProvider, OpenAIResponsesProvider
from segue.tools import tool
from segue_twin import AssistantTurn, PlannedCall, ScriptedPolicy, Twin
from tests._support.helpers import lookup, policy_provider

LONG = "You answer questions about the shop database, precisely and briefly. " * 150  # above every minimum


async def test_short_prompt_on_the_twin_gets_one_cache_note_naming_the_minimum(
    sqlite_store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Anthropic: "prompts shorter than the minimum cacheable length are processed without caching, even if marked
    with cache_control" (prompt caching page); claude-sonnet-4-6's minimum is the catalog's 1,024 tokens."""
    script = [AssistantTurn(tool_calls=(PlannedCall(name="lookup", arguments={"q": "tables"}),)), "Four tables."]
    twin = Twin(policy=ScriptedPolicy(script))
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()),
        "Be brief.",
        [lookup],
        sqlite_store,
    )
    with caplog.at_level(logging.WARNING, logger="segue.cache"):
        result = await agent.run("Which tables are there?")
    assert result.status == "success"
    assert result.usage.cache_read_tokens == 0 and not result.usage.cache_write_tokens
    notes = [n for n in result.notes or [] if n.kind == "cache-below-minimum"]
    assert len(notes) == 1, result.notes
    note = notes[0]
    prompt = result.usage.input_tokens  # every iteration's prompt is short: the note is kept once, counted per call
    assert note.count == result.iterations >= 2
    assert note.message.startswith("a request's prompt of ")
    assert "is below claude-sonnet-4-6's minimum cacheable 1,024 tokens" in note.message
    first = int(note.message.split()[4].replace(",", ""))
    assert 0 < first < 1024 and first < prompt
    logged = [r for r in caplog.records if r.name == "segue.cache"]
    assert len(logged) == 1 and "minimum cacheable 1,024 tokens" in logged[0].getMessage()
    assert result.cached_share == 0.0
    stored = sqlite_store.get_run(result.run_id)
    assert [n.kind for n in stored.meta.segue_notes] == ["cache-below-minimum"]


async def test_a_long_prompt_caches_and_gets_no_cache_note(sqlite_store: Any) -> None:
    twin = Twin()
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), LONG, [lookup], sqlite_store)
    first = await agent.run("Which tables are there?")
    second = await agent.run("And the orders?", runs=[first.run_id])
    for result in (first, second):
        assert not [n for n in result.notes or [] if n.kind.startswith("cache-")], result.notes
    assert second.cached_share is not None and second.cached_share > 0.5
    assert second.cached_share == second.usage.cache_read_tokens / second.usage.input_tokens


async def test_cost_is_priced_from_the_catalog_with_its_source(sqlite_store: Any) -> None:
    twin = Twin()
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), LONG, [lookup], sqlite_store)
    result = await agent.run("Which tables are there?")
    catalog = Catalog.load()
    run = sqlite_store.get_run(result.run_id)
    expected = sum(catalog.cost(c.usage, c.model, c.vendor) for c in run.llm_interactions)
    # The twin served it: nothing was charged, and the catalog's price of its usage is kept apart (twin_usd).
    assert result.served_by == "twin" and result.cost is not None and result.cost.usd == 0
    assert result.cost.twin_usd == pytest.approx(expected) and expected > 0
    assert result.cost.missing is None
    [source] = result.cost.prices
    assert (source.model, source.vendor, source.layer) == ("claude-sonnet-4-6", "anthropic", "model claude-sonnet-4-6")
    assert source.file is not None and source.file.endswith("models.json")
    assert source.pointer is not None and source.pointer.endswith("/configuration/pricing")
    assert source.note is not None and "read 2026-12-01" in source.note
    # The run list carries the same cost, read from the run's meta.
    [summary] = sqlite_store.list_runs()
    assert summary.cost == result.cost and summary.cached_share == result.cached_share
    assert summary.question == "Which tables are there?"


def test_an_unknown_price_leaves_the_cost_absent_with_the_reason() -> None:
    """claude-haiku-5-5's catalog row has no prices (priced in prompt-length bands): no dollar figure is made up."""
    catalog = Catalog.load()
    cost = run_cost(catalog, [("claude-haiku-5-5", "anthropic", Usage(input_tokens=10, output_tokens=5))])
    assert cost.usd is None
    assert cost.missing is not None and "no input/output price" in cost.missing
    assert [p.model for p in cost.prices] == ["claude-haiku-5-5"]


def test_cache_write_prices_follow_the_ttl() -> None:
    catalog = Catalog.load()
    usage = Usage(input_tokens=1000, output_tokens=0, cache_write_tokens=1000, cache_write_tokens_by_ttl={"1h": 1000})
    cost = run_cost(catalog, [("claude-sonnet-4-6", "anthropic", usage)])
    assert cost.usd == pytest.approx(1000 * 6 / 1_000_000)  # the 1h write price, not the 5m one


def test_cached_share_is_none_when_the_vendor_reports_no_cache_reads() -> None:
    from segue._core.usage import cache_parts

    assert cache_parts(Usage(input_tokens=100, output_tokens=1)).read_share is None
    assert cache_parts(Usage(input_tokens=0, output_tokens=1, cache_read_tokens=0)).read_share is None
    assert cache_parts(Usage(input_tokens=100, output_tokens=1, cache_read_tokens=25)).read_share == 0.25


def test_replay_text_is_one_readable_line() -> None:
    summary = ReplaySummary(
        schema_version=1,
        runs_full=["01A", "01B"],
        runs_text=["01C"],
        reasoning_kept=["01B"],
        reasoning_dropped=["01A"],
        warnings=[ReplayWarning(run_id="01A", cause="cross-vendor", message="reasoning dropped: another vendor")],
    )
    assert replay_text(summary) == (
        "replayed 3 runs (2 in full, 1 as question + answer), reasoning kept for 1, 1 warning: cross-vendor (run 01A)"
    )
    assert question("  what\nis   this " + "x" * 300).startswith("what is this x")
    assert len(question("x" * 300)) == 200 and question("x" * 300).endswith("…")


async def test_replay_pending_approvals_and_retry_of_on_results_and_summaries(sqlite_store: Any) -> None:
    @tool(requires_approval=True)
    def drop_table(q: str) -> str:
        """Drop a table.

        Args:
            q: the table
        """
        return "dropped"

    from tests._support.helpers import LookupPolicy

    agent = Agent(policy_provider(LookupPolicy(tool="drop_table")), "", [drop_table], sqlite_store)
    paused = await agent.run("drop orders")
    assert paused.status == "waiting_approval"
    assert paused.pending_approvals is not None
    assert [(p.call_id, p.name) for p in paused.pending_approvals] == [("call_1", "drop_table")]
    [summary] = sqlite_store.list_runs()
    assert summary.pending_approvals == paused.pending_approvals
    done = await agent.resume(paused.run_id)
    assert done.status == "success" and done.pending_approvals is None
    again = await agent.retry(done.run_id)
    assert again.retry_of == done.run_id
    follow = await Agent(policy_provider(), "", [lookup], sqlite_store).run("next", runs=[done.run_id], replay_last=0)
    assert follow.replay_text == "replayed 1 run as question + answer"
    summaries = {s.run_id: s for s in sqlite_store.list_runs()}
    assert summaries[again.run_id].retry_of == done.run_id
    assert summaries[follow.run_id].replay_text == follow.replay_text


def test_a_breakpoint_beyond_the_lookback_is_noted() -> None:
    """Anthropic: "The system only checks up to 20 blocks before each explicit cache_control breakpoint" (prompt
    caching page); the breakpoint's own block is position 1, so an entry 20 positions back is not found."""
    path = Catalog.load().resolve("claude-sonnet-4-6", "anthropic")
    marker = {"type": "ephemeral"}

    def body(n: int) -> dict[str, Any]:
        messages = [{"role": "user", "content": [{"type": "text", "text": f"m{i}"}]} for i in range(n)]
        messages[-1]["content"][-1]["cache_control"] = marker
        return {"model": "claude-sonnet-4-6", "messages": messages}

    usage = Usage(input_tokens=5000, output_tokens=1, cache_read_tokens=0, cache_write_tokens=5000)
    previous = body(10)
    assert cache_notes(path, body(29), usage, previous) == []  # 19 positions back: found
    [note] = cache_notes(path, body(30), usage, previous)  # 20 positions back: one outside the window
    assert note.kind == "cache-beyond-lookback"
    assert "20 block positions after the previous request's, beyond claude-sonnet-4-6's lookback of 20" in (
        note.message
    )


def test_a_prefix_cache_request_without_its_cache_key_is_noted() -> None:
    """OpenAI: prompt_cache_key "is used to cache responses for similar requests to optimize your cache hit rates"
    (the pinned openai SDK's ResponseCreateParams docstring)."""
    catalog = Catalog.load()
    path = catalog.resolve("gpt-5", "openai")
    assert path.cache_kind == "prefix" and path.wire == "openai_responses"
    usage = Usage(input_tokens=5000, output_tokens=1, cache_read_tokens=0)
    [note] = cache_notes(path, {"model": "gpt-5", "input": []}, usage, None)
    assert note.kind == "cache-key-missing" and "openai" in note.message
    assert cache_notes(path, {"model": "gpt-5", "input": [], "prompt_cache_key": "acme"}, usage, None) == []


async def test_segue_sends_a_cache_key_on_openai_responses_so_no_note(sqlite_store: Any) -> None:
    twin = Twin()
    agent = Agent(OpenAIResponsesProvider("gpt-5", client=twin.openai_client()), LONG, [lookup], sqlite_store)
    result = await agent.run("Which tables are there?")
    assert not [n for n in result.notes or [] if n.kind == "cache-key-missing"]


async def test_an_idempotent_replay_returns_the_same_result_fields(sqlite_store: Any) -> None:
    twin = Twin()
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), LONG, [lookup], sqlite_store)
    first = await agent.run("Which tables are there?", idempotency_key="k1")
    again = await agent.run("Which tables are there?", idempotency_key="k1")
    assert again == first  # cost, cached share, notes, replay text: read back exactly as the run returned them
    assert again.cost is not None and again.cost.twin_usd is not None and again.cost.twin_usd > 0
    assert again.served_by == first.served_by == "twin"
