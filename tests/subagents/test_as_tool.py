"""Issue 41, item 1: an agent offered to another as a tool (Agent.as_tool). The sub-run is a run of its own, linked
to the parent run and the tool call that made it; tenant and deps pass through; the parent's total cost includes
its children's, each priced on its own path; bad nesting is refused before any row, with the reason."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import pytest

from segue import Agent, RunContext, RunStore, tool
from segue.generated import RunCost
from segue.run.lineage import total_cost
from segue.testing import ScriptedProvider, call, text

seen: list[tuple[str, Any]] = []


@tool
def lookup(ctx: RunContext[str], sku: str) -> str:
    """Look up a product."""
    seen.append((ctx.tenant_id, ctx.deps))
    return f"{sku}: 3 in stock"


def pair(sqlite_store: RunStore, child_replies: list[Any], parent_replies: list[Any]) -> tuple[Agent, Agent]:
    child = Agent(ScriptedProvider.of(*child_replies), "You know the stock.", [lookup], sqlite_store, name="stock")
    parent = Agent(
        ScriptedProvider.of(*parent_replies),
        "You coordinate.",
        [child.as_tool(description="Ask the stock specialist.")],
        sqlite_store,
        name="coordinator",
    )
    return parent, child


async def test_the_sub_run_is_its_own_run_linked_to_the_parent_call(sqlite_store: RunStore) -> None:
    parent, _child_agent = pair(
        sqlite_store,
        [call("lookup", {"sku": "A1"}), text("A1: 3 in stock")],
        [call("stock", {"task": "how many A1?"}, id="call_stock"), text("There are 3.")],
    )
    seen.clear()
    result = await parent.run("How many A1 do we have?", tenant_id="acme", deps="db-handle")
    assert result.status == "success" and result.answer == "There are 3."
    [child_run] = result.children or []
    assert (child_run.agent_name, child_run.call_id, child_run.status) == ("stock", "call_stock", "success")
    # The sub-run ran in the parent's tenant with the parent's deps, and its answer was the tool's result.
    assert seen == [("acme", "db-handle")]
    detail = sqlite_store.get_run(child_run.run_id, tenant_id="acme")
    assert detail is not None
    assert (detail.parent_run_id, detail.parent_call_id, detail.agent_name) == (result.run_id, "call_stock", "stock")
    assert detail.input == "how many A1?" and detail.answer == "A1: 3 in stock"
    parent_detail = sqlite_store.get_run(result.run_id, tenant_id="acme")
    assert parent_detail is not None and parent_detail.parent_run_id is None
    [tool_call] = parent_detail.tool_calls
    assert tool_call.result == "A1: 3 in stock"
    # The tool's schema is its input: one task.
    assert parent.tools[0].parameters["required"] == ["task"]  # type: ignore[union-attr]
    assert [c.run_id for c in sqlite_store.lineage.children([result.run_id], tenant_id="acme")] == [child_run.run_id]
    assert sqlite_store.lineage.children([result.run_id], tenant_id="other") == []


@attrs.frozen
class Answer:
    count: int


async def test_a_typed_sub_agent_answers_with_its_output_as_json(sqlite_store: RunStore) -> None:
    child = Agent(
        ScriptedProvider.of(text('{"count": 3}')), "Count.", (), sqlite_store, name="counter", output_type=Answer
    )
    parent_provider = ScriptedProvider.of(call("counter", {"task": "count"}, id="c1"), text("3"))
    parent = Agent(parent_provider, "Coordinate.", [child.as_tool()], sqlite_store, name="boss")
    result = await parent.run("count them")
    assert result.status == "success"
    tool_message = parent_provider.requests[1].messages[-1]
    assert tool_message.content[0].content == '{"count":3}'  # type: ignore[union-attr]


def test_total_cost_adds_each_childs_own_priced_cost() -> None:
    own = RunCost(usd=0.5, prices=[])
    child_a = attrs.evolve(_child(), cost=RunCost(usd=0.25, prices=[]))
    child_b = attrs.evolve(_child(), cost=RunCost(usd=0.5, prices=[]), total_cost=RunCost(usd=1.0, prices=[]))
    total = total_cost(own, [child_a, child_b])
    assert total is not None and total.usd == pytest.approx(1.75) and total.missing is None
    unknown = attrs.evolve(_child(), cost=RunCost(missing="no price for x/y", prices=[]))
    total = total_cost(own, [child_a, unknown])
    assert total is not None and total.usd is None and total.missing == "no price for x/y"
    assert total_cost(own, []) is None


def _child() -> Any:
    from segue.generated import ChildRun, Usage

    return ChildRun(
        run_id="r", agent_name="a", call_id="c", status="success", usage=Usage(input_tokens=1, output_tokens=1)
    )


async def test_a_cycle_beyond_the_depth_limit_is_refused_before_any_row(sqlite_store: RunStore) -> None:
    """A offers B and B offers A (built by adding the tool afterwards): the third level is refused with the chain
    of agents, and no run row is written for it."""
    a_provider = ScriptedProvider.of(call("b", {"task": "x"}, id="a1"), text("a done"))
    b_provider = ScriptedProvider.of(call("a", {"task": "y"}, id="b1"), text("b done"), text("b2"))
    a = Agent(a_provider, "A", [], sqlite_store, name="a")
    b = Agent(b_provider, "B", [a.as_tool(max_depth=2)], sqlite_store, name="b")
    a_with_b = Agent(a_provider, "A", [b.as_tool(max_depth=2)], sqlite_store, name="a")
    result = await a_with_b.run("go")
    assert result.status == "success"
    [b_run] = result.children or []
    b_detail = sqlite_store.get_run(b_run.run_id)
    assert b_detail is not None
    [refused] = b_detail.tool_calls
    assert refused.is_error and refused.result is not None
    assert "beyond max_depth=2" in refused.result and "a -> b -> a" in refused.result
    assert sqlite_store.lineage.children([b_run.run_id]) == []  # nothing was written for the refused level
    assert len(sqlite_store.list_runs(limit=10)) == 2


async def test_a_sub_agent_bound_to_another_tenant_is_refused_before_any_row(sqlite_store: RunStore) -> None:
    child = Agent(ScriptedProvider.of(text("never")), "Child.", (), sqlite_store, name="child")
    parent = Agent(
        ScriptedProvider.of(call("child", {"task": "t"}, id="c1"), text("done")),
        "Parent.",
        [child.as_tool(tenant_id="globex")],
        sqlite_store,
        name="parent",
    )
    result = await parent.run("go", tenant_id="acme")
    detail = sqlite_store.get_run(result.run_id, tenant_id="acme")
    assert detail is not None
    [refused] = detail.tool_calls
    assert refused.is_error and "bound to tenant 'globex'" in (refused.result or "")
    assert sqlite_store.lineage.children([result.run_id], tenant_id="acme") == []
    assert sqlite_store.list_runs(tenant_id="globex") == []


async def test_cancelling_the_parent_cancels_its_running_child(sqlite_store: RunStore) -> None:
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        """Take a long time."""
        started.set()
        await asyncio.sleep(60)
        return "never"

    child = Agent(ScriptedProvider.of(call("slow")), "Slow.", [slow], sqlite_store, name="slowpoke")
    parent = Agent(
        ScriptedProvider.of(call("slowpoke", {"task": "wait"}, id="p1")),
        "P.",
        [child.as_tool()],
        sqlite_store,
        name="p",
    )
    task = asyncio.ensure_future(parent.run("go"))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    statuses = {r.agent_name: (r.status, r.parent_run_id) for r in sqlite_store.list_runs()}
    parent_id = next(r.run_id for r in sqlite_store.list_runs(agent_name="p"))
    assert statuses == {"p": ("cancelled", None), "slowpoke": ("cancelled", parent_id)}


async def test_the_sub_runs_span_nests_under_the_parents_tool_call(sqlite_store: RunStore) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from segue.telemetry import Telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = Telemetry(tracer_provider=provider)
    child = Agent(ScriptedProvider.of(text("sub answer")), "C.", (), sqlite_store, name="child", telemetry=telemetry)
    parent = Agent(
        ScriptedProvider.of(call("child", {"task": "t"}, id="p1"), text("done")),
        "P.",
        [child.as_tool()],
        sqlite_store,
        name="parent",
        telemetry=telemetry,
    )
    await parent.run("go")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    parent_span, tool_span, child_span = (
        spans["invoke_agent parent"],
        spans["execute_tool child"],
        spans["invoke_agent child"],
    )
    assert tool_span.parent is not None and tool_span.parent.span_id == parent_span.context.span_id
    assert child_span.parent is not None and child_span.parent.span_id == tool_span.context.span_id
    assert child_span.context.trace_id == parent_span.context.trace_id


async def test_approval_pauses_the_caller_before_the_sub_run_and_resume_runs_it(sqlite_store: RunStore) -> None:
    """as_tool(requires_approval=True): the caller pauses with the delegation pending, nothing of the sub-agent
    runs; resumed and approved, the sub-run runs, linked to the call, and is the resumed result's child."""
    child = Agent(ScriptedProvider.of(text("refunded")), "Refunds.", (), sqlite_store, name="refunds")
    parent = Agent(
        ScriptedProvider.of(call("refunds", {"task": "refund 7"}, id="r1"), text("done")),
        "P.",
        [child.as_tool(requires_approval=True)],
        sqlite_store,
        name="desk",
    )
    paused = await parent.run("refund order 7")
    assert paused.status == "waiting_approval"
    assert [p.call_id for p in paused.pending_approvals or []] == ["r1"]
    assert sqlite_store.list_runs(agent_name="refunds") == []
    resumed = await parent.resume(paused.run_id, approved=True)
    assert resumed.status == "success" and resumed.answer == "done"
    [sub] = sqlite_store.lineage.children([paused.run_id])
    assert (sub.agent_name, sub.parent_call_id, sub.status) == ("refunds", "r1", "success")
    assert [c.run_id for c in resumed.children or []] == [sub.run_id]
