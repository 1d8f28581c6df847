"""Tool context (issue 26, point 7): a tool whose first parameter is annotated `RunContext` (or `RunContext[Deps]`)
receives the run's id, tenant, iteration, the call id and the app's `deps=`, on run, stream, resume and retry; the
parameter is not part of the tool's schema; `deps` is never stored and not part of the idempotency fingerprint; a
RunContext parameter anywhere but first is refused at definition, naming the tool and the parameter."""

from __future__ import annotations

import threading
from typing import Any

import attrs
import pytest

from segue import Agent, RunContext, RunStore, tool
from segue.testing import ScriptedProvider, call, text


@attrs.frozen
class Db:
    """What an app passes as deps: a live object (a lock cannot be stored or serialized)."""

    name: str
    lock: Any = attrs.field(factory=threading.Lock, eq=False)


seen: list[tuple[str, str, int, str, Any, str]] = []


@tool
def lookup(ctx: RunContext[Db], sku: str) -> str:
    """Look up a product.

    Args:
        sku: The product's SKU.
    """
    seen.append((ctx.run_id, ctx.tenant_id, ctx.iteration, ctx.tool_call_id, ctx.deps, sku))
    return f"{sku} in {ctx.deps.name}"


@tool(requires_approval=True)
async def refund(ctx: RunContext[Db], order: str) -> str:
    """Refund an order."""
    seen.append((ctx.run_id, ctx.tenant_id, ctx.iteration, ctx.tool_call_id, ctx.deps, order))
    return "refunded"


@pytest.fixture(autouse=True)
def _clear() -> None:
    seen.clear()


def test_the_context_parameter_is_not_part_of_the_schema() -> None:
    assert lookup.context_parameter == "ctx"
    assert lookup.parameters == {
        "type": "object",
        "properties": {"sku": {"type": "string", "description": "The product's SKU."}},
        "required": ["sku"],
        "additionalProperties": False,
    }
    assert "ctx" not in lookup.argument_types


async def test_a_tool_gets_the_run_id_tenant_iteration_call_id_and_deps(sqlite_store: RunStore) -> None:
    db = Db("eu-db")
    provider = ScriptedProvider.of(
        call("lookup", {"sku": "A1"}, id="c1"), call("lookup", {"sku": "B2"}, id="c2"), text("done")
    )
    result = await Agent(provider, "You look up.", [lookup], sqlite_store).run("find", tenant_id="acme", deps=db)
    assert result.status == "success"
    assert seen == [(result.run_id, "acme", 1, "c1", db, "A1"), (result.run_id, "acme", 2, "c2", db, "B2")]
    assert seen[0][4] is db
    assert "eu-db" in str(sqlite_store.get_run(result.run_id, tenant_id="acme"))  # the result the tool returned
    assert "deps" not in str(sqlite_store.get_run(result.run_id, tenant_id="acme").meta)  # type: ignore[union-attr]


async def test_stream_passes_deps_too() -> None:
    db = Db("stream-db")
    provider = ScriptedProvider.of(call("lookup", {"sku": "A1"}), text("done"))
    events = [e async for e in Agent(provider, "p", [lookup]).stream("find", deps=db)]
    assert events[-1].type == "RUN_COMPLETED" and [s[4] for s in seen] == [db]


async def test_without_deps_the_tool_gets_none() -> None:
    @tool
    def plain(ctx: RunContext, sku: str) -> str:  # type: ignore[type-arg]  # unparametrised RunContext works too
        """Look up."""
        seen.append((ctx.run_id, ctx.tenant_id, ctx.iteration, ctx.tool_call_id, ctx.deps, sku))
        return sku

    provider = ScriptedProvider.of(call("plain", {"sku": "A1"}), text("done"))
    result = await Agent(provider, "p", [plain]).run("find")
    assert result.status == "success" and seen[0][1:] == ("default", 1, "call_plain", None, "A1")


async def test_resume_and_retry_take_deps_again(sqlite_store: RunStore) -> None:
    first, second = Db("first"), Db("second")
    provider = ScriptedProvider.of(
        call("refund", {"order": "A1"}, id="r1"), text("refunded"), call("refund", {"order": "A1"}, id="r2")
    )
    agent = Agent(provider, "You refund.", [refund], sqlite_store)
    paused = await agent.run("refund A1", deps=first)
    assert paused.status == "waiting_approval" and seen == []
    done = await agent.resume(paused.run_id, deps=second)
    assert done.status == "success" and seen == [(paused.run_id, "default", 1, "r1", second, "A1")]
    again = await agent.retry(paused.run_id, deps=first)
    assert again.status == "waiting_approval"
    resumed = [e async for e in agent.resume_stream(again.run_id, deps=first)]
    assert resumed and seen[-1][4] is first


async def test_deps_is_not_part_of_the_idempotency_fingerprint(sqlite_store: RunStore) -> None:
    """The same request with other deps is the same request: the stored result comes back, no conflict."""
    provider = ScriptedProvider.of(call("lookup", {"sku": "A1"}), text("done"))
    agent = Agent(provider, "p", [lookup], sqlite_store)
    first = await agent.run("find", idempotency_key="k1", deps=Db("one"))
    again = await agent.run("find", idempotency_key="k1", deps=Db("two"))
    assert again.run_id == first.run_id and len(seen) == 1 and len(sqlite_store.list_runs()) == 1


def test_a_run_context_not_first_is_refused_naming_the_tool_and_parameter(sqlite_store: RunStore) -> None:
    def late(sku: str, ctx: RunContext[Db]) -> str:
        return sku

    says = "tool late: parameter 'ctx' is a RunContext but is not the first parameter"
    with pytest.raises(TypeError, match=says):
        tool(late)
    with pytest.raises(TypeError, match=says):  # a plain function becomes a tool when the agent is built
        Agent(ScriptedProvider.of(), "p", [late], sqlite_store)
    assert sqlite_store.list_runs() == []
