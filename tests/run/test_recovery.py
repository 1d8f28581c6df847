"""Issue 36 item 2: a run whose process was SIGKILLed continues from its journal in another process, as the same
run (through the DBOS adapter: test_recovery_dbos.py).
Counted from the requests segue's twin served (it runs in the test's process, over loopback HTTP, so the kill
does not take its log along) and the tools' own invocation log (tests/_support/durable_agent.py)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from segue.errors import RunStateError
from segue_twin.server import TwinServer
from tests._support.durable_agent import POINTS, build, served
from tests._support.recovery import check_recovered, kill_at, store_url, tools, twin, uninterrupted

__all__ = ["twin", "uninterrupted"]  # fixtures
pytestmark = pytest.mark.slow  # each kill starts processes


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("point", POINTS)
async def test_a_killed_run_continues_where_it_died(
    kind: str, point: str, tmp_path: Path, twin: TwinServer, uninterrupted: dict[str, Any]
) -> None:
    url = store_url(kind, tmp_path)
    kill_at(point, url, tmp_path, twin.url)
    agent = build(url, tmp_path, twin.url)
    (run_id,) = [r.run_id for r in agent.store.list_runs(status="running")]
    result = await agent.recover(run_id)
    assert result.run_id == run_id
    check_recovered(point, tmp_path, twin, agent.store, result, uninterrupted)
    agent.store.close()


async def test_an_approved_call_in_flight_is_asked_again_not_called_interrupted(
    tmp_path: Path, twin: TwinServer
) -> None:
    """A charge that requires approval was approved and running when its process was SIGKILLed: recovery pauses
    the run for approval again (its effect is unknown, and approving is the user's call), rather than telling the
    model it was interrupted; resumed, it runs (as approved again) and the run ends as the uninterrupted one."""
    url = store_url("sqlite", tmp_path)
    kill_at("approval", url, tmp_path, twin.url)
    assert tools(tmp_path) == ["lookup", "charge"]
    agent = build(url, tmp_path, twin.url, approval=True)
    (run_id,) = [r.run_id for r in agent.store.list_runs(status="running")]
    paused = await agent.recover(run_id)
    assert paused.status == "waiting_approval", paused
    (pending,) = paused.pending_approvals or []
    assert pending.name == "charge"
    assert len(served(twin)) == 2 and tools(tmp_path) == ["lookup", "charge"], "nothing sent or run again"
    detail = agent.store.get_run(run_id)
    assert detail is not None and not any(c.is_error for c in detail.tool_calls)

    done = await agent.resume(run_id, approved=True)
    assert done.status == "success" and done.answer == "done: order 7: shipped | charged 500"
    assert tools(tmp_path) == ["lookup", "charge", "charge"], "approved twice, run twice"
    assert len(served(twin)) == 3
    agent.store.close()


async def test_two_recoverers_race_and_exactly_one_continues(tmp_path: Path, twin: TwinServer) -> None:
    url = store_url("sqlite", tmp_path)
    kill_at("between", url, tmp_path, twin.url)
    first, second = build(url, tmp_path, twin.url), build(url, tmp_path, twin.url)
    (run_id,) = [r.run_id for r in first.store.list_runs(status="running")]
    outcomes = await asyncio.gather(first.recover(run_id), second.recover(run_id), return_exceptions=True)
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1 and won[0].status == "success"
    assert len(lost) == 1 and isinstance(lost[0], RunStateError)
    assert lost[0].reason in ("already_recovered", "not_lapsed"), lost[0]
    assert tools(tmp_path) == ["lookup", "charge"], "the charge ran once"
    assert len(served(twin)) == 3


async def test_recover_refuses_what_is_not_lapsed_and_writes_nothing(tmp_path: Path, twin: TwinServer) -> None:
    url = store_url("sqlite", tmp_path)
    agent = build(url, tmp_path, twin.url)
    finished = await agent.run("settle order 7")
    before = agent.store.counts()
    with pytest.raises(RunStateError, match=rf"run {finished.run_id} is success, not running") as info:
        await agent.recover(finished.run_id)
    assert info.value.reason == "not_lapsed"
    with pytest.raises(RunStateError, match="no run") as info:
        await agent.recover(finished.run_id, tenant_id="globex")
    assert info.value.reason == "not_found"
    with pytest.raises(RunStateError, match="no run") as info:
        await agent.recover("01J0000000000000000000000A")
    assert info.value.reason == "not_found"
    assert agent.store.counts() == before

    (tmp_path / "k").mkdir()
    kill_at("between", url, tmp_path / "k", twin.url)
    (run_id,) = [r.run_id for r in agent.store.list_runs(status="running")]
    agent.store.db.execute_sql(
        "UPDATE agent_runs SET lease_expires_at = lease_expires_at + 3600 WHERE id = ?", (run_id,)
    )
    with pytest.raises(RunStateError, match=rf"run {run_id} still holds its lease") as info:
        await agent.recover(run_id)
    assert info.value.reason == "not_lapsed"
    agent.store.db.execute_sql(
        "UPDATE agent_runs SET lease_expires_at = lease_expires_at - 7200 WHERE id = ?", (run_id,)
    )

    other = build(url, tmp_path / "k", twin.url)
    other._pipeline.agent = other._pipeline.agent.__class__(  # the same agent with another prompt
        **{**{f: getattr(other._pipeline.agent, f) for f in _fields(other)}, "system": "You refund orders."}
    )
    before = agent.store.counts()
    with pytest.raises(RunStateError, match=rf"run {run_id} cannot be recovered by this agent") as info:
        await other.recover(run_id)
    assert info.value.reason == "config_changed"
    assert agent.store.counts() == before


def _fields(agent: Any) -> list[str]:
    import attrs

    return [f.name for f in attrs.fields(type(agent._pipeline.agent)) if f.init]


async def test_a_recover_cancelled_while_its_claim_is_written_ends_the_run_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, twin: TwinServer
) -> None:
    """The claim is written in a worker thread, which goes on when the task is cancelled: a run it claimed is
    ended `cancelled` (as a resume's or a new run's would be), never left running under a holder nobody is."""
    import threading

    url = store_url("sqlite", tmp_path)
    kill_at("between", url, tmp_path, twin.url)
    agent = build(url, tmp_path, twin.url)
    (run_id,) = [r.run_id for r in agent.store.list_runs(status="running")]
    sent = len(served(twin))
    claiming, claim = threading.Event(), agent.store.leases.claim_lapsed

    def slow_claim(*args: Any, **kwargs: Any) -> bool:
        claiming.set()
        time.sleep(0.3)
        return claim(*args, **kwargs)

    monkeypatch.setattr(agent.store.leases, "claim_lapsed", slow_claim)
    task = asyncio.create_task(agent.recover(run_id))
    while not claiming.is_set():
        await asyncio.sleep(0.01)
    task.cancel("stopped by the test")
    with pytest.raises(asyncio.CancelledError):
        await task
    run = agent.store.get_run(run_id)
    assert run is not None and run.status == "cancelled"
    assert len(served(twin)) == sent, "nothing was sent after the claim"
    agent.store.close()


async def test_an_engine_leaves_a_run_recovered_outside_it(tmp_path: Path, twin: TwinServer) -> None:
    """An engine's recovery (segue.durable.dbos: DBOS decides when, without waiting for the lease) takes over only
    its own dead execution's lease: a run held by a process that is not the engine's (one that recovered it with
    Agent.recover once its lease lapsed, or ran it without the engine) is left to that process, nothing written."""
    from segue.durable.dbos import DBOSSteps

    url = store_url("sqlite", tmp_path)
    kill_at("between", url, tmp_path, twin.url)
    agent = build(url, tmp_path, twin.url)
    (run_id,) = [r.run_id for r in agent.store.list_runs(status="running")]
    before = agent.store.counts()
    with pytest.raises(RunStateError, match=rf"run {run_id} is held by a process that recovered or resumed it outs"):
        async for _ in agent._pipeline.recover(run_id, "default", streaming=False, steps=DBOSSteps(run_id)):
            pass
    assert agent.store.counts() == before and len(served(twin)) == 2
    assert (await agent.recover(run_id)).status == "success"  # still the lapsed run it was
    agent.store.close()
