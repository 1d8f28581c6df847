"""Test helpers for `segue serve --http`: a server on a free loopback port, JSON-RPC posts, an event-stream
reader, raw sockets for hostile clients, and the token config the HTTP tests share."""

from __future__ import annotations

import http.client
import json
import os
import queue
import re
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests._support import warm_cli
from tests._support.protocol_harness import serve_command, twin_agent, write_config

DESCRIBE = {"name": "describe_table", "python": "segue.demo.shop_db:describe_table"}
RUN_QUERY = {"name": "run_query", "python": "segue.demo.shop_db:run_query"}


@contextmanager
def http_server(config: Path, env: dict[str, str] | None = None) -> Iterator[tuple[str, int]]:
    proc = warm_cli.Popen(
        serve_command(config, "--http", "--port", "0"),
        stderr=subprocess.PIPE,
        text=True,
        cwd=config.parent,
        env={**os.environ, **(env or {})},
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"http://([\d.]+):(\d+)/rpc", line)
        assert found, f"no address in {line!r}"
        yield found.group(1), int(found.group(2))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def post(
    address: tuple[str, int], body: Any, *, session: str = "", headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    conn = http.client.HTTPConnection(*address, timeout=30)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request("POST", f"/rpc?session={session}", data, {"Content-Type": "application/json", **(headers or {})})
    answer = conn.getresponse()
    raw = answer.read()
    conn.close()
    return answer.status, (json.loads(raw) if raw else None)


class Events:
    """Reads a server-sent event stream in a thread; `subscribed` is set once the server confirmed it. `run`: the
    stream of that one run (`GET /events?session=NAME&run=RUN_ID`)."""

    def __init__(
        self, address: tuple[str, int], session: str, headers: dict[str, str] | None = None, *, run: str = ""
    ) -> None:
        self.conn = http.client.HTTPConnection(*address, timeout=60)
        self.conn.request("GET", f"/events?session={session}" + (f"&run={run}" if run else ""), headers=headers or {})
        self.response = self.conn.getresponse()
        assert self.response.status == 200
        assert self.response.getheader("Content-Type") == "text/event-stream"
        self.items: queue.Queue[dict[str, Any]] = queue.Queue()
        self.subscribed = threading.Event()
        self.ended = threading.Event()  # the server closed the stream
        threading.Thread(target=self._read, daemon=True).start()
        assert self.subscribed.wait(10)

    def _read(self) -> None:
        event: dict[str, str] = {}
        try:
            for raw in self.response:
                line = raw.decode().rstrip("\n")
                if line == ": subscribed":
                    self.subscribed.set()
                elif line.startswith(("event: ", "data: ", "id: ")):
                    key, _, value = line.partition(": ")
                    event[key] = value
                elif not line and event:
                    self.items.put({"event": event["event"], "id": event["id"], "message": json.loads(event["data"])})
                    event = {}
        except (OSError, ValueError):
            pass
        finally:
            self.ended.set()

    def until(self, request_id: Any, last: str) -> list[dict[str, Any]]:
        """The run events of `request_id`, up to and including the first of type `last`."""
        found = []
        while True:
            item = self.items.get(timeout=30)
            assert item["event"] == "run/event" == item["message"]["method"]
            params = item["message"]["params"]
            if params["request_id"] == request_id:
                found.append(params["event"])
                if params["event"]["type"] == last:
                    return found

    def close(self) -> None:
        self.conn.close()


ACME = {"Authorization": "Bearer acme-secret"}
TOKENS = {"ACME_TOKEN": "acme-secret", "GLOBEX_TOKEN": "globex-secret"}


def write(tmp_path: Path, http: dict[str, Any] | None = None, agents: list[dict[str, Any]] | None = None) -> Path:
    config = write_config(tmp_path / "agents.json", agents or [twin_agent([])])
    if http is not None:
        data = json.loads(config.read_text())
        config.write_text(json.dumps({**data, "http": http}))
    return config


def tokens_config() -> dict[str, Any]:
    return {
        "tokens": [
            {"name": "acme-app", "token_env": "ACME_TOKEN", "tenants": ["acme"]},
            {"name": "globex-app", "token_env": "GLOBEX_TOKEN", "tenants": ["globex", "globex-eu"]},
        ]
    }


def open_sending(address: tuple[str, int], data: bytes) -> socket.socket:
    sock = socket.create_connection(address, timeout=30)
    sock.sendall(data)
    return sock


def status_of(sock: socket.socket) -> int:
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(1024)
        if not chunk:
            break
        head += chunk
    return int(head.split()[1]) if head else 0
