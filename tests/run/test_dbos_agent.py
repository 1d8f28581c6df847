"""segue.durable.dbos.DBOSAgent in one process (issue 36 item 3): a run as a DBOS workflow whose steps are the run's
model calls and tool calls, each journaled by DBOS as a reference into segue's store; bad input refused before any
workflow or row exists. (Killed and recovered by another process: test_recovery_dbos.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from segue import Agent, RunStore, tool
from segue.errors import InputError, RunStateError
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


# -- resume (a run paused for approval, continued as a DBOS workflow) ------------------------------------------------


def charging(log: list[int]) -> Any:
    @tool(requires_approval=True)
    def charge(cents: int) -> str:
        """Charge the customer (needs the user's approval)."""
        log.append(cents)
        return f"charged {cents}"

    return charge


def approval_replies() -> list[Any]:
    return [call("look_up", {"order": 7}), call("charge", {"cents": 500}), text("Charged 500.")]


@pytest.fixture
def approving(tmp_path: Path) -> Iterator[tuple[Any, RunStore, list[int]]]:
    from segue.durable.dbos import DBOSAgent

    DBOS(config={"name": "segue-dbos-resume-test", "system_database_url": f"sqlite:///{tmp_path}/dbos.sqlite"})
    store, charged = RunStore(f"sqlite:///{tmp_path}/runs.db"), []
    agent = Agent(
        ScriptedProvider.of(*approval_replies() * 2), "You settle orders.", [look_up, charging(charged)], store
    )
    durable = DBOSAgent(agent)
    DBOS.launch()
    try:
        yield durable, store, charged
    finally:
        DBOS.destroy()
        store.close()


async def test_a_paused_run_resumes_as_a_workflow_of_its_steps(
    approving: tuple[Any, RunStore, list[int]], tmp_path: Path
) -> None:
    durable, store, charged = approving
    plain_store, plain_charged = RunStore(f"sqlite:///{tmp_path}/plain.db"), []
    plain = Agent(ScriptedProvider.of(*approval_replies()), "You settle orders.", [look_up, charging(plain_charged)])
    plain = Agent(plain.provider, plain.prompt, plain.tools, plain_store)
    expected = await plain.resume((await plain.run("Settle order 7")).run_id, approved=True)

    paused = await durable.run("Settle order 7")
    assert paused.status == "waiting_approval" and charged == []
    detail = store.get_run(paused.run_id)
    assert detail is not None and detail.meta.segue_events is not None
    pause = detail.meta.segue_events.count  # the seq of its RUN_PAUSED event
    done = await durable.resume(paused.run_id, approved=True)
    assert done.status == "success" and done.run_id == paused.run_id and charged == [500]
    assert (done.answer, done.usage, done.iterations) == (expected.answer, expected.usage, expected.iterations)

    workflow_id = f"{paused.run_id}:resume:{pause}"  # one workflow per pause of the run
    status = await DBOS.get_workflow_status_async(workflow_id)
    assert status is not None and status.status == "SUCCESS" and status.name == "segue.resume.agent"
    steps = await DBOS.list_workflow_steps_async(workflow_id)
    assert [s["function_name"] for s in steps] == ["segue.tool_call", "segue.model_call"]  # the resumed part's
    assert [s["output"] for s in steps] == [
        {"kind": "tool_call", "run_id": paused.run_id, "iteration": 2, "call_id": "call_charge"},
        {"kind": "model_call", "run_id": paused.run_id, "iteration": 3},
    ]
    finished = store.get_run(paused.run_id)
    assert finished is not None
    assert [t.message for t in finished.traces] == [t.message for t in (plain_store.get_run(expected.run_id)).traces]
    plain_store.close()


async def test_resuming_the_same_pause_twice_runs_it_once(
    approving: tuple[Any, RunStore, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two requests resume the same pause at once, both checked before either starts its workflow: they name the
    same workflow (`<run id>:resume:<pause seq>`), which DBOS starts once; the other is refused."""
    durable, store, charged = approving
    paused = await durable.run("Settle order 7")
    pipeline, checked, both = durable.agent._pipeline, [], asyncio.Event()
    resumption = pipeline.resumption

    async def check_both_first(*args: Any, **kwargs: Any) -> Any:
        found = await resumption(*args, **kwargs)
        checked.append(found)
        if len(checked) == 2:
            both.set()
        if len(checked) <= 2:  # (the workflow checks it again, once started)
            await both.wait()
        return found

    monkeypatch.setattr(pipeline, "resumption", check_both_first)
    outcomes = await asyncio.gather(
        durable.resume(paused.run_id, approved=True),
        durable.resume(paused.run_id, approved=False),
        return_exceptions=True,
    )
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1 and won[0].status == "success", outcomes
    assert len(lost) == 1 and isinstance(lost[0], RunStateError), outcomes
    assert lost[0].reason == "already_resumed", lost[0]
    detail = store.get_run(paused.run_id)
    assert detail is not None
    (charge,) = [c for c in detail.tool_calls if c.name == "charge"]  # one decision, the winner's
    assert charged == ([] if charge.is_error else [500])
    resumes = [w for w in await DBOS.list_workflows_async() if w.name == "segue.resume.agent"]
    assert len(resumes) == 1
    with pytest.raises(RunStateError, match=rf"run {paused.run_id} is success, not waiting_approval") as info:
        await durable.resume(paused.run_id)  # resumed already: as Agent.resume says
    assert info.value.reason == "not_paused"


async def test_resume_refuses_what_agent_resume_refuses_before_any_workflow(
    approving: tuple[Any, RunStore, list[int]],
) -> None:
    durable, store, charged = approving
    finished = await durable.run("Settle order 7")
    await durable.resume(finished.run_id)
    paused = await durable.run("Settle order 7")
    (pending,) = paused.pending_approvals or []
    before, workflows = store.counts(), len(await DBOS.list_workflows_async())
    refusals: list[tuple[str, dict[str, Any]]] = [
        (finished.run_id, {}),  # not paused
        (paused.run_id, {"tenant_id": "globex"}),  # another tenant's
        ("01J0000000000000000000000A", {}),  # unknown
        ("not a run id", {}),
        (paused.run_id, {"approved": {"call_nope": True}}),  # approvals for calls it does not wait on
        (paused.run_id, {"tool_results": {"call_nope": "done"}}),
        (paused.run_id, {"approved": "yes"}),
    ]
    for run_id, kwargs in refusals:
        with pytest.raises(Exception) as plain:
            await durable.agent.resume(run_id, **kwargs)
        with pytest.raises(type(plain.value)) as refused:
            await durable.resume(run_id, **kwargs)
        assert str(refused.value) == str(plain.value), kwargs
        assert getattr(refused.value, "reason", None) == getattr(plain.value, "reason", None)
    assert store.counts() == before and charged == [500]
    assert len(await DBOS.list_workflows_async()) == workflows  # no workflow started
    with pytest.raises(TypeError, match="deps"):
        await durable.resume(paused.run_id, deps=object())
    assert pending.name == "charge" and (await durable.resume(paused.run_id)).status == "success"
