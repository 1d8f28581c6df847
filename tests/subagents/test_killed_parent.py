"""Issue 41, item 1 (recovery passes through): a parent SIGKILLed while its sub-run runs. Both runs are left
`running` with lapsed leases; recovering the parent recovers the sub-run with it (the parent's tool call runs
again, finds the sub-run it made and continues that run, never starting another), and the parent ends with the
sub-run's answer. A sweep instead ends them both, the child as its parent."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from segue import RunStore
from tests._support.environment import REPO
from tests._support.nested_agent import LEASE_SECONDS, build

AGENT = REPO / "tests" / "_support" / "nested_agent.py"


def killed(tmp_path: Path, store: RunStore) -> str:
    """`store` (tests/conftest.py: SQLite, and PostgreSQL where configured) after a process was killed in it."""
    url = store.url
    child = subprocess.run([sys.executable, str(AGENT), url, str(tmp_path)], cwd=REPO, timeout=60)
    assert child.returncode == -signal.SIGKILL
    time.sleep(LEASE_SECONDS + 0.2)  # both leases lapse
    return url


async def test_recovering_the_parent_recovers_its_running_child(tmp_path: Path, store: RunStore) -> None:
    url = killed(tmp_path, store)
    lead = build(url, tmp_path, die=False)
    running = {r.agent_name: r for r in store.list_runs(status="running")}
    assert set(running) == {"lead", "worker"}
    assert running["worker"].parent_run_id == running["lead"].run_id
    assert running["worker"].parent_call_id == "lead_1"

    result = await lead.recover(running["lead"].run_id)
    assert result.status == "success" and result.answer == "lead: worked: ok"
    [child] = result.children or []
    assert child.run_id == running["worker"].run_id  # the same sub-run, recovered, not a second one
    worker = store.get_run(child.run_id)
    assert worker is not None and worker.status == "success" and worker.answer == "worked: ok"
    assert len(store.lineage.children([result.run_id])) == 1
    assert (tmp_path / "work.log").read_text().count("work") == 2  # died in it once, ran again once (retry_safe)


async def test_a_sweep_ends_the_child_as_its_parent(tmp_path: Path, sqlite_store: RunStore) -> None:
    killed(tmp_path, sqlite_store)
    store = sqlite_store
    swept = store.sweep(now=time.time() + 3600)
    assert len(swept) == 2
    statuses = {r.agent_name: r.status for r in store.list_runs()}
    assert statuses == {"lead": "error", "worker": "error"}
