"""A web stream on its connection (`POST /ag-ui/{agent}`, `POST /ai-sdk/{agent}`, and the resume of either,
`GET /{route}/{agent}/{thread}/stream`): a reader of its run's log (segue.apps.protocol.run_logs).

- A client that closes the connection (FIN or RST) is noticed at once, also while the run waits on the model or a
  tool and writes nothing: the connection is watched for its end, and the stream's task is cancelled with the
  cause. Its run goes on for `web_resume_seconds` without a reader, then it is cancelled with that cause, which the
  run records (`cancelled`, "the client closed the connection"), unless a client reconnected to it.
- A client that stops reading is given `write_timeout_seconds` for each write; then the stream is closed, and its
  run, without a reader, is ended the same way (freeing its `max_concurrent_runs` slot).
- A request refused before its stream starts is an HTTP status with a JSON body and one log line for the
  server's own failures (5xx), never a dropped connection or a traceback. A resume of a thread whose run this
  server does not hold is `204 No Content` (the Vercel AI SDK's "no active stream").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from typing import Any

from segue.apps.protocol.auth import Principal
from segue.apps.protocol.run_logs import CLIENT_GONE, Stalled
from segue.apps.protocol.web import Route, Web, WebError
from segue.errors import StoreError

log = logging.getLogger("segue.protocol")


async def serve_web(
    web: Web,
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    route: Any,
    agent: str,
    body: bytes,
    principal: Principal | None,
    write_timeout: float,
) -> None:
    """An AG-UI or AI SDK request: WebError (an HTTP status) when refused before its run starts, else its event
    stream. A refusal that is the server's own failure (5xx) is also one log line."""
    try:
        headers, frames = await web.open(route, agent, body, principal)
    except WebError as e:
        if e.status >= 500:
            log.error("refused a /%s/%s request: %s", route, agent, e)
        raise
    except StoreError as e:
        log.error("refused a /%s/%s request: the run store is unavailable: %s", route, agent, e)
        raise WebError(503, f"the run store is unavailable: {e}; retry shortly") from None
    except Exception as e:  # a bug, or a failure nobody anticipated: still an answer and one line, no traceback
        log.error("a /%s/%s request failed before its stream started: %s: %s", route, agent, type(e).__name__, e)
        raise WebError(500, f"the server failed before the run started: {type(e).__name__}: {e}") from None
    fields = {**headers, "Cache-Control": "no-cache", "Connection": "close", "X-Accel-Buffering": "no"}
    head = ("HTTP/1.1 200 OK\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n").encode()
    reader, writer = connection
    await write_stream(reader, writer, head, frames, write_timeout=write_timeout, what=f"the /{route}/{agent} stream")


async def resume_web(
    web: Web,
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    route: Route,
    agent: str,
    thread: str,
    query: dict[str, list[str]],
    last_event_id: str | None,
    principal: Principal | None,
    write_timeout: float,
) -> None:
    """`GET /{route}/{agent}/{thread}/stream`: the rest of the thread's run, or 204 when this server holds none."""
    found = web.resume(route, agent, thread, query, last_event_id, principal)
    reader, writer = connection
    if found is None:
        writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        return
    headers, frames = found
    fields = {**headers, "Cache-Control": "no-cache", "Connection": "close", "X-Accel-Buffering": "no"}
    head = ("HTTP/1.1 200 OK\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n").encode()
    what = f"the resumed /{route}/{agent} stream"
    await write_stream(reader, writer, head, frames, write_timeout=write_timeout, what=what)


async def write_stream(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    head: bytes,
    frames: AsyncGenerator[bytes],
    *,
    write_timeout: float,
    what: str,
) -> None:
    """Write the response head with the first frame, then each frame, until the stream ends or its reader goes.
    Closing `frames` (here, in this task) leaves the run without this reader."""
    task, limit = asyncio.current_task(), write_timeout
    assert task is not None
    watcher = asyncio.create_task(_watch(reader, task))
    try:
        async with contextlib.aclosing(frames):
            async for frame in frames:
                writer.write(head + frame)
                head = b""
                try:
                    async with asyncio.timeout(limit):
                        await writer.drain()
                except TimeoutError:
                    # Leaving closes `frames`: a run still going without a reader is ended after web_resume_seconds.
                    log.warning("closed %s: its client read nothing for %g s (write_timeout_seconds)", what, limit)
                    with contextlib.suppress(StopAsyncIteration, Stalled):
                        await frames.athrow(Stalled())  # the reader records why it left
                    return
        writer.write(head)
    except (asyncio.CancelledError, ConnectionError) as e:
        gone = watcher.done() and not watcher.cancelled()
        if isinstance(e, asyncio.CancelledError) and (not gone or task.uncancel() > 0):
            raise  # cancelled by someone else (the server stopping): that goes on
        log.info("%s ended: %s", what, CLIENT_GONE if gone else e)
    finally:
        watcher.cancel()


async def _watch(reader: asyncio.StreamReader, task: asyncio.Task[object]) -> None:
    """Wait for the end of the connection (the client sends nothing after its body; anything it does send is
    ignored), then cancel the stream's task with the cause."""
    with contextlib.suppress(ConnectionError):
        while await reader.read(65536):
            pass
    task.cancel(CLIENT_GONE)
