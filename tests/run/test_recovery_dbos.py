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
from tests._support.durable_agent import POINTS
from tests._support.environment import pg_url
from tests._support.recovery import check_recovered, child, kill_at, store_url, twin, uninterrupted

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
