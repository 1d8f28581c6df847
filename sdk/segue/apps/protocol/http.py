"""`segue serve --http`: JSON-RPC requests by POST, `run/event` notifications by server-sent events.

- `POST /rpc` with `Content-Type: application/json` and one JSON-RPC message: the response is the JSON-RPC
  response (HTTP 200), or 204 for a notification. Requiring JSON keeps browsers on other sites from posting here
  without a CORS preflight, which this server never grants.
- `GET /events?session=NAME`: a `text/event-stream` of every notification for the session, each as
  `id: <n>`, `event: <method>` and `data: <the JSON-RPC notification>`. Subscribe before sending the request
  whose events you want; a `: subscribed` comment confirms the subscription. A stream that reconnects with
  `Last-Event-ID` first receives the events it missed (segue.apps.protocol.sessions).
- Sessions: `?session=NAME` on both URLs (or a `Segue-Session` header) groups a client's requests and its event
  stream; a request without one has a session of its own.
- Tokens (segue.apps.protocol.auth): when configured, every request needs `Authorization: Bearer <token>` (401
  otherwise), acts only for the tenants the token allows, and shares sessions only with that token. Binding an
  address beyond loopback without tokens is refused.
- Agents in a web page (segue.apps.protocol.web, docs/web.md): `POST /ag-ui/{agent}` answers an AG-UI RunAgentInput
  and `POST /ai-sdk/{agent}` a Vercel AI SDK chat request, each with its protocol's event stream (same tokens);
  `GET /{route}/{agent}/{thread}/stream` resumes it (Last-Event-ID), 204 when the server holds no such run.
- Runs no session started (web runs, and the runs recovered at start: segue.apps.protocol.run_logs) are read with
  `GET /events?session=NAME&run=RUN_ID` too.
- Limits (`http` in the config, defaults in `Limits`): connections at once, the time to send a request, the size
  of a body and of all bodies held at once, the number of sessions. Each answers with its own HTTP status.

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
from collections.abc import Callable, Coroutine, Iterator
from typing import Any
from urllib.parse import parse_qs, unquote

from segue.apps.protocol.accept import quiet_accept_failures
from segue.apps.protocol.auth import Principal, Tokens
from segue.apps.protocol.config import ServeError
from segue.apps.protocol.errors import RpcError
from segue.apps.protocol.framing import encode_message
from segue.apps.protocol.limits import Limits as Limits  # (where the tests and apps have always found it)
from segue.apps.protocol.rpc import Dispatcher, Message, response
from segue.apps.protocol.run_logs import STREAM_HEAD, RunLogs, write_kept
from segue.apps.protocol.sessions import Channel, Sessions, SessionsFull, Stream, run_stream
from segue.apps.protocol.web import ROUTES, Web, WebError
from segue.apps.protocol.web_stream import resume_web, serve_web
from segue.generated.protocol_methods import PROTOCOL_VERSION, ErrorCode

log = logging.getLogger("segue.protocol")
KEEP_ALIVE_SECONDS = 15.0
#: How long a response waits for the session's event streams to write the request's events.
FLUSH_SECONDS = 5.0
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
_REASONS = {
    200: "OK",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
    503: "Service Unavailable",
}


class _HttpError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class HttpServer:
    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        host: str,
        port: int,
        tokens: Tokens | None = None,
        limits: Limits,
        web: Web | None = None,
        on_start: Callable[[], Coroutine[Any, Any, list[str]]] | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.web = web
        #: The runs kept beyond sessions (segue.apps.protocol.run_logs): the web runs and the recovered ones.
        self.runs = web.logs if web is not None else RunLogs(buffer=limits.event_buffer, max_logs=limits.max_sessions)
        #: Work done once the server listens, before it says so (its lines printed after): the recoveries at start.
        self.on_start = on_start
        self.host = host
        self.port = port
        self.tokens = tokens
        self.limits = limits
        self.sessions = Sessions(
            max_sessions=limits.max_sessions, idle_seconds=limits.session_idle_seconds, buffer=limits.event_buffer
        )
        self.connections = 0
        #: Connections whose request head has not been read and authenticated yet, oldest first.
        self.waiting: dict[asyncio.StreamWriter, None] = {}
        self.body_bytes = 0  # request bodies held now, summed
        self.stopping = asyncio.Event()

    async def serve(self) -> int:
        if self.host not in _LOOPBACK and self.tokens is None:
            raise ServeError(
                f"listening on {self.host} (beyond loopback) needs bearer tokens: set SEGUE_SERVE_TOKEN or add "
                "http.tokens to the config (docs/protocol.md)"
            )
        try:
            server = await asyncio.start_server(self._connection, self.host, self.port)
        except OSError as e:
            raise ServeError(f"cannot listen on {self.host}:{self.port}: {e.strerror or e}") from None
        started = await self.on_start() if self.on_start is not None else []
        host, port = server.sockets[0].getsockname()[:2]
        base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
        auth = "bearer tokens required" if self.tokens else "no tokens: any local process may connect"
        print(
            f"segue serve: {base}/rpc (events: GET {base}/events?session=NAME; web pages: POST {base}/ag-ui/AGENT "
            f"and {base}/ai-sdk/AGENT; {auth})",
            file=sys.stderr,
            flush=True,
        )
        for line in started:
            print(line, file=sys.stderr, flush=True)
        with contextlib.suppress(NotImplementedError, RuntimeError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.stopping.set)
        quiet_accept_failures(asyncio.get_running_loop())
        reaper = asyncio.create_task(self._reap())
        async with server:
            await self.stopping.wait()
        reaper.cancel()
        await self.runs.stop()
        self.sessions.close("the server is stopping")
        return 0

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(max(0.05, min(self.limits.session_idle_seconds / 2, 5.0)))
            self.sessions.reap()
            self.runs.reap()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= self.limits.max_connections and not self._free_a_waiting_slot():
            # Answered without reading: the descriptor is free again at once.
            message = f"the server is serving {self.limits.max_connections} connections already; retry shortly"
            _write(writer, 503, _error_body(message), "application/json", {"Retry-After": "1"})
            await _close(writer)
            return
        self.connections += 1
        self.waiting[writer] = None
        try:
            await self._serve_one(reader, writer)
        except _HttpError as e:
            if not writer.is_closing():
                _write(writer, e.status, _error_body(str(e)), "application/json", e.headers)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as e:
            log.debug("dropping a connection: %s", e)
        finally:
            self.waiting.pop(writer, None)
            self.connections -= 1
            await _close(writer)

    def _free_a_waiting_slot(self) -> bool:
        """All slots are taken: close the connection that has waited longest without sending a request head it
        could be served on (its head incomplete, or not yet authenticated), so that clients which never send one
        (or send no valid token) cannot hold every slot. False when every slot is held by a served request."""
        if not self.waiting:
            return False
        oldest = next(iter(self.waiting))
        del self.waiting[oldest]
        message = "another client needed the connection slot this one held without sending a request; retry"
        _write(oldest, 503, _error_body(message), "application/json", {"Retry-After": "1"})
        oldest.close()
        return True

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        deadline = asyncio.get_running_loop().time() + self.limits.request_timeout
        async with _receiving(deadline, self.limits.request_timeout):
            method, path, query, headers = await _read_head(reader)
        self._check_host(headers)
        principal = self._authenticate(headers)
        self.waiting.pop(writer, None)  # a request to serve: from now on the connection holds its slot
        name = (parse_qs(query).get("session") or [headers.get("segue-session", "")])[0]
        if path == "/rpc":
            if method != "POST":
                raise _HttpError(405, "POST JSON-RPC messages to /rpc", {"Allow": "POST"})
            length = self._body_length(headers)
            with self._holding(length):
                async with _receiving(deadline, self.limits.request_timeout):
                    body = await reader.readexactly(length)
                with self._session(principal, name) as channel:
                    await self._rpc(writer, body, channel)
        elif path == "/events":
            if method != "GET":
                raise _HttpError(405, "GET /events for the server-sent event stream", {"Allow": "GET"})
            if not name:
                raise _HttpError(400, "name the session: GET /events?session=NAME, and send NAME with your requests")
            run = parse_qs(query).get("run", [""])[0]
            kept = self.runs.get(run, principal) if run else None
            if kept is not None:  # a run this server holds beyond sessions (a web run, a recovered one)
                await write_kept(writer, kept, run_stream(headers.get("last-event-id"), run), self.stopping)
                return
            with self._session(principal, name) as channel:
                await self._events(writer, channel, headers.get("last-event-id"), run)
        elif self.web is not None and path.split("/")[1] in ROUTES and path.count("/") == 2:
            route, agent = path.split("/")[1:]
            if method != "POST":
                raise _HttpError(405, f"POST the request to /{route}/{{agent}}", {"Allow": "POST"})
            length = self._body_length(headers)
            with self._holding(length):
                async with _receiving(deadline, self.limits.request_timeout):
                    body = await reader.readexactly(length)
                connection = (reader, writer)
                try:
                    await serve_web(self.web, connection, route, agent, body, principal, self.limits.write_timeout)
                except WebError as e:
                    raise _HttpError(e.status, str(e)) from None
        elif self.web is not None and path.split("/")[1] in ROUTES and path.count("/") == 4 and path[-7:] == "/stream":
            _, route, agent, thread, _ = path.split("/")
            if method != "GET":
                raise _HttpError(405, f"GET /{route}/{{agent}}/{{thread}}/stream to resume a stream", {"Allow": "GET"})
            try:
                await resume_web(
                    self.web,
                    (reader, writer),
                    route,  # type: ignore[arg-type]
                    agent,
                    unquote(thread),
                    parse_qs(query),
                    headers.get("last-event-id"),
                    principal,
                    self.limits.write_timeout,
                )
            except WebError as e:
                raise _HttpError(e.status, str(e)) from None
        else:
            raise _HttpError(404, f"no {path}; POST /rpc for requests, GET /events?session=NAME for notifications")

    def _check_host(self, headers: dict[str, str]) -> None:
        """On loopback, only loopback Host names: a DNS-rebinding page cannot reach the server by another name."""
        if self.host not in _LOOPBACK:
            return
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name not in _LOOPBACK:
            raise _HttpError(421, f"Host {host!r} is not a loopback name; this server answers 127.0.0.1 / localhost")

    def _authenticate(self, headers: dict[str, str]) -> Principal | None:
        if self.tokens is None:
            return None
        principal = self.tokens.authenticate(headers.get("authorization"))
        if principal is None:
            given = "a token it does not know" if headers.get("authorization") else "no token"
            raise _HttpError(
                401,
                f"this server needs Authorization: Bearer <token>; the request carried {given}",
                {"WWW-Authenticate": 'Bearer realm="segue"'},
            )
        return principal

    def _body_length(self, headers: dict[str, str]) -> int:
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise _HttpError(415, f"send Content-Type: application/json, not {kind or 'none'!r}")
        if "content-length" not in headers:
            chunked = " (chunked bodies are not accepted)" if "transfer-encoding" in headers else ""
            raise _HttpError(411, f"send a Content-Length header{chunked}")
        text = headers["content-length"]
        if not text.isdigit() or not text.isascii():
            raise _HttpError(400, f"Content-Length {text[:20]!r} is not a whole number")
        length = int(text)
        if length > self.limits.max_body_bytes:
            raise _HttpError(
                413, f"the body is {length} bytes; the limit is {self.limits.max_body_bytes} (max_body_bytes)"
            )
        return length

    @contextlib.contextmanager
    def _holding(self, length: int) -> Iterator[None]:
        """Room for one more body in memory, held until its response is written."""
        if self.body_bytes + length > self.limits.max_bodies_bytes:
            raise _HttpError(
                503,
                f"the server holds {self.body_bytes} bytes of request bodies; {length} more would pass "
                f"max_bodies_bytes ({self.limits.max_bodies_bytes}); retry shortly",
                {"Retry-After": "1"},
            )
        self.body_bytes += length
        try:
            yield
        finally:
            self.body_bytes -= length

    @contextlib.contextmanager
    def _session(self, principal: Principal | None, name: str) -> Iterator[Channel]:
        try:
            with self.sessions.use(principal, name) as channel:
                yield channel
        except SessionsFull as e:
            raise _HttpError(503, f"{e} (max_sessions)", {"Retry-After": "1"}) from None

    async def _rpc(self, writer: asyncio.StreamWriter, body: bytes, channel: Channel) -> None:
        out: Message | None
        try:
            message: Any = json.loads(body.decode("utf-8"))
        except RecursionError:
            out = response(None, error=RpcError(ErrorCode.PARSE_ERROR, "the body is nested too deeply to decode"))
        except Exception as e:  # not UTF-8, not JSON, or anything else decoding raises: this request's error
            out = response(None, error=RpcError(ErrorCode.PARSE_ERROR, f"the body is not JSON: {e}"))
        else:
            result = self.dispatcher.dispatch(channel.session, message)
            out = await result if isinstance(result, asyncio.Task) else result
        # Every event of the request reaches the session's streams before its response.
        await channel.flushed(channel.last_id, FLUSH_SECONDS)
        data = encode_message(out) if out is not None else None
        version = {"Segue-Protocol-Version": PROTOCOL_VERSION}
        if data is None:
            _write(writer, 204, b"", None, version)
        else:
            _write(writer, 200, data, "application/json", version)

    async def _events(
        self, writer: asyncio.StreamWriter, channel: Channel, last_event_id: str | None, run: str
    ) -> None:
        if run:  # one run's stream: from the session's oldest kept event when it resumes after one of the run's
            after = run_stream(last_event_id, run)
            stream = Stream(sent=channel.last_id if after is None else 0, run=run, after=after)
        else:
            resume_from = int(last_event_id) if last_event_id and last_event_id.strip().isdigit() else None
            stream = Stream(sent=channel.last_id if resume_from is None else min(resume_from, channel.last_id))
        channel.streams.add(stream)
        try:
            writer.write(STREAM_HEAD)
            await writer.drain()
            first = True
            while not stream.closed and not self.stopping.is_set():
                stream.wake.clear()
                frames, lost = channel.backlog(stream)
                if lost and not first:
                    log.warning("closing an event stream that fell %d events behind", self.limits.event_buffer)
                    return
                if lost:
                    writer.write(f": events after id {stream.sent} were dropped from the session's buffer\n\n".encode())
                first = False
                if frames:
                    writer.write(b"".join(frame for _, frame in frames))  # (a run stream's skipped ones are empty)
                    await writer.drain()
                    await channel.wrote(stream, frames[-1][0])
                    continue
                try:
                    await asyncio.wait_for(stream.wake.wait(), timeout=KEEP_ALIVE_SECONDS)
                except TimeoutError:
                    writer.write(b": keep-alive\n\n")
                    await writer.drain()
        finally:
            stream.closed = True
            channel.streams.discard(stream)
            await channel.wrote(stream, stream.sent)


@contextlib.asynccontextmanager
async def _receiving(deadline: float, seconds: float) -> Any:
    """Reading a request must end by `deadline`: a client that sends slowly is answered 408, not kept."""
    try:
        async with asyncio.timeout_at(deadline):
            yield
    except TimeoutError:
        raise _HttpError(408, f"the request was not received within {seconds:g} s (request_timeout_seconds)") from None


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
        key = name.strip().lower()
        if key == "content-length" and key in headers:
            raise _HttpError(400, "the request has more than one Content-Length header; send exactly one")
        headers[key] = value.strip()
    else:
        raise _HttpError(400, "too many header lines")
    if "transfer-encoding" in headers and "content-length" in headers:
        # RFC 9112 section 6.3: a request with both "ought to be handled as an error" (request smuggling).
        raise _HttpError(400, "the request has both Content-Length and Transfer-Encoding; send Content-Length alone")
    path, _, query = target.partition("?")
    return method.upper(), path, query, headers


def _error_body(message: str) -> bytes:
    return json.dumps({"error": message}).encode()


def _write(
    writer: asyncio.StreamWriter, status: int, body: bytes, kind: str | None, headers: dict[str, str] | None = None
) -> None:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", f"Content-Length: {len(body)}", "Connection: close"]
    if kind:
        lines.append(f"Content-Type: {kind}")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)


async def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, RuntimeError):
        await writer.drain()
    writer.close()
