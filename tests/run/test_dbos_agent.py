"""segue.durable.dbos.DBOSAgent in one process (issue 36 item 3): a run as a DBOS workflow whose steps are the run's
model calls and tool calls, each journaled by DBOS as a reference into segue's store; bad input refused before any
workflow or row exists. (Killed and recovered by another process: test_recovery_dbos.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from segue import Agent, RunStore, tool
from segue.errors import InputError
from segue.testing import ScriptedProvider, call, text

dbos = pytest.importorskip("dbos")
DBOS = dbos.DBOS


@tool(retry_safe=True)
def look_up(order: int) -> str:
    """Where an order is."""
    return f"order {order}: shipped"


def replies() -> list[Any]:
    return [call("look_up", {"order": 7}), call("look_up", {"order": 8}), text("Both shipped.")]


@pytest.fixture
def launched(tmp_path: Path) -> Iterator[tuple[Any, RunStore]]:
    from segue.durable.dbos import DBOSAgent

    DBOS(config={"name": "segue-dbos-agent-test", "system_database_url": f"sqlite:///{tmp_path}/dbos.sqlite"})
    store = RunStore(f"sqlite:///{tmp_path}/runs.db")
    durable = DBOSAgent(Agent(ScriptedProvider.of(*replies()), "You answer about orders.", [look_up], store))
    DBOS.launch()
    try:
        yield durable, store
    finally:
        DBOS.destroy()
        store.close()


async def test_a_run_is_a_workflow_of_its_steps_each_a_reference(
    launched: tuple[Any, RunStore], tmp_path: Path
) -> None:
    durable, store = launched
    plain_store = RunStore(f"sqlite:///{tmp_path}/plain.db")
    plain = await Agent(ScriptedProvider.of(*replies()), "You answer about orders.", [look_up], plain_store).run(
        "Where are orders 7 and 8?"
    )
    result = await durable.run("Where are orders 7 and 8?", metadata={"desk": "north"})
    assert result.status == "success" and result.answer == plain.answer == "Both shipped."
    assert (result.usage, result.iterations) == (plain.usage, plain.iterations)

    status = await DBOS.get_workflow_status_async(result.run_id)  # the workflow's id is the run's
    assert status is not None and status.status == "SUCCESS" and status.name == "segue.run.agent"
    steps = await DBOS.list_workflow_steps_async(result.run_id)
    model, tool_ = "segue.model_call", "segue.tool_call"
    assert [s["function_name"] for s in steps] == [model, tool_, model, tool_, model]
    assert [s["output"] for s in steps[:2]] == [
        {"kind": "model_call", "run_id": result.run_id, "iteration": 1},
        {"kind": "tool_call", "run_id": result.run_id, "iteration": 1, "call_id": "call_look_up"},
    ]
    # What the references point at: the run's journal in segue's store, with its metadata.
    detail = store.get_run(result.run_id)
    assert detail is not None and detail.metadata == {"desk": "north"}
    assert [c.iteration for c in detail.llm_interactions] == [1, 2, 3]
    assert [c.result for c in detail.tool_calls] == ["order 7: shipped", "order 8: shipped"]
    plain_store.close()


async def test_bad_input_is_refused_before_any_workflow_or_row(launched: tuple[Any, RunStore]) -> None:
    durable, store = launched
    before = store.counts()
    with pytest.raises(InputError, match="user_input must be a non-empty string"):
        await durable.run("   ")
    with pytest.raises(TypeError, match="no deps="):
        await durable.run("hi", deps=object())
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        await durable.run("hi", colour="red")
    assert store.counts() == before
    assert await DBOS.list_workflows_async() == []


def test_an_agent_without_a_store_is_refused() -> None:
    from segue.durable.dbos import DBOSAgent

    with pytest.raises(ValueError, match="DBOSAgent needs an agent with a RunStore"):
        DBOSAgent(Agent(ScriptedProvider.of(text("hi")), "You help.", []))
