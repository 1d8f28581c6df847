"""Issue 36 item 2: a run whose process was SIGKILLed continues from its journal in another process, as the same
run. Counted from the requests the provider served (their exact bodies) and the tools' own invocation log, both
written to files that survive the kill (tests/run/durable_agent.py)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from durable_agent import LEASE_SECONDS, build

from segue import RunStore
from segue.errors import RunStateError
from tests._support.environment import fresh_pg_store

HERE = Path(__file__).resolve().parent
POINTS = ["model", "between", "tool", "tool_safe", "final"]


def lines(folder: Path, name: str) -> list[Any]:
    path = folder / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def tools(folder: Path) -> list[str]:
    return [entry["tool"] for entry in lines(folder, "tools.jsonl")]


def store_url(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path}/segue.db"
        RunStore(url).close()
        return url
    store = fresh_pg_store()
    url = store.url
    store.close()
    return url


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The run as it goes without a kill: its served requests, tool log, answer, traces and cost."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    url = f"sqlite:///{folder}/segue.db"
    agent = build(url, folder)
    result = asyncio.run(agent.run("settle order 7"))
    detail = agent.store.get_run(result.run_id)
    assert detail is not None and result.status == "success"
    return {"served": lines(folder, "served.jsonl"), "tools": tools(folder), "result": result, "detail": detail}


def kill_at(point: str, url: str, folder: Path) -> None:
    child = subprocess.run(
        [sys.executable, str(HERE / "durable_agent.py"), url, str(folder), point], cwd=HERE.parents[1], timeout=60
    )
    assert child.returncode == -signal.SIGKILL, f"the child was to be killed at {point}"
    time.sleep(LEASE_SECONDS + 0.1)  # its lease lapses


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_killed_run_continues_where_it_died(kind: str, tmp_path: Path, uninterrupted: dict[str, Any]) -> None:
    url = store_url(kind, tmp_path)
    for point in POINTS:
        folder = tmp_path / point
        folder.mkdir()
        kill_at(point, url, folder)
        agent = build(url, folder)
        (run_id,) = [r.run_id for r in agent.store.list_runs(status="running")]
        result = await agent.recover(run_id)
        assert result.run_id == run_id and result.status == "success", point

        served = lines(folder, "served.jsonl")
        # No finished model call is sent twice, and each request is the uninterrupted run's, byte for byte (the
        # one after an interrupted charge carries the result that says so instead of the charge's).
        same = 2 if point == "tool" else 3
        assert len(served) == 3 and served[:same] == uninterrupted["served"][:same], point
        expected_tools = {
            "tool": ["lookup", "charge"],  # the charge in flight is not repeated
            "tool_safe": ["lookup", "lookup", "charge"],  # the retry_safe lookup in flight runs again
        }.get(point, uninterrupted["tools"])
        assert tools(folder) == expected_tools, point

        detail = agent.store.get_run(run_id)
        assert detail is not None and detail.status == "success"
        base = uninterrupted["detail"]
        assert [c.provider_request for c in detail.llm_interactions] == served, point
        traces = [t.message for t in detail.traces]
        if point == "tool":
            # The interrupted step: an error result that says so, and the answer quotes it.
            (charge,) = [c for c in detail.tool_calls if c.name == "charge"]
            assert charge.is_error and "interrupted" in (charge.result or "") and "not repeated" in charge.result
            assert "was not repeated" in (result.answer or "")
        else:
            assert result.usage == uninterrupted["result"].usage, point
            assert result.cost == uninterrupted["result"].cost, point
            assert traces == [t.message for t in base.traces], point
            assert result.answer == uninterrupted["result"].answer, point
            assert [(c.call_id, c.result) for c in detail.tool_calls] == [
                (c.call_id, c.result) for c in base.tool_calls
            ], point
        agent.store.close()


async def test_two_recoverers_race_and_exactly_one_continues(tmp_path: Path) -> None:
    url = store_url("sqlite", tmp_path)
    kill_at("between", url, tmp_path)
    first, second = build(url, tmp_path), build(url, tmp_path)
    (run_id,) = [r.run_id for r in first.store.list_runs(status="running")]
    outcomes = await asyncio.gather(first.recover(run_id), second.recover(run_id), return_exceptions=True)
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1 and won[0].status == "success"
    assert len(lost) == 1 and isinstance(lost[0], RunStateError)
    assert lost[0].reason in ("already_recovered", "not_lapsed"), lost[0]
    assert tools(tmp_path) == ["lookup", "charge"], "the charge ran once"
    assert len(lines(tmp_path, "served.jsonl")) == 3


async def test_recover_refuses_what_is_not_lapsed_and_writes_nothing(tmp_path: Path) -> None:
    url = store_url("sqlite", tmp_path)
    agent = build(url, tmp_path)
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
    kill_at("between", url, tmp_path / "k")
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

    other = build(url, tmp_path / "k")
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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim is written in a worker thread, which goes on when the task is cancelled: a run it claimed is
    ended `cancelled` (as a resume's or a new run's would be), never left running under a holder nobody is."""
    import threading

    url = store_url("sqlite", tmp_path)
    kill_at("between", url, tmp_path)
    agent = build(url, tmp_path)
    (run_id,) = [r.run_id for r in agent.store.list_runs(status="running")]
    served = len(lines(tmp_path, "served.jsonl"))
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
    assert len(lines(tmp_path, "served.jsonl")) == served, "nothing was sent after the claim"
    agent.store.close()
