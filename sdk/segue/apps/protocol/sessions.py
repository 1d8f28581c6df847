"""The sessions of `segue serve --http`: request ids in flight, the events a session keeps, and its event streams.

- A session is named by the client (`?session=NAME` or a `Segue-Session` header) and belongs to the client's
  token: two tokens never share a session, whatever names they pick. A request without a name gets a session of
  its own, so its events reach no one else.
- Each event gets the session's next id and is kept (the last `event_buffer` of them), so a stream that
  reconnects with `Last-Event-ID` receives what it missed; a stream that falls further behind is closed.
- A stream of one run (`GET /events?session=NAME&run=RUN_ID`) gets that run's `run/event` notifications only, each
  with the id `<run_id>:<seq>`: the run's own position, which a resumed or recovered run continues (in any
  process: segue.run.events), where the session's counter lives in this process's memory. It reconnects with
  `Last-Event-ID: <run_id>:<seq>` to any server's session that carries the run (the one that recovered it) and
  receives the run's events after that seq, none twice.
- A response waits until every stream of its session has written the events published before it, so a client
  sees every event of a request before its response.
- A session with no request in flight and no stream is freed once idle for `session_idle_seconds`, with its
  events (and what `initialize` set up); at most `max_sessions` exist at once. The `exit` notification frees a
  session at once: its requests in flight are cancelled and its streams close.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import time
from collections.abc import Iterator

from segue.apps.protocol.auth import Principal
from segue.apps.protocol.rpc import Message, Session

log = logging.getLogger("segue.protocol")


class SessionsFull(Exception):
    """No room for another session."""


class Stream:
    """One `GET /events` connection: how far it has written. `run`: a stream of that run only, from its event
    after seq `after` on (None: from the next one published)."""

    def __init__(self, sent: int, *, run: str | None = None, after: int | None = None) -> None:
        self.sent = sent
        self.run = run
        self.after = after
        self.wake = asyncio.Event()
        self.closed = False


def run_stream(last_event_id: str | None, run: str) -> int | None:
    """The seq a run stream's Last-Event-ID (`<run_id>:<seq>`) names, when it names an event of `run`."""
    found, sep, seq = (last_event_id or "").strip().rpartition(":")
    return int(seq) if sep and found == run and seq.isdigit() else None


class Kept:
    """An event the session keeps: its id, its frame, and for a run/event notification the run, the event's seq
    and, for a recovered run's RUN_STARTED, the seq it continues after (`restart`)."""

    __slots__ = ("data", "event_id", "frame", "restart", "run", "seq")

    def __init__(self, event_id: int, frame: bytes, data: str, message: Message) -> None:
        self.event_id, self.frame, self.data = event_id, frame, data
        self.run, self.seq, self.restart = _run_position(message)


