"""Issue 35 R5: a run's status changes only from a state that allows it, and only by the process holding it.

A sweep from a process whose clock was an hour ahead marked a live run `error`, and the run's later end flipped it
to `success`: `finish_run` did not check the status it overwrote, and the sweep judged the lease on its own clock.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from segue import Agent
from segue.generated import Usage
from segue.store import RunStore
from segue.store.leases import LeaseLost
from segue.testing import ScriptedProvider, call, text
from tests._support.store_rows import assistant, new_run, run_ids, user

ZERO = Usage(input_tokens=0, output_tokens=0)


def test_a_sweep_on_a_clock_an_hour_ahead_leaves_a_live_run(store: RunStore, monkeypatch: Any) -> None:
    (rid,) = run_ids(1)
    store.create_run(new_run(rid, lease_seconds=300, lease_owner="holder"), [user("q")])
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600)  # the sweeping process's clock, an hour ahead
    assert store.sweep() == [], "the lease is judged on the database's clock, not the sweeper's"
    store.finish_run(rid, status="success", answer="a", error=None, usage=ZERO, iterations=1, owner="holder")
    detail = store.get_run(rid, tenant_id="t1")
    assert detail is not None and detail.status == "success"


def test_a_lapsed_lease_is_swept_on_the_database_clock(store: RunStore) -> None:
    live, lapsed = run_ids(2)
    store.create_run(new_run(live, lease_seconds=300), [user("q")])
    store.create_run(new_run(lapsed, lease_seconds=0.01), [user("q")])
    time.sleep(0.05)
    assert store.sweep(grace=60) == [], "within the grace period nobody ends it"
    assert store.sweep() == [lapsed]


def test_a_swept_run_s_end_never_overwrites_the_sweep(store: RunStore) -> None:
    (rid,) = run_ids(1)
    store.create_run(new_run(rid, lease_seconds=300, lease_owner="holder"), [user("q")])
    assert store.sweep(now=time.time() + 301) == [rid]
    with pytest.raises(LeaseLost, match=rf"run {rid} is no longer held by this process \(the store holds it error"):
        store.finish_run(rid, status="success", answer="a", error=None, usage=ZERO, iterations=1, owner="holder")
    with pytest.raises(LeaseLost):
        store.record_iteration(
            rid, iteration=1, first_index=1, traces=[assistant("a")], interaction=None, usage=ZERO, owner="holder"
        )
    detail = store.get_run(rid, tenant_id="t1")
    assert detail is not None and detail.status == "error" and "lease expired" in (detail.error or "")
    assert [t.message.role for t in detail.traces] == ["user"], "the refused write left nothing"


def test_finish_is_a_compare_and_set_on_status_and_holder(store: RunStore) -> None:
    a, b = run_ids(2)
    store.create_run(new_run(a, lease_owner="holder"), [])
    with pytest.raises(LeaseLost, match="another process recovered it"):
        store.finish_run(a, status="success", answer="x", error=None, usage=ZERO, iterations=1, owner="intruder")
    store.finish_run(a, status="success", answer="x", error=None, usage=ZERO, iterations=1, owner="holder")
    # The retry of a write that committed (a lost connection) finds its own end and changes nothing.
    store.finish_run(a, status="success", answer="x", error=None, usage=ZERO, iterations=1, owner="holder")
    with pytest.raises(LeaseLost, match="the store holds it success"):
        store.finish_run(a, status="cancelled", answer=None, error="late", usage=ZERO, iterations=1, owner="holder")
    store.create_run(new_run(b), [])
    store.finish_run(b, status="waiting_approval", answer=None, error=None, usage=ZERO, iterations=1)
    with pytest.raises(LeaseLost, match="the store holds it waiting_approval"):
        store.finish_run(b, status="error", answer=None, error="late", usage=ZERO, iterations=1)
    assert store.claim_paused(b, "t1", owner="second") is True
    with pytest.raises(LeaseLost):
        store.finish_run(b, status="success", answer="x", error=None, usage=ZERO, iterations=1, owner="first")
    statuses = {r.run_id: r.status for r in store.list_runs(tenant_id="t1")}
    assert statuses == {a: "success", b: "running"}


async def test_a_run_swept_while_its_tool_ran_ends_with_lease_lost_not_success(sqlite_store: RunStore) -> None:
    """The SDK consumer that stalled past its lease: the sweep's `error` stands; the run's caller is told."""
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(q: str) -> str:
        started.set()
        await release.wait()
        return "done"

    provider = ScriptedProvider.of(call("slow", {"q": "x"}), text("the answer"))
    agent = Agent(provider, "p", [slow], sqlite_store, lease_seconds=300)
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    (running,) = sqlite_store.list_runs()
    assert sqlite_store.sweep(now=time.time() + 301) == [running.run_id]
    release.set()
    with pytest.raises(LeaseLost, match=f"run {running.run_id} is no longer held"):
        await task
    detail = sqlite_store.get_run(running.run_id)
    assert detail is not None and detail.status == "error" and detail.answer is None
