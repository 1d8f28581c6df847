"""Ctrl-C (SIGINT) or a cancelled task ends a run `cancelled` before the process ends (issue 30 item 3).

A run left `running` would wait for its lease to lapse (`segue runs sweep`) before anyone could replay it; an
interrupted run is over, and says so in the store with its end (status, finished_at, error) the moment it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from segue import Agent, RunStore
from segue._core.contracts import ProviderRequest, StreamDelta, StreamEvent
from segue.generated import Message, ToolCallBlock
from segue.testing import ScriptedProvider, text
from tests._support.environment import REPO

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

    class Store(RunStore):
        def create_run(self, *args, **kwargs):
            if where == "create":  # Ctrl-C while the run's row is written (in a worker thread)
                print("in-create", flush=True)
                time.sleep(1)
            return super().create_run(*args, **kwargs)

    call = Message(role="assistant", content=[ToolCallBlock(id="c1", name="lookup", arguments={"q": "x"})])
    agent = Agent(Hanging(replies=[call]), "p", [lookup], Store(sys.argv[1]), lease_seconds=300)

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
    ("where", "marker"),
    [("call", "in-call"), ("stream", "in-call"), ("loop", "in-call"), ("tool", "in-tool"), ("create", "in-create")],
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
        if where != "create":
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


# -- a run's end is recorded however its reader stops (issue 35 R1) ---------------------------------------------------


def _hanging_agent(store: RunStore, started: asyncio.Event) -> Agent:
    """An agent whose second provider call streams one delta and then waits forever (a slow model)."""

    class Hanging(ScriptedProvider):
        async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
            if self.requests:
                self.requests.append(request)
                started.set()
                yield StreamDelta(kind="text", text="thinking about it")
                await asyncio.sleep(3600)
            async for event in super().stream(request):
                yield event

    def lookup(q: str) -> str:
        return q

    call = Message(role="assistant", content=[ToolCallBlock(id="c1", name="lookup", arguments={"q": "x"})])
    return Agent(Hanging(replies=[call, text("done")]), "p", [lookup], store)


def _only_run(store: RunStore) -> tuple[str, str, str | None]:
    (row,) = store.list_runs()
    run = store.get_run(row.run_id)
    assert run is not None
    return run.run_id, run.status, run.error


async def _next_turn_replays(store: RunStore, run_id: str) -> None:
    """The conversation goes on at once: its next turn replays the stopped run (no ReplayRunError not_terminal)."""
    provider = ScriptedProvider.of(text("picked up"))
    result = await Agent(provider, "p", [], store).run("go on", runs=[run_id], replay_last="all")
    assert result.status == "success"
    assert [m.role for m in provider.requests[0].messages][:3] == ["user", "assistant", "tool"]


@pytest.mark.parametrize("how", ["aclose", "aclosing", "break"])
async def test_a_stream_closed_by_its_reader_ends_the_run_cancelled(sqlite_store: RunStore, how: str) -> None:
    started = asyncio.Event()
    agent = _hanging_agent(sqlite_store, started)
    seen: list[str] = []
    if how == "aclose":
        events = agent.stream("dig")
        async for event in events:
            seen.append(event.type)
            if event.type == "TEXT_DELTA":
                break
        await events.aclose()  # type: ignore[attr-defined]
    elif how == "aclosing":
        async with contextlib.aclosing(agent.stream("dig")) as events:  # type: ignore[type-var]
            async for event in events:
                seen.append(event.type)
                if event.type == "TEXT_DELTA":
                    break
    else:  # a plain break: the generator is closed once it is collected (at once in CPython), by the event loop
        async for event in agent.stream("dig"):
            seen.append(event.type)
            if event.type == "TEXT_DELTA":
                break
        for _ in range(1000):  # a few event-loop turns and one store write; up to 10 s on a loaded machine
            if _only_run(sqlite_store)[1] != "running":
                break
            await asyncio.sleep(0.01)
    assert started.is_set() and seen[0] == "RUN_STARTED" and seen[-1] == "TEXT_DELTA"
    run_id, status, error = _only_run(sqlite_store)
    assert status == "cancelled", "recorded before aclose() returned" if how != "break" else status
    assert error is not None and "event stream was closed" in error
    await _next_turn_replays(sqlite_store, run_id)


async def test_a_stream_closed_right_after_run_started_ends_the_run_cancelled(sqlite_store: RunStore) -> None:
    agent = _hanging_agent(sqlite_store, asyncio.Event())
    events = agent.stream("dig")
    first = await events.__anext__()
    assert first.type == "RUN_STARTED"
    await events.aclose()  # type: ignore[attr-defined]
    assert _only_run(sqlite_store)[1] == "cancelled"


async def test_a_run_cancelled_while_its_row_is_written_ends_cancelled(tmp_path: Path) -> None:
    """The row is written in a worker thread, which goes on when the task is cancelled: the run it wrote is
    ended `cancelled`, not left `running` (Ctrl-C in `segue demo` hit this window)."""
    writing = threading.Event()

    class SlowStore(RunStore):
        def create_run(self, *args: Any, **kwargs: Any) -> Any:
            writing.set()
            time.sleep(0.3)
            return super().create_run(*args, **kwargs)

    store = SlowStore(f"sqlite:///{tmp_path}/slow.db")
    try:
        task = asyncio.create_task(Agent(ScriptedProvider.of(text("hi")), "p", [], store).run("hello"))
        while not writing.is_set():
            await asyncio.sleep(0.01)
        task.cancel("stopped by the test")
        with pytest.raises(asyncio.CancelledError):
            await task
        run_id, status, error = _only_run(store)
        assert status == "cancelled" and error == "the run was cancelled: stopped by the test"
        await _next_turn_replays_plain(store, run_id)
    finally:
        store.close()


async def _next_turn_replays_plain(store: RunStore, run_id: str) -> None:
    provider = ScriptedProvider.of(text("picked up"))
    assert (await Agent(provider, "p", [], store).run("go on", runs=[run_id])).status == "success"


async def test_a_cancelled_stream_records_the_reason_it_was_cancelled_with(sqlite_store: RunStore) -> None:
    started = asyncio.Event()
    agent = _hanging_agent(sqlite_store, started)

    async def consume() -> None:
        async for _ in agent.stream("dig"):
            pass

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 30)
    await asyncio.sleep(0)
    task.cancel("the client went away")
    with pytest.raises(asyncio.CancelledError):
        await task
    run_id, status, error = _only_run(sqlite_store)
    assert (status, error) == ("cancelled", "the run was cancelled: the client went away")
    await _next_turn_replays(sqlite_store, run_id)
