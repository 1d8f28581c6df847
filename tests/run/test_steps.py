"""Issue 36 item 1: the loop as steps. A model step's response is stored in its own transaction before any of its
tools runs, each tool step's result as it completes, the end once; each call is priced once, on the path that
served it, and the run's cost (what telemetry reports) is their sum."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from segue import Agent, RunStore
from segue.catalog.costs import run_cost
from segue.errors import ProviderError
from segue.providers import Failover
from segue.telemetry import Telemetry
from segue.testing import ScriptedProvider, call, text


async def test_a_response_is_stored_before_its_tools_and_each_result_as_it_completes(
    sqlite_store: RunStore,
) -> None:
    fast_done, slow_started, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def fast(q: str) -> str:
        fast_done.set()
        return "quick " + q

    async def slow(q: str) -> str:
        slow_started.set()
        await release.wait()
        return "slow " + q

    both = call("fast", {"q": "a"}, id="c1")
    both.content.append(call("slow", {"q": "b"}, id="c2").content[0])
    agent = Agent(ScriptedProvider.of(both, text("done")), "p", [fast, slow], sqlite_store)
    task = asyncio.create_task(agent.run("go"))
    await slow_started.wait()
    await fast_done.wait()
    await asyncio.sleep(0.2)  # the fast tool's result reaches the store while the slow one runs
    (running,) = sqlite_store.list_runs()
    during = sqlite_store.get_run(running.run_id)
    assert during is not None and during.status == "running"
    assert [t.message.role for t in during.traces] == ["user", "assistant"], "the response, before its tools"
    assert len(during.llm_interactions) == 1
    # The finished tool's result; the running one (not retry_safe) journaled its start, without a result.
    assert sorted((c.call_id, c.result) for c in during.tool_calls) == [("c1", "quick a"), ("c2", None)]
    release.set()
    result = await task
    after = sqlite_store.get_run(result.run_id)
    assert after is not None and result.status == "success"
    assert [t.message.role for t in after.traces] == ["user", "assistant", "tool", "assistant"]
    assert sorted((c.call_id, c.result) for c in after.tool_calls) == [("c1", "quick a"), ("c2", "slow b")]


async def test_after_a_failover_the_span_s_cost_is_the_run_s_cost(
    sqlite_store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run used to be priced twice: per call on its path (RunCost), and again for the whole run's usage on the
    last response's path for the span; after a failover the two differed."""
    busy = ProviderError("busy", vendor="anthropic", kind="rate_limit")
    primary = ScriptedProvider.of(call("lookup", {"q": "x"}), busy, vendor="anthropic", model="claude-sonnet-4-6")
    secondary = ScriptedProvider.of(text("the answer"), vendor="openai", model="gpt-4.1")

    def lookup(q: str) -> str:
        return "facts about " + q

    exporter = InMemorySpanExporter()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(exporter))
    agent = Agent(
        Failover([primary, secondary]), "p", [lookup], sqlite_store, telemetry=Telemetry(tracer_provider=tracer)
    )
    result = await agent.run("go")
    assert result.status == "success" and result.cost is not None and result.cost.usd is not None
    detail = sqlite_store.get_run(result.run_id)
    assert detail is not None
    served = [(c.model, c.vendor) for c in detail.llm_interactions]
    assert served == [("claude-sonnet-4-6", "anthropic"), ("gpt-4.1", "openai")]
    per_call = run_cost(agent.catalog, [(c.model, c.vendor, c.usage) for c in detail.llm_interactions])
    assert per_call.usd == pytest.approx(result.cost.usd)
    whole_run_on_last_path = agent.catalog.cost(result.usage, "gpt-4.1", "openai")
    assert whole_run_on_last_path != pytest.approx(result.cost.usd), "the two pricings differ on this run"
    (run_span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert (run_span.attributes or {})["segue.cost.usd"] == pytest.approx(result.cost.usd)
