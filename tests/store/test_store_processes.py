"""Several processes writing one SQLite file (issue 24 N1): two app workers, or two `segue serve`, on one segue.db.

Write transactions used to begin deferred and read before they wrote (finish_run reads the run's meta, then
updates the row). SQLite cannot make such a transaction wait for another process's writer: it answers "database
is locked" at once, whatever the busy timeout. Runs ended `error`, and when the final write failed too, rows were
left `running` after their writers had exited.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from segue import Agent, RunStore
from segue.errors import StoreError
from segue.generated import RunStatus
from segue.store.migrations import LATEST
from segue.store.models import Bound
from segue.testing import ScriptedProvider, text
from tests._support.environment import pg_url

REPO = Path(__file__).resolve().parents[2]

# One app worker: 10 concurrent conversations of 2 turns on the twin (the second turn replays the first run), its
# runs' outcomes as JSON lines on stdout. It waits for "go" on stdin, so the processes' writes overlap.
WORKER = textwrap.dedent(
    """
    import asyncio, json, sys

    from segue import Agent, RunStore
    from segue.demo import PROMPT, QUESTIONS, demo_tools
    from segue.providers import AnthropicProvider
    from segue_twin import Twin

    url, worker, conversations, turns = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    async def conversation(agent, tenant):
        ids = []
        for question in QUESTIONS[:turns]:
            try:
                result = await agent.run(question, runs=ids or None, replay_last="all", tenant_id=tenant)
            except Exception as e:  # what the caller was told, whatever it is
                print(json.dumps({"tenant": tenant, "raised": f"{type(e).__name__}: {e}"}), flush=True)
                continue
            print(json.dumps({"tenant": tenant, "run_id": result.run_id, "status": result.status,
                              "error": result.error}), flush=True)
            if result.status == "success":
                ids.append(result.run_id)

    async def main():
        store = RunStore(url)
        provider = AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client())
        agent = Agent(provider, PROMPT, demo_tools(), store, name="worker", max_iterations=8)
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        await asyncio.gather(*(conversation(agent, f"{worker}-{i}") for i in range(conversations)))
        store.close()

    asyncio.run(main())
    """
)


def test_three_processes_on_one_sqlite_file_lose_no_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/segue.db"
    RunStore(url).close()
    processes, conversations, turns = 3, 10, 2
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, f"p{n}", str(conversations), str(turns)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for n in range(processes)
    ]
    try:
        for w in workers:
            assert w.stdout is not None and w.stdout.readline() == "ready\n"
        for w in workers:
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.flush()
        outputs = [w.communicate(timeout=120)[0] for w in workers]
    finally:
        for w in workers:
            w.kill()
    assert [w.returncode for w in workers] == [0] * processes
    told = [json.loads(line) for out in outputs for line in out.splitlines()]
    assert len(told) == processes * conversations * turns
    failed = [t for t in told if t.get("status") != "success"]
    assert not failed, f"{len(failed)} of {len(told)} runs did not succeed, e.g. {failed[:3]}"

    store = RunStore(url, read_only=True)
    stored = store.list_runs(all_tenants=True, limit=1000)
    assert Counter(r.status for r in stored) == {"success": len(told)}, "nothing is left running"
    assert {r.run_id for r in stored} == {t["run_id"] for t in told}, "the store holds what each caller was told"
    for t in told:  # each run whole: the user message, assistant + tool per tool-calling iteration, the answer
        detail = store.get_run(t["run_id"], all_tenants=True)
        assert detail is not None and detail.tenant_id == t["tenant"]
        assert len(detail.traces) == 2 * len(detail.llm_interactions)
    store.close()


class FailingEnds(RunStore):
    """A store whose final writes fail for the statuses in `failing` (the database locked, a disk gone...)."""

    failing: tuple[str, ...] = ()

    def finish_run(self, run_id: str, *, status: RunStatus, **kw: Any) -> None:
        if status in self.failing:
            raise StoreError(f"the run store at {self.url} failed: OperationalError: database is locked")
        super().finish_run(run_id, status=status, **kw)


async def test_a_run_whose_end_cannot_be_stored_is_never_reported_otherwise(tmp_path: Path) -> None:
    store = FailingEnds(f"sqlite:///{tmp_path}/segue.db")
    agent = Agent(ScriptedProvider(replies=[text("42"), text("43"), text("44")]), "p", [], store)

    # The success cannot be stored, the error can: the caller is told the error the store holds.
    store.failing = ("success",)
    result = await agent.run("first")
    detail = store.get_run(result.run_id)
    assert detail is not None and (result.status, detail.status) == ("error", "error")
    assert result.error == detail.error and "database is locked" in (result.error or "")

    # Neither can: the caller is told that the store still holds the run as running (and how it ends), never
    # a status the store does not hold, on run() and on stream() alike.
    store.failing = ("success", "error")
    with pytest.raises(StoreError, match=r"ended error, but the run store could not record it: .*database is "
                       r"locked.*still holds the run as running.*segue runs sweep") as raised:  # fmt: skip
        await agent.run("second")
    events = []
    with pytest.raises(StoreError, match="still holds the run as running"):
        async for event in agent.stream("third"):
            events.append(event)
    assert {"RUN_COMPLETED", "RUN_ERROR", "RUN_PAUSED"}.isdisjoint(e.type for e in events), "no outcome claimed"
    assert all(e.result is None for e in events)
    running = store.list_runs(status="running")
    assert len(running) == 2 and raised.value.args[0].startswith(f"run {running[1].run_id} ended error")
    assert sorted(store.sweep(now=time.time() + 301)) == sorted(r.run_id for r in running)
    store.close()


OPENER = textwrap.dedent(
    """
    import sys
    from segue import RunStore
    print("ready", flush=True)
    sys.stdin.readline()
    RunStore(sys.argv[1]).close()
    """
)


def open_together(url: str, processes: int = 4) -> list[subprocess.CompletedProcess[str]]:
    """`processes` writers that open the store at the same moment, as app workers starting together do."""
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for _ in range(processes)
    ]
    for w in workers:  # every interpreter has imported segue and waits for the line
        assert w.stdout is not None and w.stdout.readline() == "ready\n"
    for w in workers:
        assert w.stdin is not None
        w.stdin.write("go\n")
        w.stdin.flush()
    ended = [(w, w.communicate(timeout=120)) for w in workers]
    return [subprocess.CompletedProcess(w.args, w.returncode, out, err) for w, (out, err) in ended]


def test_a_store_opened_while_another_connection_holds_the_write_lock_waits_for_it(tmp_path: Path) -> None:
    """Switching a new SQLite file to WAL while another connection holds its write lock answered "database is
    locked" at once, whatever the busy timeout (SQLite does not wait where waiting could deadlock): the writer
    starting second on a new store failed to open it. It now waits the lock out."""
    path = tmp_path / "new.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE app_table (x)")  # another writer, mid-transaction
    release = threading.Timer(0.5, lambda: holder.execute("COMMIT"))
    release.start()
    started = time.monotonic()
    try:
        store = RunStore(f"sqlite:///{path}")
    finally:
        release.join()
        holder.close()
    assert time.monotonic() - started >= 0.4  # it waited for the lock, rather than failing at once
    assert store.schema_version() == LATEST
    store.close()


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_writers_starting_together_on_a_new_store_all_open_it(tmp_path: Path, database: str) -> None:
    """All but one failed: each saw no tables and created them ("database is locked" on SQLite, a duplicate key
    in pg_type on PostgreSQL)."""
    if database == "sqlite":
        url = f"sqlite:///{tmp_path}/new.db"
    else:
        url = pg_url()
        scratch = RunStore(url)
        scratch.db.drop_tables(Bound(scratch.db).all, safe=True, cascade=True)  # a new, empty database
        scratch.close()
    done = open_together(url)
    assert [d.returncode for d in done] == [0] * len(done), [d.stderr.splitlines()[-1:] for d in done]
    store = RunStore(url, read_only=True)
    assert store.schema_version() == LATEST
    store.close()
