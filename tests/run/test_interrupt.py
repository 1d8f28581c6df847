"""Ctrl-C (SIGINT) or a cancelled task ends a run `cancelled` before the process ends (issue 30 item 3).

A run left `running` would wait for its lease to lapse (`segue runs sweep`) before anyone could replay it; an
interrupted run is over, and says so in the store with its end (status, finished_at, error) the moment it stops.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import REPO

from segue import Agent, RunStore
from segue._core.contracts import ProviderRequest, StreamEvent
from segue.generated import Message, ToolCallBlock
from segue.testing import ScriptedProvider

_INTERRUPTED = textwrap.dedent(
    """
    import asyncio, sys, time
    from segue import Agent, RunStore
    from segue.generated import Message, ToolCallBlock
    from segue.testing import ScriptedProvider

    where = sys.argv[2]

    def lookup(q: str) -> str:
        print("in-tool", flush=True)
        time.sleep(3600 if where == "tool" else 0)
        return "facts about " + q

    class Hanging(ScriptedProvider):
        async def complete(self, request):
            if len(self.requests) >= 1:
                print("in-call", flush=True)
                await asyncio.sleep(3600)
            return await super().complete(request)

        async def stream(self, request):
            if len(self.requests) >= 1:
                print("in-call", flush=True)
                await asyncio.sleep(3600)
            async for event in super().stream(request):
                yield event

    call = Message(role="assistant", content=[ToolCallBlock(id="c1", name="lookup", arguments={"q": "x"})])
    agent = Agent(Hanging(replies=[call]), "p", [lookup], RunStore(sys.argv[1]), lease_seconds=300)

    async def main():
        if where == "stream":
            async for event in agent.stream("dig"):
                pass
        else:
            await agent.run("dig")

    if where == "loop":  # KeyboardInterrupt leaves run_until_complete: the run's task is never cancelled
        asyncio.new_event_loop().run_until_complete(main())
    else:
        asyncio.run(main())
    """
)


def _status(url: str) -> tuple[str, str | None, str | None]:
    store = RunStore(url)
    try:
        (row,) = store.list_runs()
        run = store.get_run(row.run_id)
        assert run is not None
        return run.status, run.finished_at, run.error
    finally:
        store.close()


@pytest.mark.parametrize(
    ("where", "marker"), [("call", "in-call"), ("stream", "in-call"), ("loop", "in-call"), ("tool", "in-tool")]
)
def test_sigint_mid_run_marks_it_cancelled(tmp_path: Path, where: str, marker: str) -> None:
    url = f"sqlite:///{tmp_path}/segue.db"
    RunStore(url).close()
    proc = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTED, url, where], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        deadline = time.time() + 60
        while marker not in (line := proc.stdout.readline().decode()):
            assert line and time.time() < deadline, proc.stderr.read().decode() if proc.stderr else ""
        assert _status(url)[0] == "running"
        proc.send_signal(signal.SIGINT)
        if where == "tool":
            # A sync tool's thread cannot be interrupted, so the process waits for it; the run is over already.
            while time.time() < deadline and _status(url)[0] == "running":
                time.sleep(0.1)
            assert proc.poll() is None, "the run was marked before the process ended"
            proc.kill()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    if where != "tool":
        assert proc.returncode != 0 and b"KeyboardInterrupt" in err, err.decode()[-2000:]
    status, finished_at, error = _status(url)
    assert status == "cancelled" and finished_at is not None and "cancelled" in (error or ""), err.decode()[-2000:]
    store = RunStore(url)
    try:
        assert store.sweep(now=time.time() + 3600) == [], "nothing is left for the sweep"
    finally:
        store.close()


async def test_a_cancelled_stream_task_marks_the_run_cancelled(sqlite_store: RunStore) -> None:
    started = asyncio.Event()

    class Slow(ScriptedProvider):
        async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
            if self.requests:
                started.set()
                await asyncio.sleep(3600)
            async for event in super().stream(request):
                yield event

    def lookup(q: str) -> str:
        return q

    call = Message(role="assistant", content=[ToolCallBlock(id="c1", name="lookup", arguments={"q": "x"})])
    agent = Agent(Slow(replies=[call]), "p", [lookup], sqlite_store)

    async def consume() -> None:
        async for _ in agent.stream("wait"):
            pass

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (row,) = sqlite_store.list_runs()
    run = sqlite_store.get_run(row.run_id)
    assert run is not None and run.status == "cancelled" and run.finished_at is not None
    assert [t.message.role for t in run.traces] == ["user", "assistant", "tool"]
