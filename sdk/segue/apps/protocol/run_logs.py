"""The run streams `segue serve --http` keeps beyond any session: its web runs (`/ag-ui/`, `/ai-sdk/`) and the runs
it recovered when it started. A client that lost its connection reads the rest of such a run from here.

- A run log holds the run's RunEvents (the last `event_buffer` of them), each with its `seq`; readers follow it
  from its oldest event, each in its own wire format (segue.apps.protocol.web for the web streams; `run/event`
  frames with the id `<run_id>:<seq>` for `GET /events?session=NAME&run=RUN_ID`), so a reader that resumes after
  an id gets exactly the frames after it.
- The run is produced by a task of its own, not by a connection: a web run goes on without a reader for
  `web_resume_seconds`, then it is cancelled ("the client closed the connection") unless a reader came back; a
  run the server recovered at start goes on to its end whoever reads it.
- A finished run's log is kept for KEEP_SECONDS, so a client whose reconnect loop spans a server restart (the
  process start and the recovery) still reads the run's end; at most `max_logs` finished logs are kept (the oldest
  go first). Memory is bounded by max_logs x event_buffer events plus the runs in flight.
- Tenancy: a log belongs to the run's tenant; a principal reads it only if its token may act for that tenant
  (segue.apps.protocol.auth), and otherwise nothing tells whether it exists.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import Any

from segue.apps.protocol.auth import Principal, TenantNotAllowed
from segue.apps.protocol.config import ServeApp
from segue.generated import RunEvent, get_converter
from segue.store.connection import redact
from segue.store.records import SWEEP_GRACE_SECONDS

log = logging.getLogger("segue.protocol")

#: The reason a run's task is cancelled with when its reader went away and none came back; the run records it.
CLIENT_GONE = "the client closed the connection"
#: The reason when its reader was closed for reading nothing (write_timeout_seconds) and none came back.
STALLED = "its event stream was closed: the client read nothing within write_timeout_seconds"
#: How long a finished run's log is kept for a client that reconnects: longer than a server restart plus the
#: recovery of its runs takes, and than a browser's reconnect loop waits between attempts.
KEEP_SECONDS = 300.0
#: A stream with nothing to send says so this often, so that proxies keep it open.
KEEP_ALIVE_SECONDS = 15.0
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Connection: close\r\nX-Accel-Buffering: no\r\n\r\n: subscribed\n\n"
)


class Stalled(Exception):
    """Thrown into a reader whose client read nothing for write_timeout_seconds."""


class Behind(Exception):
    """A reader fell further behind its run than the log keeps."""


class RunLog:
    """One run's events as this server produced them, and the readers following it."""

    def __init__(
        self,
        run_id: str,
        tenant: str,
        agent: str,
        buffer: int,
        *,
        thread: str | None = None,
        client_run_id: str | None = None,
        abandon_after: float | None = None,
        origin: str = "recovered",
    ) -> None:
        self.run_id, self.tenant, self.agent = run_id, tenant, agent
        #: The `request_id` of its run/event notifications: where the run came from, the id of no client's request.
        self.request_id = f"{origin}:{run_id}"
        self.thread, self.client_run_id = thread, client_run_id
        #: Seconds the run goes on without a reader before it is cancelled (None: to its end).
        self.abandon_after = abandon_after
        self.events: collections.deque[RunEvent] = collections.deque(maxlen=max(buffer, 1))
        self.count = 0  # events appended so far (the held ones are the last len(events))
        self.done = False
        self.ended_at: float | None = None
        self.readers = 0
        self.task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._abandon: asyncio.TimerHandle | None = None
        #: Why the last reader left: the cause the run records when none comes back.
        self.cause = CLIENT_GONE
        #: Why the run was cut short, when this log cancelled it (a reader's end: `cause`); what a reader that comes
        #: back later is told in the protocol's closing error.
        self.cut_short: str | None = None

    def append(self, event: RunEvent) -> None:
        self.events.append(event)
        self.count += 1
        self._wake()

    def finish(self) -> None:
        self.done, self.ended_at = True, time.monotonic()
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def follow(self, idle: float = KEEP_ALIVE_SECONDS) -> AsyncIterator[RunEvent | None]:
        """Every event the log holds, oldest first, then each as it comes, until the run ends; None after `idle`
        seconds without one (a reader's keep-alive). Behind when the reader is slower than the log keeps."""
        index = self.count - len(self.events)
        while True:
            changed = self._changed
            while index < self.count:
                first = self.count - len(self.events)
                if index < first:
                    raise Behind(f"the run's events before #{first + 1} were dropped from the server's log")
                event = self.events[index - first]
                index += 1
                yield event
            if self.done:
                return
            try:
                await asyncio.wait_for(changed.wait(), idle)
            except TimeoutError:
                yield None

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """A reader follows the run. When the last one leaves a web run still going, it is cancelled once
        `abandon_after` passed without another."""
        self.readers += 1
        if self._abandon is not None:
            self._abandon.cancel()
            self._abandon = None
        try:
            yield
        finally:
            self.readers -= 1
            if self.readers == 0 and not self.done and self.abandon_after is not None:
                if self.abandon_after <= 0:
                    self._abandoned()
                else:
                    self._abandon = asyncio.get_running_loop().call_later(self.abandon_after, self._abandoned)

    def _abandoned(self) -> None:
        if self.readers == 0 and self.task is not None:
            self.cut_short = f"the run was cancelled: {self.cause}"
            self.task.cancel(self.cause)

    def readable_by(self, principal: Principal | None) -> bool:
        if principal is None:
            return True
        try:
            principal.tenant_for(self.tenant)
        except TenantNotAllowed:
            return False
        return True


