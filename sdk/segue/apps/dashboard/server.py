"""Serving the dashboard: the standard library's WSGI server with one thread per request.

wsgiref is enough for a local, read-only page that one person looks at; it adds no dependency and the app stays a
plain WSGI callable, so any WSGI server (gunicorn, waitress, ...) can serve it instead.
"""

from __future__ import annotations

import logging
import socket
import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from wsgiref.types import WSGIApplication

import attrs

log = logging.getLogger("segue.dashboard")
REQUEST_TIMEOUT_SECONDS = 30.0


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)


def serve(
    app: WSGIApplication, *, host: str = "127.0.0.1", port: int = 8710, request_timeout: float = REQUEST_TIMEOUT_SECONDS
) -> WSGIServer:
    """A bound server (port 0 picks a free one); call `serve_forever()` on it. Raises OSError if it cannot bind.

    A connection that has not sent its whole request within `request_timeout` seconds is closed, so clients that
    stop half-way cannot hold the server's threads and sockets."""
    server_class = _Server6 if ":" in host else _Server
    handler = type("_TimedHandler", (_Handler,), {"timeout": request_timeout})
    return make_server(host, port, app, server_class=server_class, handler_class=handler)


@attrs.define(kw_only=True)
class RunningDashboard:
    """A dashboard serving from a background thread (tests, notebooks). `stop()` shuts it down, as does leaving a
    `with` block."""

    server: WSGIServer
    thread: threading.Thread
    url: str

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def __enter__(self) -> RunningDashboard:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def serve_in_thread(
    app: WSGIApplication, *, host: str = "127.0.0.1", port: int = 0, request_timeout: float = REQUEST_TIMEOUT_SECONDS
) -> RunningDashboard:
    server = serve(app, host=host, port=port, request_timeout=request_timeout)
    thread = threading.Thread(target=server.serve_forever, name="segue-dashboard", daemon=True)
    thread.start()
    bound_host, bound_port = str(server.server_address[0]), int(server.server_address[1])
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return RunningDashboard(server=server, thread=thread, url=f"http://{shown}:{bound_port}")
