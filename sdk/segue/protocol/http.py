"""`segue serve --http`: JSON-RPC requests by POST, `run/event` notifications by server-sent events.

- `POST /rpc` with `Content-Type: application/json` and one JSON-RPC message: the response is the JSON-RPC
  response (HTTP 200), or 204 for a notification. Requiring JSON keeps browsers on other sites from posting here
  without a CORS preflight, which this server never grants.
- `GET /events`: a `text/event-stream` of every notification for the session, each as
  `event: <method>` + `data: <the JSON-RPC notification>`. Subscribe before sending the request whose events you
  want; a `: subscribed` comment confirms the subscription.
- Sessions: `?session=NAME` on both URLs (or a `Segue-Session` header) keeps clients apart: request ids in flight
  and events are per session. Without it, everyone shares the default session.

The server cannot send requests to an HTTP client, so client-side tools pause the run (waiting_approval) and the
client sends their results with `resume`. Standard library only: asyncio streams and a minimal HTTP/1.1 reader
(one request per connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import sys
from typing import Any
from urllib.parse import parse_qs

from segue.generated.protocol_methods import ErrorCode
from segue.protocol.config import ServeError
from segue.protocol.rpc import Dispatcher, Message, RpcError, Session, response

log = logging.getLogger("segue.protocol")
MAX_BODY_BYTES = 64 * 1024 * 1024
KEEP_ALIVE_SECONDS = 15.0
_QUEUE_SIZE = 10_000
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
_REASONS = {
    200: "OK",
    204: "No Content",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
}


class _HttpError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class _Channel:
    """One session: its dispatcher state and the event streams subscribed to it."""

    def __init__(self) -> None:
        self.subscribers: set[asyncio.Queue[Message]] = set()
        self.session = Session(self.publish, client_requests=False)

    def publish(self, message: Message) -> None:
        for q in list(self.subscribers):
            try:
                q.put_nowait(message)
            except asyncio.QueueFull:  # a subscriber that stopped reading: drop it rather than grow without end
                log.warning("dropping an event subscriber that fell %d events behind", _QUEUE_SIZE)
                self.subscribers.discard(q)


class HttpServer:
    def __init__(self, dispatcher: Dispatcher, *, host: str, port: int) -> None:
        self.dispatcher = dispatcher
        self.host = host
        self.port = port
        self.channels: dict[str, _Channel] = {}

    def channel(self, name: str) -> _Channel:
        if name not in self.channels:
            self.channels[name] = _Channel()
        return self.channels[name]

    async def serve(self) -> int:
        try:
            server = await asyncio.start_server(self._connection, self.host, self.port)
        except OSError as e:
            raise ServeError(f"cannot listen on {self.host}:{self.port}: {e.strerror or e}") from None
        host, port = server.sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        print(
            f"segue serve: http://{shown}:{port}/rpc (events: GET http://{shown}:{port}/events)",
            file=sys.stderr,
            flush=True,
        )
        if self.host not in _LOOPBACK:
            print("segue serve: listening beyond loopback without authentication", file=sys.stderr, flush=True)
        stop = asyncio.Event()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        async with server:
            await stop.wait()
        for channel in self.channels.values():
            channel.session.close("the server is stopping")
        return 0

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            method, path, query, headers = await asyncio.wait_for(_read_head(reader), timeout=30)
            self._check_host(headers)
            name = (parse_qs(query).get("session") or [headers.get("segue-session", "")])[0]
            if path == "/rpc":
                if method != "POST":
                    raise _HttpError(405, "POST JSON-RPC messages to /rpc", {"Allow": "POST"})
                await self._rpc(reader, writer, headers, self.channel(name))
            elif path == "/events":
                if method != "GET":
                    raise _HttpError(405, "GET /events for the server-sent event stream", {"Allow": "GET"})
                await self._events(writer, self.channel(name))
            else:
                raise _HttpError(404, f"no {path}; POST /rpc for requests, GET /events for notifications")
        except _HttpError as e:
            _write(writer, e.status, json.dumps({"error": str(e)}).encode(), "application/json", e.headers)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError) as e:
            log.debug("dropping a connection: %s", e)
        finally:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await writer.drain()
            writer.close()

    def _check_host(self, headers: dict[str, str]) -> None:
        """On loopback, only loopback Host names: a DNS-rebinding page cannot reach the server by another name."""
        if self.host not in _LOOPBACK:
            return
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name not in _LOOPBACK:
            raise _HttpError(421, f"Host {host!r} is not a loopback name; this server answers 127.0.0.1 / localhost")

    async def _rpc(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str], channel: _Channel
    ) -> None:
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise _HttpError(415, f"send Content-Type: application/json, not {kind or 'none'!r}")
        if "content-length" not in headers:
            raise _HttpError(411, "send a Content-Length header")
        length_text = headers["content-length"]
        if not length_text.isdigit():
            raise _HttpError(400, f"Content-Length {length_text[:20]!r} is not a whole number")
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            raise _HttpError(413, f"the body is {length} bytes; the limit is {MAX_BODY_BYTES}")
        body = await reader.readexactly(length)
        try:
            message: Any = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            out: Message | None = response(None, error=RpcError(ErrorCode.PARSE_ERROR, f"the body is not JSON: {e}"))
        else:
            result = self.dispatcher.dispatch(channel.session, message)
            out = await result if isinstance(result, asyncio.Task) else result
        if out is None:
            _write(writer, 204, b"", None)
        else:
            _write(writer, 200, json.dumps(out, ensure_ascii=False).encode("utf-8"), "application/json")

    async def _events(self, writer: asyncio.StreamWriter, channel: _Channel) -> None:
        q: asyncio.Queue[Message] = asyncio.Queue(maxsize=_QUEUE_SIZE)
        channel.subscribers.add(q)
        try:
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                b"Connection: close\r\nX-Accel-Buffering: no\r\n\r\n: subscribed\n\n"
            )
            await writer.drain()
            sequence = 0
            while q in channel.subscribers or not q.empty():
                try:
                    message = await asyncio.wait_for(q.get(), timeout=KEEP_ALIVE_SECONDS)
                except TimeoutError:
                    writer.write(b": keep-alive\n\n")
                else:
                    sequence += 1
                    data = json.dumps(message, ensure_ascii=False)
                    writer.write(f"id: {sequence}\nevent: {message.get('method')}\ndata: {data}\n\n".encode())
                await writer.drain()
        finally:
            channel.subscribers.discard(q)


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, str, str, dict[str, str]]:
    line = (await reader.readline()).decode("latin-1").strip()
    parts = line.split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _HttpError(400, f"bad request line {line[:80]!r}")
    method, target, _ = parts
    headers: dict[str, str] = {}
    for _ in range(100):
        raw = await reader.readline()
        if len(raw) > 8192:
            raise _HttpError(400, "header line too long")
        text = raw.decode("latin-1").strip()
        if not text:
            break
        name, sep, value = text.partition(":")
        if not sep:
            raise _HttpError(400, f"bad header line {text[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    else:
        raise _HttpError(400, "too many header lines")
    path, _, query = target.partition("?")
    return method.upper(), path, query, headers


def _write(
    writer: asyncio.StreamWriter, status: int, body: bytes, kind: str | None, headers: dict[str, str] | None = None
) -> None:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", f"Content-Length: {len(body)}", "Connection: close"]
    if kind:
        lines.append(f"Content-Type: {kind}")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
