"""Web streams under a reader that goes away, clients that stop reading, tenants sharing thread ids, failures
before a stream starts and clocks that step back (issue 35: R1, R2, R4, R7, R8, R10). The server is a real
`segue serve --http` subprocess; its model is the twin, or a fake Anthropic endpoint on loopback that streams text
without end (a model that talks for long) or says nothing after its first event (a model that thinks for long)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from segue.store import RunStore
from tests._support import warm_cli
from tests._support.protocol_harness import serve_command, twin_agent
from tests._support.protocol_http import post
from tests._support.web import ag_ui_input, post_stream, sse_data, web_config

#: How soon after its client goes away a web stream's run must be recorded `cancelled` (docs/reliability.md).
BOUND_SECONDS = 5.0


class _Vendor(ThreadingHTTPServer):
    """A fake Anthropic Messages endpoint: `mode` says how it streams ("endless", "silent" or "answer")."""

    daemon_threads = True
    mode = "endless"


class _VendorHandler(BaseHTTPRequestHandler):
    server: _Vendor

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        self.wfile.write(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        usage = {"input_tokens": 12, "output_tokens": 1, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6", "content": []}
        try:
            self._event("message_start", {"type": "message_start", "message": {**message, "usage": usage}})
            block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
            self._event("content_block_start", block)
            mode = self.server.mode
            while mode != "answer":
                if mode == "endless":
                    delta = {"type": "text_delta", "text": "words " * 10_000}
                    self._event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
                time.sleep(0.005 if mode == "endless" else 0.2)
                mode = self.server.mode
            delta = {"type": "text_delta", "text": "The answer."}
            self._event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
            self._event("content_block_stop", {"type": "content_block_stop", "index": 0})
            stop = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}
            self._event("message_delta", stop)
            self._event("message_stop", {"type": "message_stop"})
        except (BrokenPipeError, ConnectionResetError):
            pass  # segue closed the call: its run ended


@contextmanager
def _vendor() -> Iterator[_Vendor]:
    server = _Vendor(("127.0.0.1", 0), _VendorHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.mode = "answer"
        server.shutdown()
        server.server_close()


def _vendor_config(tmp_path: Path, vendor: _Vendor, **settings: Any) -> Path:
    agent = {**twin_agent([]), "name": "talker"}
    agent["provider"] = {
        "kind": "anthropic",
        "model": "claude-sonnet-4-6",
        "base_url": f"http://127.0.0.1:{vendor.server_address[1]}",
    }
    path = tmp_path / "agents.json"
    path.write_text(json.dumps({"agents": [agent], **settings}))
    return path


@contextmanager
def _server(config: Path) -> Iterator[tuple[subprocess.Popen[str], tuple[str, int]]]:
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-the-loopback-vendor"}
    proc = warm_cli.Popen(
        serve_command(config, "--http", "--port", "0"), stderr=subprocess.PIPE, text=True, cwd=config.parent, env=env
    )
    try:
        assert proc.stderr is not None
        found = re.search(r"http://([\d.]+):(\d+)/rpc", proc.stderr.readline())
        assert found
        yield proc, (found.group(1), int(found.group(2)))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _open_stream(address: tuple[str, int], path: str, body: Any, *, receive_buffer: int | None = None) -> socket.socket:
    """A client that sent its request and has not read the answer yet."""
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(address)
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
    sock.sendall(head.encode() + b"\r\n\r\n" + data)
    return sock


def _read_until_started(sock: socket.socket) -> None:
    """Read until the stream's first event (RUN_STARTED / start): the run's row exists."""
    seen = b""
    sock.settimeout(30)
    while b"data: " not in seen:
        chunk = sock.recv(65536)
        assert chunk, seen.decode(errors="replace")
        seen += chunk
    assert seen.startswith(b"HTTP/1.1 200"), seen[:200]


def _body(route: str, thread: str, question: str, **extra: Any) -> dict[str, Any]:
    if route == "ag-ui":
        return ag_ui_input(thread, f"{thread}-{question[:4]}", question, **extra)
    return {"id": thread, "messages": [{"role": "user", "parts": [{"type": "text", "text": question}]}], **extra}


def _runs(tmp_path: Path) -> list[Any]:
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        return list(reversed(store.list_runs(all_tenants=True, limit=100)))
    finally:
        store.close()


def _wait_for_status(
    tmp_path: Path, run_id: str, status: str, bound: float = BOUND_SECONDS
) -> tuple[float, str | None]:
    """(seconds waited, the run's error) once the run holds `status`; fails after `bound` seconds."""
    started = time.monotonic()
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        while True:
            run = store.get_run(run_id, all_tenants=True)
            assert run is not None
            waited = time.monotonic() - started
            if run.status == status:
                return waited, run.error
            assert waited < bound, f"run {run_id} still {run.status} after {waited:.1f} s"
            time.sleep(0.05)
    finally:
        store.close()


# -- R1: a run never outlives its reader -------------------------------------------------------------------------


def test_a_client_that_goes_away_mid_stream_ends_its_run_cancelled_at_once(tmp_path: Path) -> None:
    """FIN or RST, while the model streams text or says nothing, on both routes: within BOUND_SECONDS the run is
    `cancelled` naming the cause, and the thread's next turn replays it. SIGTERM ends a run in flight too."""
    # The default config: no time to reconnect (web_resume_seconds 0); test_web_resume.py covers a run that waits.
    with _vendor() as vendor, _server(_vendor_config(tmp_path, vendor)) as (proc, address):
        stopped = []
        for n, (route, mode, close) in enumerate(
            [
                ("ag-ui", "endless", "fin"),
                ("ag-ui", "silent", "rst"),
                ("ai-sdk", "silent", "fin"),
                ("ai-sdk", "endless", "rst"),
            ]
        ):
            vendor.mode = mode
            sock = _open_stream(address, f"/{route}/talker", _body(route, f"thread-{n}", "Tell me everything"))
            _read_until_started(sock)
            (run,) = [r for r in _runs(tmp_path) if r.metadata["thread_id"] == f"thread-{n}"]
            if close == "rst":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
            waited, error = _wait_for_status(tmp_path, run.run_id, "cancelled")
            assert error is not None and error.startswith("the run was cancelled"), error
            stopped.append((route, run.run_id, waited))

        vendor.mode = "answer"
        for n, (route, run_id, _) in enumerate(stopped):
            status, _, text = post_stream(address, f"/{route}/talker", _body(route, f"thread-{n}", "And then?"))
            assert status == 200 and "The answer." in text, text
            (_, second) = [r for r in _runs(tmp_path) if r.metadata["thread_id"] == f"thread-{n}"]
            assert second.status == "success" and second.continued_from == run_id, "the next turn replayed it"

        vendor.mode = "silent"
        sock = _open_stream(address, "/ag-ui/talker", _body("ag-ui", "thread-term", "Tell me everything"))
        _read_until_started(sock)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        sock.close()
    (run,) = [r for r in _runs(tmp_path) if r.metadata["thread_id"] == "thread-term"]
    assert run.status == "cancelled"


# -- R4: clients that stop reading cannot hold the run slots ---------------------------------------------------------


def test_clients_that_stop_reading_are_closed_after_the_write_timeout_and_free_their_slots(tmp_path: Path) -> None:
    settings = {"max_concurrent_runs": 2, "http": {"write_timeout_seconds": 1}}
    with _vendor() as vendor, _server(_vendor_config(tmp_path, vendor, **settings)) as (_, address):
        stalled = [
            _open_stream(address, "/ai-sdk/talker", _body("ai-sdk", f"stalled-{n}", "Talk"), receive_buffer=4096)
            for n in range(2)
        ]
        deadline = time.monotonic() + 30
        while len(_runs(tmp_path)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for run in _runs(tmp_path):
            # The write timeout counts once the socket buffers between server and client are full.
            _, error = _wait_for_status(tmp_path, run.run_id, "cancelled", bound=30)
            assert error is not None and "event stream was closed" in error, error
        vendor.mode = "answer"
        status, _, text = post_stream(address, "/ag-ui/talker", _body("ag-ui", "next", "Hello"))
        assert status == 200 and sse_data(text)[-1]["type"] == "RUN_FINISHED", text
        for sock in stalled:
            sock.close()


# -- R2: a thread id is its tenant's own ------------------------------------------------------------------------------

TOKENS = [
    {"name": "acme-app", "token_env": "ACME_TOKEN", "tenants": ["acme"]},
    {"name": "globex-app", "token_env": "GLOBEX_TOKEN", "tenants": ["globex"]},
]
ENV = {"ACME_TOKEN": "acme-secret", "GLOBEX_TOKEN": "globex-secret"}


def _turn(address: tuple[str, int], route: str, thread: str, question: str, token: str) -> dict[str, Any]:
    status, _, text = post_stream(address, f"/{route}/analyst", _body(route, thread, question), token)
    assert status == 200, text
    events = sse_data(text)
    last = events[-1] if route == "ag-ui" else events[-2]
    assert last["type"] in ("RUN_FINISHED", "finish"), last
    return dict(last["metadata"] if route == "ag-ui" else last["messageMetadata"])


def test_two_tenants_threads_of_one_id_are_two_threads(tmp_path: Path) -> None:
    config = web_config(tmp_path, tokens=TOKENS)
    env = {**os.environ, **ENV}
    proc = warm_cli.Popen(
        serve_command(config, "--http", "--port", "0"), stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env
    )
    try:
        assert proc.stderr is not None
        found = re.search(r"http://([\d.]+):(\d+)/rpc", proc.stderr.readline())
        assert found
        address = (found.group(1), int(found.group(2)))
        for route in ("ag-ui", "ai-sdk"):
            # globex starts chat-1 first; acme's chat-1 is acme's own conversation.
            chat = f"chat-1-{route}"
            globex1 = _turn(address, route, chat, "How many orders?", "globex-secret")
            acme1 = _turn(address, route, chat, "How many customers?", "acme-secret")
            acme2 = _turn(address, route, chat, "How many products?", "acme-secret")
            globex2 = _turn(address, route, chat, "How many tables?", "globex-secret")
            assert "replayed" not in acme1.get("replay_text", ""), "acme's first turn replays nothing of globex"
            runs = {r.run_id: r for r in _runs(tmp_path)}
            assert runs[acme2["run_id"]].continued_from == acme1["run_id"]
            assert runs[globex2["run_id"]].continued_from == globex1["run_id"]
            assert "replayed 1 run" in acme2["replay_text"] and "replayed 1 run" in globex2["replay_text"]

        # A JSON-RPC run naming acme's thread in its metadata, by globex, locks nobody out.
        params = {"agent": "analyst", "input": "How many orders?", "metadata": {"thread_id": "acme-only"}}
        headers = {"Authorization": "Bearer globex-secret"}
        status, answer = post(address, {"jsonrpc": "2.0", "id": 1, "method": "run", "params": params}, headers=headers)
        assert status == 200 and answer["result"]["result"]["status"] == "success", answer
        first = _turn(address, "ag-ui", "acme-only", "How many orders?", "acme-secret")
        second = _turn(address, "ag-ui", "acme-only", "How many customers?", "acme-secret")
        assert {r.run_id: r for r in _runs(tmp_path)}[second["run_id"]].continued_from == first["run_id"]

        # Both tenants' first turns of one thread id at once: every later turn of either works.
        results: list[dict[str, Any]] = []
        threads = [
            threading.Thread(target=lambda t=t: results.append(_turn(address, "ai-sdk", "at-once", "Hi", t)))
            for t in ("acme-secret", "globex-secret")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert len(results) == 2
        for token in ("acme-secret", "globex-secret"):
            later = _turn(address, "ai-sdk", "at-once", "How many orders?", token)
            assert "replayed 1 run" in later["replay_text"], later
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


# -- R10 and R7: refusals before the stream starts are HTTP errors -------------------------------------------------


def test_input_the_agent_refuses_is_a_400_and_stores_nothing(tmp_path: Path) -> None:
    with _server(web_config(tmp_path)) as (_, address):
        too_long = "x" * 1_000_001
        cases = [
            ("ag-ui", _body("ag-ui", "t1", too_long), "max_input_chars"),
            ("ai-sdk", _body("ai-sdk", "t2", too_long), "max_input_chars"),
            ("ag-ui", _body("ag-ui", "t3", "lone \ud800 surrogate"), "surrogate"),
            ("ai-sdk", _body("ai-sdk", "t4", "lone \ud800 surrogate"), "surrogate"),
            ("ag-ui", _body("ag-ui", "t5", "Hi", tenant_id="t" * 201), "at most 200"),
            ("ai-sdk", _body("ai-sdk", "t6", "Hi", tenant_id="t" * 201), "at most 200"),
            ("ai-sdk", _body("ai-sdk", "t7", "Hi", tenant_id="bad \ud800"), "valid Unicode"),
            ("ag-ui", _body("ag-ui", "t\ud800", "Hi"), "valid Unicode"),
        ]
        text_part = _body("ag-ui", "t8", "Hi")
        text_part["messages"][0]["content"] = [{"type": "text", "text": {"not": "a string"}}]
        cases.append(("ag-ui", text_part, "not a string"))
        for route, body, words in cases:
            # json.dumps writes a lone surrogate as the escape \ud800, as a JavaScript client would.
            status, _, text = post_stream(address, f"/{route}/analyst", json.dumps(body).encode())
            assert status == 400, (route, words, text[:300])
            assert words in json.loads(text)["error"], (words, text[:300])
    assert _runs(tmp_path) == [], "no refused request stored a run"


async def test_a_store_that_fails_before_the_stream_is_a_503_and_one_log_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from segue.apps.protocol.config import build_app, load_config
    from segue.apps.protocol.http import HttpServer, Limits
    from segue.apps.protocol.web import Web
    from segue.errors import StoreError

    path = web_config(tmp_path)
    app = build_app(load_config(path), path, "http")

    def down(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("run store postgresql://127.0.0.1:1/segue: connection refused (the server is down)")

    monkeypatch.setattr(app.agent("analyst").store, "list_runs", down)
    server = HttpServer(None, host="127.0.0.1", port=0, limits=Limits(max_connections=10), web=Web(app))  # type: ignore[arg-type]
    listening = await asyncio.start_server(server._connection, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    try:
        caplog.set_level(logging.DEBUG)
        status, _, text = await asyncio.to_thread(
            post_stream, ("127.0.0.1", port), "/ag-ui/analyst", _body("ag-ui", "t", "Hi")
        )
        await asyncio.sleep(0.1)
    finally:
        listening.close()
        await listening.wait_closed()
        app.close()
    assert status == 503 and "run store is unavailable" in json.loads(text)["error"], text
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1 and "connection refused" in errors[0].getMessage(), [r.getMessage() for r in errors]
    assert all(r.exc_info is None for r in caplog.records), "no traceback"


# -- R8: a thread replays in turn order --------------------------------------------------------------------------


async def test_a_thread_replays_in_turn_order_when_the_clock_steps_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ulid import ULID

    import segue.run.pipeline as pipeline
    from segue.apps.protocol.config import build_app, load_config
    from segue.apps.protocol.web import Web

    path = web_config(tmp_path)
    app = build_app(load_config(path), path, "http")
    web = Web(app)

    async def turn(question: str) -> str:
        _, frames = await web.open("ag-ui", "analyst", json.dumps(_body("ag-ui", "thread", question)).encode(), None)
        text = b"".join([frame async for frame in frames]).decode()
        return str(sse_data(text)[-1]["metadata"]["run_id"])

    try:
        first = await turn("How many orders?")
        # The process serving turn 2 has its clock an hour behind: turn 2's run id sorts before turn 1's.
        monkeypatch.setattr(pipeline, "ULID", lambda: ULID.from_timestamp(time.time() - 3600))
        second = await turn("How many customers?")
        monkeypatch.undo()
        assert second < first
        third = await turn("How many products?")
        run = app.agent("analyst").store.get_run(third)
        # continued_from is the last run replayed: turn 2, after turn 1 (id order would put turn 1 last).
        assert run is not None and run.continued_from == second, "turn 3 replays turn 1, then turn 2"
        assert run.meta.segue_replay is not None and run.meta.segue_replay.knobs.runs == [first, second]
    finally:
        app.close()
