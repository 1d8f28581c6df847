"""Test helpers for `segue serve`: a raw stdio client, config files, and a loopback HTTP tool server.

The stdio client parses the server's output strictly (a malformed frame from the server fails the test), so every
test also checks that the server only ever writes well-formed frames to stdout.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from segue.demo import shop_db as sample_db
from tests._support import warm_cli

TIMEOUT = 30.0
#: A JSON-RPC `runs/list` request without its id.
LIST = {"jsonrpc": "2.0", "method": "runs/list", "params": {}}
NO_PARAMS = {"type": "object", "properties": {}, "additionalProperties": False}
LIST_TABLES_CLIENT = {
    "name": "list_tables",
    "description": "List the tables of the shop database.",
    "parameters": NO_PARAMS,
    "client": True,
}


def frame(message: Any) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def write_config(path: Path, agents: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"agents": agents}, indent=2))
    return path


def twin_agent(
    tools: list[dict[str, Any]], *, name: str = "analyst", store: str = "sqlite:///runs.db"
) -> dict[str, Any]:
    return {
        "name": name,
        "provider": {"kind": "twin-anthropic", "model": "claude-sonnet-4-6"},
        "prompt": "You answer questions about the shop database.",
        "store": store,
        "tools": tools,
    }


def scripted_agent(replies: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "name": "scripted",
        "provider": {"kind": "scripted", "model": "s", "replies": replies},
        "store": "sqlite:///runs.db",
        "tools": tools,
        **extra,
    }


def answer(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def serve_command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "segue.apps.cli.main", "serve", *extra, "--config", str(config)]


class StdioClient:
    """Drives `segue serve --stdio` in a subprocess, frame by frame."""

    def __init__(self, config: Path) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = warm_cli.Popen(
            serve_command(config, "--stdio"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=config.parent,
            env=env,
        )
        self.messages: queue.Queue[Any] = queue.Queue()
        self.stderr: list[str] = []
        self.notifications: list[dict[str, Any]] = []
        self._next_id = 1
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        try:
            while True:
                header = b""
                while not header.endswith(b"\r\n\r\n"):
                    byte = out.read(1)
                    if not byte:
                        return
                    header += byte
                name, _, value = header.decode("ascii").strip().partition(":")
                assert name == "Content-Length", f"the server wrote a bad header: {header!r}"
                body = out.read(int(value))
                self.messages.put(json.loads(body))
        except Exception as e:  # surfaces in next_message
            self.messages.put(e)
        finally:
            self.messages.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace"))

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(frame(message))

    def request(self, method: str, params: Any, *, id: Any = None) -> Any:
        if id is None:
            id = self._next_id
            self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        return id

    def next_message(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        try:
            message = self.messages.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"no message from the server within {timeout} s; stderr:\n{''.join(self.stderr)}"
            ) from None
        if isinstance(message, Exception):
            raise message
        assert message is not None, f"the server closed stdout; stderr:\n{''.join(self.stderr)}"
        return message

    def response(self, id: Any, on_request: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, Any]:
        """Read until the response to `id`, answering server requests with `on_request` and keeping notifications."""
        while True:
            message = self.next_message()
            if "method" in message and "id" in message:
                assert on_request is not None, f"unexpected server request {message}"
                self.send({"jsonrpc": "2.0", "id": message["id"], **on_request(message)})
            elif "method" in message:
                self.notifications.append(message)
            elif message.get("id") == id:
                return message
            else:
                raise AssertionError(f"unexpected message while waiting for {id!r}: {message}")

    def call(
        self, method: str, params: Any, on_request: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        return self.response(self.request(method, params), on_request)

    def events(self, request_id: Any) -> list[dict[str, Any]]:
        return [
            n["params"]["event"]
            for n in self.notifications
            if n["method"] == "run/event" and n["params"]["request_id"] == request_id
        ]

    def close(self, timeout: float = TIMEOUT) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(timeout=timeout)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=TIMEOUT)


@contextmanager
def stdio_server(config: Path) -> Iterator[StdioClient]:
    client = StdioClient(config)
    try:
        yield client
    finally:
        client.kill()


def answer_list_tables(message: dict[str, Any]) -> dict[str, Any]:
    """A client-side list_tables: the client answers from its own copy of the sample database."""
    assert message["method"] == "tool/call"
    assert message["params"]["call"]["name"] == "list_tables"
    return {"result": {"content": json.dumps(sample_db.list_tables())}}


class _ToolHandler(BaseHTTPRequestHandler):
    calls: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.calls.append(body)
        status, text = 200, ""
        try:
            if body["name"] == "run_query":
                text = json.dumps(sample_db.run_query(**body["arguments"]))
            elif body["name"] == "describe_table":
                text = json.dumps(sample_db.describe_table(**body["arguments"]))
            else:
                status, text = 404, f"no tool {body['name']}"
        except ValueError as e:
            status, text = 422, str(e)
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def tool_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A loopback HTTP server answering describe_table / run_query callbacks from the sample database."""
    calls: list[dict[str, Any]] = []
    handler = type("Handler", (_ToolHandler,), {"calls": calls})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/tools", calls
    finally:
        server.shutdown()
        server.server_close()
