"""The dashboard WSGI app called in-process, as a browser would: one page and the run ids it lists."""

from __future__ import annotations

import io
import json
import re
from typing import Any
from wsgiref.util import setup_testing_defaults

from segue.apps.dashboard.app import DashboardApp


class Page:
    def __init__(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.code = int(status.split()[0])
        self.headers = dict(headers)
        self.text = body.decode("utf-8")

    def json(self) -> Any:
        assert self.headers["Content-Type"].startswith("application/json")
        return json.loads(self.text)


def get(app: DashboardApp, path: str, *, method: str = "GET", host: str = "127.0.0.1:8710") -> Page:
    path, _, query = path.partition("?")
    environ: dict[str, Any] = {"PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": method, "HTTP_HOST": host}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(b"")
    captured: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        captured.update(status=status, headers=headers)

    body = b"".join(app(environ, start_response))
    return Page(captured["status"], captured["headers"], body)


def run_ids_on(page: Page) -> list[str]:
    return re.findall(r'<tr class="run-row" data-run-id="([^"]+)"', page.text)