class Channel:
    """One session: its dispatcher state, the events it keeps, and the streams subscribed to it."""

    def __init__(self, principal: Principal | None, buffer: int, *, named: bool = True) -> None:
        self.session = Session(
            self.publish, client_requests=False, principal=principal, persistent=named, on_exit=self.exit
        )
        self.exited = False
        self.kept: collections.deque[Kept] = collections.deque(maxlen=max(buffer, 1))
        self.last_id = 0
        self.streams: set[Stream] = set()
        self.users = 0  # connections (requests and streams) using the session now
        self.idle_since = time.monotonic()
        self._progress = asyncio.Condition()

    def publish(self, message: Message) -> None:
        """Keep the event under the session's next id and wake the streams. Never suspends."""
        self.last_id += 1
        data = json.dumps(message, ensure_ascii=True)  # ASCII escapes: every string can be sent, surrogates too
        frame = f"id: {self.last_id}\nevent: {message.get('method')}\ndata: {data}\n\n".encode()
        self.kept.append(Kept(self.last_id, frame, data, message))
        for stream in self.streams:
            stream.wake.set()

    def backlog(self, stream: Stream) -> tuple[list[tuple[int, bytes]], bool]:
        """The (id, frame)s `stream` has not written yet, and whether some it needs were already dropped."""
        if stream.run is not None:
            return self._run_backlog(stream)
        oldest = self.kept[0].event_id if self.kept else self.last_id + 1
        lost = stream.sent + 1 < oldest and stream.sent < self.last_id
        return [(k.event_id, k.frame) for k in self.kept if k.event_id > stream.sent], lost

    def _run_backlog(self, stream: Stream) -> tuple[list[tuple[int, bytes]], bool]:
        """A run stream's: the run's events after the ones it wrote, framed with the run's ids; lost when the
        first of them the session still keeps is not the next of the run's sequence."""
        frames: list[tuple[int, bytes]] = []
        upto, lost = stream.sent, False
        for k in self.kept:
            if k.event_id <= stream.sent:
                continue
            upto = k.event_id  # (the session's position: what `flushed` waits for)
            if k.run != stream.run or k.seq is None:
                continue
            if stream.after is None:  # a new stream: from this event on
                stream.after = k.seq - 1
            if k.restart is not None and k.restart < stream.after:
                # A recovered run continues after the last event its journal proves: what the stream wrote past
                # it (deltas of a call that never finished) is superseded, and its RUN_STARTED says so.
                stream.after = k.restart
            if k.seq <= stream.after:
                continue
            lost = lost or (not frames and k.seq != stream.after + 1)
            stream.after = k.seq
            frames.append((k.event_id, f"id: {k.run}:{k.seq}\nevent: run/event\ndata: {k.data}\n\n".encode()))
        if upto > stream.sent and (not frames or frames[-1][0] < upto):
            frames.append((upto, b""))  # the session's events of other runs, skipped
        return frames, lost

    async def wrote(self, stream: Stream, upto: int) -> None:
        stream.sent = upto
        async with self._progress:
            self._progress.notify_all()

    async def flushed(self, upto: int, timeout: float) -> None:
        """Wait until every stream has written the events up to `upto`. A stream that cannot keep up within
        `timeout` is closed (its client reconnects with Last-Event-ID), so a stalled reader never holds responses."""

        def done() -> bool:
            return all(s.closed or s.sent >= upto for s in self.streams)

        async with self._progress:
            try:
                await asyncio.wait_for(self._progress.wait_for(done), timeout)
            except TimeoutError:
                for stream in self.streams:
                    if not stream.closed and stream.sent < upto:
                        log.warning("closing an event stream that did not take its events within %g s", timeout)
                        stream.closed = True
                        stream.wake.set()

    def idle(self) -> bool:
        return self.users == 0 and not self.session.in_flight

    def exit(self, code: int) -> None:
        """The client sent exit: cancel its requests in flight (they answer RequestCancelled), close its streams;
        `Sessions` forgets the session once its last connection is done."""
        self.exited = True
        for request_id, task in self.session.in_flight.items():
            self.session.cancelled.add(request_id)
            task.cancel()
        self.session.close("the client sent exit")
        for stream in self.streams:
            stream.closed = True
            stream.wake.set()


class Sessions:
    """Every named session of the server."""

    def __init__(self, *, max_sessions: int, idle_seconds: float, buffer: int) -> None:
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.buffer = buffer
        self.channels: dict[tuple[str, str], Channel] = {}

    @contextlib.contextmanager
    def use(self, principal: Principal | None, name: str) -> Iterator[Channel]:
        """The session `name` of this principal (a private one when `name` is empty) while a connection uses it."""
        key = (principal.name if principal else "", name)
        if not name:
            channel = Channel(principal, self.buffer, named=False)
        else:
            found = self.channels.get(key)
            if found is None:
                if len(self.channels) >= self.max_sessions:
                    self.reap()
                if len(self.channels) >= self.max_sessions:
                    raise SessionsFull(f"the server holds {self.max_sessions} sessions already; retry later")
                found = self.channels[key] = Channel(principal, self.buffer)
            channel = found
        channel.users += 1
        try:
            yield channel
        finally:
            channel.users -= 1
            channel.idle_since = time.monotonic()
            if channel.exited and self.channels.get(key) is channel:
                del self.channels[key]  # the name starts a fresh session next time

    def reap(self) -> int:
        """Free the sessions idle for longer than `idle_seconds`; returns how many."""
        cutoff = time.monotonic() - self.idle_seconds
        stale = [k for k, c in self.channels.items() if c.idle() and c.idle_since <= cutoff]
        for key in stale:
            del self.channels[key]
        return len(stale)

    def close(self, reason: str) -> None:
        for channel in self.channels.values():
            channel.session.close(reason)


def _run_position(message: Message) -> tuple[str | None, int | None, int | None]:
    """A run/event notification's run, the event's seq, and a recovered RUN_STARTED's `after` (Nones for any other
    message)."""
    event = (message.get("params") or {}).get("event") if message.get("method") == "run/event" else None
    if not isinstance(event, dict):
        return None, None, None
    run, seq, meta = event.get("run_id"), event.get("seq"), event.get("meta") or {}
    if not (isinstance(run, str) and run and isinstance(seq, int)):
        return None, None, None
    restart = meta.get("after") if event.get("type") == "RUN_STARTED" else None
    return run, seq, restart if isinstance(restart, int) else None
