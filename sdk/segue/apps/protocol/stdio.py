"""`segue serve --stdio`: JSON-RPC over the process's stdin / stdout with LSP's Content-Length framing.

Reading and writing run in two small threads, so a slow client never blocks the event loop and stdin may be a
pipe or a file. Each request runs as its own task: runs proceed concurrently, and a run waiting on a `tool/call`
answer does not stop the server from reading that answer. At the end of input the server stops asking the
client anything, lets the requests in flight finish (their responses are still written) and exits 0. The `exit`
notification ends it at once: requests still in flight are cancelled, and the exit code is 0 after `shutdown`
and 1 without it (LSP's rule).
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import signal
import threading
from typing import Any

from segue.apps.protocol.errors import RpcError
from segue.apps.protocol.framing import FrameError, FrameReader, encode_frame
from segue.apps.protocol.rpc import Dispatcher, Message, Session, response
from segue.generated.protocol_methods import ErrorCode

log = logging.getLogger("segue.protocol")
_STOP = object()


class _Writer:
    """Frames go out in order through one thread that owns the output file descriptor."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._broken = False
        self._thread = threading.Thread(target=self._loop, name="segue-stdio-writer", daemon=True)
        self._thread.start()

    def send(self, message: Message) -> None:
        if not self._broken and (frame := encode_frame(message)) is not None:
            self._queue.put(frame)

    def _loop(self) -> None:
        while (item := self._queue.get()) is not _STOP:
            view = memoryview(item)
            try:
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError as e:  # the client closed our stdout: nothing more can reach it
                log.warning("stdout is closed (%s); dropping further messages", e)
                self._broken = True

    def close(self) -> None:
        self._queue.put(_STOP)
        self._thread.join(timeout=10)


def _start_reader(fd: int, loop: asyncio.AbstractEventLoop) -> asyncio.StreamReader:
    stream = asyncio.StreamReader(limit=2**26)

    def pump() -> None:
        try:
            while chunk := os.read(fd, 65536):
                loop.call_soon_threadsafe(stream.feed_data, chunk)
        except OSError as e:
            log.warning("reading stdin failed: %s", e)
        finally:
            loop.call_soon_threadsafe(stream.feed_eof)

    threading.Thread(target=pump, name="segue-stdio-reader", daemon=True).start()
    return stream


async def serve_stdio(dispatcher: Dispatcher, *, stdin_fd: int = 0, stdout_fd: int = 1) -> int:
    """Serve until stdin ends, the client sends exit, or SIGTERM; returns the exit code."""
    loop = asyncio.get_running_loop()
    writer = _Writer(stdout_fd)
    exit_codes: list[int] = []

    def on_exit(code: int) -> None:
        exit_codes.append(code)
        reading.cancel()  # as SIGTERM does: requests still in flight are cancelled

    session = Session(writer.send, client_requests=True, on_exit=on_exit)
    frames = FrameReader(_start_reader(stdin_fd, loop))
    tasks: set[asyncio.Task[Message]] = set()

    def finished(task: asyncio.Task[Message]) -> None:
        tasks.discard(task)
        if not task.cancelled() and task.exception() is None:
            writer.send(task.result())

    async def read_loop() -> None:
        async for item in frames:  # a `null` body is a message (Invalid Request), not the end of input
            if isinstance(item, FrameError):
                writer.send(response(item.request_id, error=RpcError(ErrorCode.PARSE_ERROR, item.message)))
                continue
            out = dispatcher.dispatch(session, item)
            if isinstance(out, asyncio.Task):
                tasks.add(out)
                out.add_done_callback(finished)
            elif out is not None:
                writer.send(out)

    reading = asyncio.create_task(read_loop())
    try:
        loop.add_signal_handler(signal.SIGTERM, reading.cancel)
    except (NotImplementedError, RuntimeError):  # not the main thread, or no signals on this platform
        pass
    try:
        await reading
        session.close("the client closed its input")
        if tasks:
            await asyncio.wait(set(tasks))
    except asyncio.CancelledError:
        session.close("the server is stopping")
        for task in list(tasks):
            task.cancel()
        if tasks:
            await asyncio.wait(set(tasks))
    finally:
        writer.close()
    return exit_codes[0] if exit_codes else 0
