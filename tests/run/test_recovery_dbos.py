"""Issue 36: the kill-and-recover test through the DBOS adapter (segue.durable.dbos), on SQLite and PostgreSQL: the
run is a DBOS workflow in a child process, SIGKILLed at each point, and a new process recovers it at DBOS.launch().
Counted from the twin's served requests and the tools' own invocation log (tests/_support/recovery.py). A file of
its own, so pytest-xdist runs it beside test_recovery.py (each kill starts two processes)."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from segue import RunStore
from segue_twin.server import TwinServer
from tests._support.durable_agent import METADATA, POINTS, RESUME_POINTS, build, run_then_resume, served, twin_server
from tests._support.environment import pg_url
from tests._support.recovery import check_recovered, child, kill_at, store_url, tools, twin, uninterrupted

__all__ = ["twin", "uninterrupted"]  # fixtures
pytestmark = pytest.mark.slow  # each kill starts processes


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


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The paused run resumed (its charge approved) without a kill: the requests the twin served, the tool log,
    the result and the traces."""
    folder = tmp_path_factory.mktemp("resumed")
    with twin_server() as server:
        agent = build(f"sqlite:///{folder}/segue.db", folder, server.url, approval=True)
        result = asyncio.run(run_then_resume(agent))
        detail = agent.store.get_run(result.run_id)
        assert detail is not None and result.status == "success"
        # The resumed run keeps its metadata: the trailing state's app_state is the one it started with.
        assert all("desk north" in json.dumps(body) for body in served(server))
        return {"served": served(server), "tools": tools(folder), "result": result, "detail": detail}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("point", RESUME_POINTS)
def test_a_resume_killed_in_its_dbos_workflow_continues_where_it_died(
    kind: str, point: str, tmp_path: Path, twin: TwinServer, resumed: dict[str, Any]
) -> None:
    """A run paused for the charge's approval is resumed through DBOSAgent.resume in a child process, SIGKILLed in
    the resumed part (its model call served and its answer lost, or its end being written); a new process's DBOS
    recovers the resume's workflow: the charge (finished) does not run again, a finished model call is not sent
    again, the call in flight is sent once more byte-identical, and the run ends as the uninterrupted resume."""
    pytest.importorskip("dbos")
    url = store_url(kind, tmp_path)
    dbos_url, schema = dbos_database(kind, tmp_path)
    agent = build(url, tmp_path, twin.url, approval=True)
    paused = asyncio.run(agent.run("settle order 7", metadata=METADATA))
    assert paused.status == "waiting_approval"
    stored = agent.store.get_run(paused.run_id)
    assert stored is not None and stored.meta.segue_events is not None
    pause = stored.meta.segue_events.count  # the seq of its RUN_PAUSED event

    kill_at(point, url, tmp_path, twin.url, dbos_url, schema)
    assert tools(tmp_path) == ["lookup", "charge"], "the approved charge ran before the kill"
    done = child(url, str(tmp_path), twin.url, "recover_resume", dbos_url, schema)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["workflow"] == "SUCCESS" and outcome["workflow_id"] == f"{paused.run_id}:resume:{pause}"
    assert outcome["steps"] == ["segue.tool_call", "segue.model_call"], "each resumed step once"

    sent, base = served(twin), resumed["served"]
    if point == "resume_model":  # served, its answer lost: sent once more, byte-identical (at least once)
        assert len(sent) == 4 and sent[:3] == base[:3] and sent[3] == sent[2]
    else:  # every model call sent once
        assert sent == base
    assert tools(tmp_path) == ["lookup", "charge"], "the finished charge is not run again"
    result = asyncio.run(_result(agent.store, paused.run_id))
    expected = resumed["result"]
    assert (result.status, result.answer) == ("success", expected.answer) == ("success", outcome["answer"])
    assert (result.usage, result.cost) == (expected.usage, expected.cost)
    detail = agent.store.get_run(paused.run_id)
    assert detail is not None
    assert [t.message for t in detail.traces] == [t.message for t in resumed["detail"].traces]
    assert [c.provider_request for c in detail.llm_interactions] == (sent[:3] if point == "resume_model" else sent)
    agent.store.close()
