"""Issue 36 item 2: a run whose process was SIGKILLed continues from its journal in another process, as the same
run; and through the DBOS adapter (segue.durable.dbos), where the other process recovers it at DBOS.launch().
Counted from the requests segue's twin served (it runs in the test's process, over loopback HTTP, so the kill
does not take its log along) and the tools' own invocation log (tests/run/durable_agent.py)."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import fresh_pg_store, pg_url
from durable_agent import LEASE_SECONDS, METADATA, POINTS, build, served, twin_server

from segue import RunStore
from segue.errors import RunStateError
from segue_twin.server import TwinServer

HERE = Path(__file__).resolve().parent


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


@pytest.fixture
def twin() -> Iterator[TwinServer]:
    with twin_server() as server:
        yield server


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The run as it goes without a kill: the requests the twin served, the tool log, answer, traces and cost."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    with twin_server() as server:
        agent = build(f"sqlite:///{folder}/segue.db", folder, server.url)
        result = asyncio.run(agent.run("settle order 7", metadata=METADATA))
        detail = agent.store.get_run(result.run_id)
        assert detail is not None and result.status == "success"
        return {"served": served(server), "tools": tools(folder), "result": result, "detail": detail}


def child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HERE / "durable_agent.py"), *args],
        cwd=HERE.parents[1],
        timeout=120,
        capture_output=True,
        text=True,
    )


def kill_at(point: str, url: str, folder: Path, twin_url: str, *dbos: str) -> None:
    done = child(url, str(folder), twin_url, point, *dbos)
    assert done.returncode == -signal.SIGKILL, f"the child was to be killed at {point}: {done.stderr[-2000:]}"
    if not dbos:
        time.sleep(LEASE_SECONDS + 0.1)  # its lease lapses


_TWIN_ID = re.compile(r"(?:toolu|msg)_[0-9a-f]{4}[0-9]{8}")


def _ids_as_given(body: Any) -> Any:
    """A request body with the ids the twin gave its answers and their tool calls as their order of appearance."""
    text = json.dumps(body, sort_keys=True)
    found: dict[str, str] = {}
    for match in _TWIN_ID.findall(text):
        found.setdefault(match, f"id{len(found) + 1}")
    for given, name in found.items():
        text = text.replace(given, name)
    return json.loads(text)


def check_recovered(
    point: str, folder: Path, server: TwinServer, store: RunStore, result: Any, uninterrupted: dict[str, Any]
) -> None:
    """The recovered run against the uninterrupted one, counted from the twin's served requests and the tool log:
    no finished model call or tool call happens twice, a charge in flight is not repeated, and the answer, the
    traces and the cost are the uninterrupted run's (but for the interrupted step)."""
    assert result.status == "success", point
    sent = served(server)
    base = uninterrupted["served"]
    if point == "model":
        # The call in flight was served, its answer lost: sent once more, byte-identical (at least once); the
        # twin names the new answer's call anew, so the next request matches with its ids as given.
        assert len(sent) == 4 and sent[:2] == base[:2] and sent[2] == sent[1], point
        assert _ids_as_given(sent[3]) == _ids_as_given(base[2]), point
    else:
        # Each finished model call sent once; the requests are the uninterrupted run's, byte for byte (the one
        # after an interrupted charge carries the result that says so instead of the charge's).
        same = 2 if point == "tool" else 3
        assert len(sent) == 3 and sent[:same] == base[:same], point
    expected_tools = {
        "tool": ["lookup", "charge"],  # the charge in flight is not repeated
        "tool_safe": ["lookup", "lookup", "charge"],  # the retry_safe lookup in flight runs again
    }.get(point, uninterrupted["tools"])
    assert tools(folder) == expected_tools, point

    detail = store.get_run(result.run_id)
    assert detail is not None and detail.status == "success"
    recorded = [c.provider_request for c in detail.llm_interactions]
    assert recorded == (sent[:1] + sent[2:] if point == "model" else sent), point
    previous = uninterrupted["detail"]
    traces = [t.message for t in detail.traces]
    if point == "tool":
        # The interrupted step: an error result that says so, and the answer quotes it.
        (charge,) = [c for c in detail.tool_calls if c.name == "charge"]
        assert charge.is_error and "interrupted" in (charge.result or "") and "not repeated" in charge.result
        assert "was not repeated" in (result.answer or "")
        return
    assert result.usage == uninterrupted["result"].usage, point
    assert result.cost == uninterrupted["result"].cost, point
    assert result.answer == uninterrupted["result"].answer, point
    assert [(c.name, c.result) for c in detail.tool_calls] == [(c.name, c.result) for c in previous.tool_calls], point
    if point != "model":  # (a re-sent call's answer names its call anew)
        assert traces == [t.message for t in previous.traces], point


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


def dbos_database(kind: str, tmp_path: Path) -> tuple[str, str]:
    """DBOS's system database: a SQLite file, or a schema of its own in the test PostgreSQL database."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/dbos.sqlite", ""
    return pg_url(), f"dbos_{secrets.token_hex(4)}"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("point", POINTS)
def test_a_killed_dbos_workflow_continues_where_it_died(
    kind: str, point: str, tmp_path: Path, twin: TwinServer, uninterrupted: dict[str, Any]
) -> None:
    """The run as a DBOS workflow, SIGKILLed; a new process recovers it at DBOS.launch() (no lease to wait out:
    DBOS decides when), through segue's recovery. DBOS's journal holds each step once, as a reference."""
    pytest.importorskip("dbos")
    url = store_url(kind, tmp_path)
    dbos_url, schema = dbos_database(kind, tmp_path)
    kill_at(point, url, tmp_path, twin.url, dbos_url, schema)
    done = child(url, str(tmp_path), twin.url, "recover", dbos_url, schema)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["workflow"] == "SUCCESS"
    model, tool_ = "segue.model_call", "segue.tool_call"
    assert outcome["steps"] == [model, tool_, model, tool_, model], point  # each step once, in the run's order
    store = RunStore(url)
    result = asyncio.run(_result(store, outcome["run_id"]))
    check_recovered(point, tmp_path, twin, store, result, uninterrupted)
    store.close()


async def _result(store: RunStore, run_id: str) -> Any:
    from segue.run.state import stored_result

    detail = store.get_run(run_id)
    assert detail is not None
    return stored_result(detail)


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