class RunLogs:
    """Every run log of the server, by run id."""

    def __init__(self, *, buffer: int = 1000, max_logs: int = 1000, keep_seconds: float = KEEP_SECONDS) -> None:
        self.buffer, self.max_logs, self.keep_seconds = buffer, max_logs, keep_seconds
        self.logs: dict[str, RunLog] = {}

    def open(self, run_id: str, tenant: str, agent: str, **kwargs: Any) -> RunLog:
        self.reap()
        finished = sorted((g for g in self.logs.values() if g.done), key=lambda g: g.ended_at or 0.0)
        for old in finished[: max(0, len(self.logs) + 1 - self.max_logs)]:
            del self.logs[old.run_id]
        found = self.logs[run_id] = RunLog(run_id, tenant, agent, self.buffer, **kwargs)
        return found

    def start(self, found: RunLog, events: AsyncIterator[RunEvent], release: Callable[[], None] | None = None) -> None:
        """Produce the run into its log in a task of its own; `release` once it ended (its run slot)."""
        found.task = asyncio.create_task(_produce(found, events, release), name=f"run {found.run_id}")

    def get(self, run_id: str, principal: Principal | None) -> RunLog | None:
        """The log of `run_id` when this server holds it and the principal may read it."""
        found = self.logs.get(run_id)
        return found if found is not None and found.readable_by(principal) else None

    def active(self, agent: str, tenant: str, thread: str) -> RunLog | None:
        """The newest run of the thread still going (a thread runs one turn at a time)."""
        key = (agent, tenant, thread)
        going = [g for g in self.logs.values() if not g.done and (g.agent, g.tenant, g.thread) == key]
        return going[-1] if going else None

    def reap(self) -> None:
        cutoff = time.monotonic() - self.keep_seconds
        for run_id in [r for r, g in self.logs.items() if g.done and (g.ended_at or 0.0) <= cutoff]:
            del self.logs[run_id]

    async def stop(self) -> None:
        """The server is stopping: cancel the runs still going and wait for each to record its end."""
        tasks = [g.task for g in self.logs.values() if g.task is not None and not g.task.done()]
        for task in tasks:
            task.cancel("the server is stopping")
        await asyncio.gather(*tasks, return_exceptions=True)


async def _produce(found: RunLog, events: AsyncIterator[RunEvent], release: Callable[[], None] | None) -> None:
    try:
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for event in events:
                found.append(event)
    except asyncio.CancelledError:
        pass  # the run recorded its end (cancelled, with the cause)
    except Exception as e:  # the run's own failures are events; this is one nobody anticipated
        log.error("run %s failed outside its event stream: %s: %s", found.run_id, type(e).__name__, e)
    finally:
        found.finish()
        if release is not None:
            release()


def run_position(last_event_id: str | None) -> tuple[str, int, int | None] | None:
    """(run id, seq, part) a run stream's Last-Event-ID names: `<run_id>:<seq>` (part None: the event's last
    frame) or `<run_id>:<seq>.<part>` (the event's frame `part` of several, counted from 1)."""
    run, sep, position = (last_event_id or "").strip().rpartition(":")
    seq, dot, part = position.partition(".")
    if not (sep and run and seq.isdigit() and (not dot or part.isdigit())):
        return None
    return run, int(seq), int(part) if dot else None


