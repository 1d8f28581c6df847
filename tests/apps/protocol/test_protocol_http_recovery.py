"""Issue 36: a run's event stream continues across a recovery over HTTP. A `segue serve --http` process is SIGKILLed
by its own tool in the middle of a run; a second server recovers the run (`run/recover`), and a stream of that run
reconnecting with `Last-Event-ID: <run_id>:<seq>` (the id of the last event the first server sent) receives the
rest: seq continues, no event twice, none missing (segue.apps.protocol.sessions, segue.run.events)."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

from segue import RunStore
from tests._support import warm_cli
from tests._support.protocol_harness import serve_command, twin_agent, write_config
from tests._support.protocol_http import DESCRIBE, Events, http_server, post

KILLER = '''
import os, signal
from pathlib import Path

from segue.demo.shop_db import run_query as _run_query

FLAG = Path(__file__).with_name("killed")


def run_query(sql: str) -> list:
    """Run one read-only SQL query on the shop database."""
    if not FLAG.exists():  # the first server dies during its first query
        FLAG.write_text("1")
        os.kill(os.getpid(), signal.SIGKILL)
    return _run_query(sql)
'''


def killed_server(config: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], tuple[str, int]]:
    """A server expected to die (http_server asserts a clean exit)."""
    proc = warm_cli.Popen(
        serve_command(config, "--http", "--port", "0"),
        stderr=subprocess.PIPE,
        text=True,
        cwd=config.parent,
        env={**os.environ, **env},
    )
    assert proc.stderr is not None
    found = re.search(r"http://([\d.]+):(\d+)/rpc", proc.stderr.readline())
    assert found
    return proc, (found.group(1), int(found.group(2)))


class RunStream(Events):
    """A stream of run/event frames read as (id, event) pairs; `run`: one run's stream, resumed after
    `last_event_id`."""

    def __init__(self, address: tuple[str, int], session: str, run: str = "", last_event_id: str = "") -> None:
        super().__init__(address, session, {"Last-Event-ID": last_event_id} if last_event_id else None, run=run)

    def next_pair(self) -> tuple[str, dict[str, Any]]:
        item = self.items.get(timeout=60)
        return item["id"], item["message"]["params"]["event"]

    def events_until(self, last: str) -> list[tuple[str, dict[str, Any]]]:
        found = [self.next_pair()]
        while found[-1][1]["type"] != last:
            found.append(self.next_pair())
        return found

    def drain(self) -> list[tuple[str, dict[str, Any]]]:
        found = []
        while not self.items.empty():
            found.append(self.next_pair())
        return found


def test_a_run_stream_reconnects_with_last_event_id_across_a_recovery_in_another_server(tmp_path: Path) -> None:
    (tmp_path / "killer_tools.py").write_text(KILLER)
    tables = {"name": "list_tables", "python": "segue.demo.shop_db:list_tables"}
    query = {"name": "run_query", "python": "killer_tools:run_query"}
    config = write_config(tmp_path / "agents.json", [twin_agent([tables, DESCRIBE, query])])
    env = {"PYTHONPATH": str(tmp_path)}
    proc, first = killed_server(config, env)
    try:
        stream = RunStream(first, "a")
        run = {"agent": "analyst", "input": "How many orders?"}
        try:
            post(first, {"jsonrpc": "2.0", "id": 1, "method": "run", "params": run}, session="a")
        except (OSError, http.client.HTTPException):
            pass  # the server died during its query
        assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    received = stream.drain()
    assert received and received[0][1]["type"] == "RUN_STARTED"
    run_id = received[0][1]["run_id"]
    seen = [event["seq"] for _, event in received]
    assert seen == list(range(1, len(seen) + 1)) and received[-1][1]["type"] == "TOOL_CALL", received
    with http_server(config, env) as second:
        # Its lease lapses once this server started, so this client's run/recover continues it (a run whose lease
        # lapsed before, the server recovers at start: test_web_resume.py): the clock is moved, nothing else.
        store = RunStore(f"sqlite:///{tmp_path}/runs.db")
        store.db.execute_sql("UPDATE agent_runs SET lease_expires_at = 1 WHERE id = ?", (run_id,))
        store.close()
        # The client reconnects to the server that will recover the run, naming the last event it received.
        resumed = RunStream(second, "b", run=run_id, last_event_id=f"{run_id}:{seen[-1]}")
        assert (
            "result"
            in post(
                second,
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocol_version": "1.2"}},
                session="b",
            )[1]
        )
        status, answer = post(
            second,
            {"jsonrpc": "2.0", "id": 2, "method": "run/recover", "params": {"agent": "analyst", "run_id": run_id}},
            session="b",
        )
        assert status == 200 and answer["result"]["result"]["status"] == "success", answer
        rest = resumed.events_until("RUN_COMPLETED")
    started = rest[0][1]
    assert started["type"] == "RUN_STARTED" and started["meta"]["recovered"] and started["meta"]["after"] == seen[-1]
    seqs = seen + [event["seq"] for _, event in rest]
    assert seqs == list(range(1, len(seqs) + 1)), (received, rest)
    assert [frame_id for frame_id, _ in rest] == [f"{run_id}:{e['seq']}" for _, e in rest]
    assert {event["run_id"] for _, event in rest} == {run_id}
