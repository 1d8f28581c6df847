"""A cache collapse as it happens (segue.cache.collapse): a call that expected at least half of its prompt from the
cache and read under a tenth emits one CACHE_COLLAPSE run event carrying the vendor's verdict, a warning on the
`segue.cache` logger, the run's meta `segue.cache_collapse` and a span event on the run's span; once per run."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from segue import Agent, RunStore
from segue.cache.collapse import EXPECTED_SHARE, READ_SHARE, collapse_of
from segue.demo import shop_db as sample_db
from segue.generated import CacheVerdict, ResponseRef, Usage
from segue.providers import AnthropicProvider
from segue.run.cache_watch import watch
from segue.telemetry import RunTrace, Telemetry
from segue_twin import Twin

PROMPT = "You answer questions about the shop database. Keep answers short and exact. " * 150
TOOLS = [sample_db.list_tables, sample_db.describe_table, sample_db.run_query]
REF = ResponseRef(id="msg_1", vendor="anthropic", model="m", cached_tokens=9_000)


def _collapse(read: int, *, prompt: int = 10_000, previous: ResponseRef | None = REF, model: str = "m") -> Any:
    usage = Usage(input_tokens=prompt, output_tokens=1, cache_read_tokens=read, cache_write_tokens=0)
    return collapse_of(previous, vendor="anthropic", model=model, usage=usage, verdict=None, iteration=2)


def test_the_rule_expected_at_least_half_and_read_under_a_tenth() -> None:
    assert (EXPECTED_SHARE, READ_SHARE) == (0.5, 0.1)
    assert _collapse(0) is not None
    assert _collapse(999) is not None, "999 of 10,000 is under a tenth"
    assert _collapse(1_000) is None, "a tenth read is a partial miss, not a collapse"
    assert _collapse(0, previous=REF.__class__(id="x", vendor="anthropic", model="m", cached_tokens=4_999)) is None
    assert _collapse(0, previous=None) is None, "nothing was expected"
    assert _collapse(0, model="other") is None, "another model has its own cache: a switch, not a collapse"
    usage = Usage(input_tokens=10_000, output_tokens=1)
    assert collapse_of(REF, vendor="anthropic", model="m", usage=usage, verdict=None, iteration=2) is None, (
        "a vendor that reports no cache reads cannot be said to have read nothing"
    )


def test_once_per_run() -> None:
    """Two collapsing calls in one run: one event, one warning."""
    usage = Usage(input_tokens=10_000, output_tokens=1, cache_read_tokens=0, cache_write_tokens=10_000)
    response = SimpleNamespace(
        served_model=None,
        model="m",
        vendor="anthropic",
        usage=usage,
        cache_verdict=CacheVerdict(status="changed", reason="system_changed", missed_tokens=9_000),
        response_body={"id": "msg_2"},
    )
    state = SimpleNamespace(
        collapsed=False,
        verdict=None,
        previous_response=REF,
        last_response=None,
        run_id="r",
        iteration=2,
        trace=RunTrace.off(),
    )
    _, first = watch(state, response, None)  # type: ignore[arg-type]
    state.previous_response = state.last_response
    _, second = watch(state, response, None)  # type: ignore[arg-type]
    assert [e.type for e in first] == ["CACHE_COLLAPSE"] and second == []


async def test_a_changed_system_prompt_collapses_the_next_turn(caplog: pytest.LogCaptureFixture) -> None:
    """The second turn of a conversation with an edited system prompt reads nothing of what the first cached: the
    event carries Anthropic's verdict (system_changed), the warning says it, the run's meta keeps it and the run's
    span has the event."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    twin, store = Twin(), RunStore("sqlite:///:memory:")

    def agent(prompt: str) -> Agent:
        driver = AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client())
        return Agent(driver, prompt, TOOLS, store, telemetry=Telemetry(tracer_provider=provider))

    first = await agent(PROMPT).run("Which tables are there?")
    events = []
    with caplog.at_level(logging.WARNING, logger="segue.cache"):
        async for event in agent("Today is Tuesday. " + PROMPT).stream(
            "How many customers?", runs=[first.run_id], replay_last="all"
        ):
            events.append(event)
    collapses = [e for e in events if e.type == "CACHE_COLLAPSE"]
    assert len(collapses) == 1
    found = collapses[0].cache_collapse
    assert found is not None and found.iteration == 1 and found.read_tokens < 0.1 * found.input_tokens
    assert found.verdict is not None and (found.verdict.status, found.verdict.reason) == ("changed", "system_changed")
    warnings = [
        r.getMessage() for r in caplog.records if r.name == "segue.cache" and "cache collapse" in r.getMessage()
    ]
    assert len(warnings) == 1 and "system_changed" in warnings[0]
    run = store.get_run(collapses[0].run_id)
    assert run is not None and run.meta is not None and run.meta.segue_cache_collapse == found
    spans = [s for s in exporter.get_finished_spans() if any(e.name == "segue.cache_collapse" for e in s.events)]
    assert len(spans) == 1
    event = next(e for e in spans[0].events if e.name == "segue.cache_collapse")
    assert dict(event.attributes or {})["segue.cache.verdict.reason"] == "system_changed"
    chats = [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("segue.cache.verdict")]
    assert chats, "the chat spans carry the vendor's verdict as attributes"