async def event_frames(found: RunLog, after: int | None) -> AsyncGenerator[bytes]:
    """`GET /events?run=` of a run this server holds beyond sessions: its `run/event` notifications after seq
    `after` (all it holds when None), each with the id `<run_id>:<seq>`. A recovered run continues after the seq
    its RUN_STARTED's `meta.after` names: what the reader got past it is superseded and sent again."""
    shown = get_converter().unstructure
    with found.reading():
        async for event in found.follow():
            if event is None:
                yield b": keep-alive\n\n"
                continue
            seq = event.seq or 0
            restart = event.meta.get("after") if event.type == "RUN_STARTED" else None
            if after is not None and isinstance(restart, int) and restart < after:
                after = restart
            if after is not None and seq <= after:
                continue
            if after is not None and seq != after + 1:
                yield f": the run's events after seq {after} up to {seq - 1} are no longer held\n\n".encode()
            after = seq
            params = {"request_id": found.request_id, "event": shown(event)}
            message = {"jsonrpc": "2.0", "method": "run/event", "params": params}
            data = json.dumps(message, ensure_ascii=True)
            yield f"id: {found.run_id}:{seq}\nevent: run/event\ndata: {data}\n\n".encode()


async def write_kept(writer: asyncio.StreamWriter, found: RunLog, after: int | None, stopping: asyncio.Event) -> None:
    """`GET /events?session=NAME&run=RUN_ID` of a run this server holds beyond sessions, until the run ends."""
    writer.write(STREAM_HEAD)
    await writer.drain()
    frames = event_frames(found, after)
    async with contextlib.aclosing(frames):
        async for frame in frames:
            if stopping.is_set():
                return
            writer.write(frame)
            await writer.drain()


async def recover_at_start(app: ServeApp, logs: RunLogs) -> list[str]:
    """The runs a killed server left `running`: each of its agents' runs whose lease lapsed is recovered in a task
    of its own (Agent.recover_stream), its events kept in `logs` so a client reconnects to it with Last-Event-ID.
    Once each claimed its run (or was refused), the runs nobody recovered within the grace period (another agent's,
    say) end `error`; then it returns what it did, in lines for the server to print once it said it listens (it
    returns before, so a client finds the runs it holds)."""
    claims: list[asyncio.Future[bool]] = []
    for name, entry in app.agents.items():
        try:
            lapsed = await asyncio.to_thread(entry.store.leases.lapsed, entry.pausing.name, None)
            details = [await asyncio.to_thread(entry.store.get_run, r, tenant_id=t) for r, t in lapsed]
        except Exception as e:  # left to the sweep, as a run this configuration cannot continue is
            log.warning("segue serve: could not list the lapsed runs of agent %s: %s", name, e)
            continue
        for (run_id, tenant), detail in zip(lapsed, details, strict=True):
            thread = detail.metadata.get("thread_id") if detail is not None and detail.metadata else None
            found = logs.open(run_id, tenant, name, thread=thread if isinstance(thread, str) else None)
            claimed: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            claims.append(claimed)
            logs.start(found, _claimed(entry.pausing.recover_stream(run_id, tenant_id=tenant), claimed, logs, found))
    return await _sweep(app, claims)


async def _sweep(app: ServeApp, claims: list[asyncio.Future[bool]]) -> list[str]:
    """Once every recovery claimed its run (or was refused), end the lapsed runs nobody recovered."""
    lines = []
    recovered = sum(await asyncio.gather(*claims))
    if recovered:
        lines.append(f"segue serve: recovering {recovered} run(s) whose process had died")
    return lines + await asyncio.to_thread(sweep_abandoned, app)


def sweep_abandoned(app: ServeApp) -> list[str]:
    """Each store's runs whose lease lapsed over SWEEP_GRACE_SECONDS ago, which nobody recovered (another agent's,
    say), ended `error` so they can be replayed; a line for each store that had some."""
    lines = []
    for url, store in app.stores.items():
        swept = store.sweep(grace=SWEEP_GRACE_SECONDS)
        if swept:
            lines.append(
                f"segue serve: marked {len(swept)} abandoned run(s) error in {redact(url)} (their lease expired "
                f"over {SWEEP_GRACE_SECONDS:g} s ago and nobody recovered them)"
            )
    return lines


async def _claimed(
    events: AsyncIterator[RunEvent], claimed: asyncio.Future[bool], logs: RunLogs, found: RunLog
) -> AsyncGenerator[RunEvent]:
    """A recovery's events; `claimed` says whether it continued the run (its first event is the recovered
    RUN_STARTED) or was refused (another process recovered it first, or this configuration cannot)."""
    try:
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for event in events:
                if not claimed.done():
                    refused = event.type == "RUN_ERROR" and not event.run_id
                    claimed.set_result(not refused)
                    if refused:
                        log.warning("segue serve: did not recover run %s: %s", found.run_id, event.error)
                        logs.logs.pop(found.run_id, None)
                        return
                yield event
    finally:
        if not claimed.done():
            claimed.set_result(False)
