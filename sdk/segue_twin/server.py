"""The twin as a real HTTP/1.1 server on loopback, for clients in other processes or languages.

Built on the standard library's `http.server.ThreadingHTTPServer` in a background thread: no extra
dependency, one thread per connection, keep-alive supported, and the `Twin` lock serialises requests so
cache behaviour matches the in-process transport exactly. Streaming replies are sent with chunked transfer
encoding, one chunk per SSE event. Bad input never stops the server: every request gets an answer.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from segue_twin.core import Twin, TwinResponse
from segue_twin.errors import TwinHTTPError

#: Oversized bodies up to this multiple of the limit are read and discarded so the client sees the 413;
#: beyond it the connection is closed after the 413 instead of reading gigabytes.
DRAIN_FACTOR = 4
_READ_CHUNK = 1 << 16


class _TwinHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default listen backlog is 5: many clients connecting at once (a load test, an app's
    # worker pool) would be refused before a thread could accept them.
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], twin: Twin) -> None:
        super().__init__(address, _Handler)
        self.twin = twin


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _TwinHTTPServer

    def do_POST(self) -> None:
        self._serve()

    def do_GET(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet by default: the twin runs inside test suites."""

    def _serve(self) -> None:
        twin = self.server.twin
        headers = {key: value for key, value in self.headers.items()}
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            self._send(twin_error(twin, self.path, headers, 411, "Send the body with a Content-Length header."))
            return
        try:
            size = int(self.headers.get("Content-Length", "0"))
            if size < 0:
                raise ValueError(size)
        except ValueError:
            self.close_connection = True
            self._send(twin_error(twin, self.path, headers, 400, "Invalid Content-Length header."))
            return
        if size > twin.max_body_bytes:
            if size <= DRAIN_FACTOR * twin.max_body_bytes:
                self._discard(size)
            else:
                self.close_connection = True
            self._send(twin.oversized(self.path, headers, size))
            return
        body = self.rfile.read(size)
        self._send(twin.handle(self.command, self.path, headers, body, begun=False))

    def _discard(self, size: int) -> None:
        remaining = size
        while remaining > 0:
            chunk = self.rfile.read(min(_READ_CHUNK, remaining))
            if not chunk:
                break
            remaining -= len(chunk)

    def _send(self, answer: TwinResponse) -> None:
        answer.begin()  # its cache entries are readable from the moment the response starts going out
        self.send_response(answer.status)
        for key, value in answer.headers:
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        if not answer.streaming:
            body = answer.body
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for chunk in answer.chunks:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


def twin_error(twin: Twin, path: str, headers: dict[str, str], status: int, message: str) -> TwinResponse:
    """A vendor-shaped error for transport-level problems found before the body is read."""
    return twin.reject(path, headers, TwinHTTPError(status, message))


class TwinServer:
    """A running loopback server: `port`, `url`, `twin`, and `close()` (also a context manager)."""

    def __init__(self, httpd: _TwinHTTPServer, thread: threading.Thread) -> None:
        self._httpd = httpd
        self._thread = thread
        host, port = httpd.server_address[:2]
        self.host = str(host)
        self.port = int(port)
        self.twin = httpd.twin

    @property
    def url(self) -> str:
        """Base URL for the Anthropic client; OpenAI clients use ``url + "/v1"``."""
        return f"http://{self.host}:{self.port}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> TwinServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def serve(host: str = "127.0.0.1", port: int = 0, *, twin: Twin | None = None) -> TwinServer:
    """Start the twin on ``host:port`` (0 = a free port) in a background thread and return its handle."""
    httpd = _TwinHTTPServer((host, port), twin if twin is not None else Twin())
    thread = threading.Thread(
        target=httpd.serve_forever,
        kwargs={"poll_interval": 0.05},
        daemon=True,
        name=f"segue-twin-{httpd.server_address[1]}",
    )
    thread.start()
    return TwinServer(httpd, thread)


def run_server(host: str = "127.0.0.1", port: int = 8765, *, twin: Twin | None = None) -> None:
    """Serve until interrupted (Ctrl-C): the body of `segue twin serve --port N`."""
    httpd = _TwinHTTPServer((host, port), twin if twin is not None else Twin())
    bound = httpd.server_address[1]
    print(
        f"segue twin listening on http://{host}:{bound} (Anthropic base_url http://{host}:{bound}, "
        f"OpenAI base_url http://{host}:{bound}/v1); Ctrl-C stops it",
        file=sys.stderr,
    )
    try:
        httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
