"""The sessions of `segue serve --http`: request ids in flight, the events a session keeps, and its event streams.

- A session is named by the client (`?session=NAME` or a `Segue-Session` header) and belongs to the client's
  token: two tokens never share a session, whatever names they pick. A request without a name gets a session of
  its own, so its events reach no one else.
- Each event gets the session's next id and is kept (the last `event_buffer` of them), so a stream that
  reconnects with `Last-Event-ID` receives what it missed; a stream that falls further behind is closed.
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
    """One `GET /events` connection: how far it has written."""

    def __init__(self, sent: int) -> None:
        self.sent = sent
        self.wake = asyncio.Event()
        self.closed = False


class Channel:
    """One session: its dispatcher state, the events it keeps, and the streams subscribed to it."""

    def __init__(self, principal: Principal | None, buffer: int, *, named: bool = True) -> None:
        self.session = Session(
            self.publish, client_requests=False, principal=principal, persistent=named, on_exit=self.exit
        )
        self.exited = False
        self.kept: collections.deque[tuple[int, bytes]] = collections.deque(maxlen=max(buffer, 1))
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
        self.kept.append((self.last_id, frame))
        for stream in self.streams:
            stream.wake.set()

    def backlog(self, stream: Stream) -> tuple[list[tuple[int, bytes]], bool]:
        """The (id, frame)s `stream` has not written yet, and whether some it needs were already dropped."""
        oldest = self.kept[0][0] if self.kept else self.last_id + 1
        lost = stream.sent + 1 < oldest and stream.sent < self.last_id
        return [(event_id, frame) for event_id, frame in self.kept if event_id > stream.sent], lost

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
