"""`segue serve --http` facing untrusted local clients and faulty ones: bearer tokens scoped to tenants, events
scoped to their session, limits on connections, time and memory, sessions that are freed, and the order of
events (every event before its response, one terminal event per run, Last-Event-ID honoured)."""

from __future__ import annotations

import http.client
import json
import select
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from segue.apps.protocol.auth import Principal, TenantNotAllowed, Tokens
from segue.apps.protocol.sessions import Sessions
from tests._support import warm_cli
from tests._support.protocol_harness import LIST, serve_command
from tests._support.protocol_http import (
    ACME,
    TOKENS,
    Events,
    http_server,
    open_sending,
    post,
    status_of,
    tokens_config,
    write,
)

RUN = {"jsonrpc": "2.0", "method": "run"}
GLOBEX = {"Authorization": "Bearer globex-secret"}
SLOW_TOOL = '''
import asyncio


async def wait() -> str:
    """Wait a long time."""
    await asyncio.sleep(30)
    return "waited"
'''


def scripted(replies: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "scripted",
        "provider": {"kind": "scripted", "model": "s", "replies": replies},
        "store": "sqlite:///runs.db",
        "tools": tools,
    }


def call_reply(name: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_call", "id": "c1", "name": name, "arguments": {}}]}


def text_reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


# -- hostile bodies -------------------------------------------------------------------------------------------


def test_hostile_bodies_get_answers_and_the_connection_is_not_dropped(tmp_path: Path) -> None:
    """Issue 16 item 1 over HTTP: the same bodies dropped the connection with no response."""
    with http_server(write(tmp_path)) as address:
        deep = '{"jsonrpc":"2.0","id":7,"method":"runs/list","params":{"x":' + "[" * 1000 + "]" * 1000 + "}}"
        status, reply = post(address, deep.encode())
        assert status == 200 and reply["error"]["code"] == -32700 and "nested too deeply" in reply["error"]["message"]
        status, reply = post(address, b'{"jsonrpc":"2.0","id":"\\ud800","method":"runs/list","params":{}}')
        assert status == 200 and reply == {"jsonrpc": "2.0", "id": "\ud800", "result": {"runs": []}}
        status, reply = post(address, {"foo": 1})
        assert status == 200 and reply["id"] is None and reply["error"]["code"] == -32600


# -- tokens and tenants ---------------------------------------------------------------------------------------


def test_tokens_are_required_and_scope_the_tenants(tmp_path: Path) -> None:
    """Issue 16 item 12: there was no authentication; any local process acted for any tenant."""
    with http_server(write(tmp_path, tokens_config()), env=TOKENS) as address:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic YWNtZQ=="}):
            conn = http.client.HTTPConnection(*address, timeout=10)
            conn.request("POST", "/rpc", json.dumps({**LIST, "id": 1}), {"Content-Type": "application/json", **headers})
            answer = conn.getresponse()
            assert answer.status == 401 and answer.getheader("WWW-Authenticate") == 'Bearer realm="segue"'
            assert "Authorization: Bearer" in json.loads(answer.read())["error"]
            conn.close()
        # A request naming no tenant acts for the token's only tenant.
        status, done = post(
            address, {**RUN, "id": 2, "params": {"agent": "analyst", "input": "How many orders?"}}, headers=ACME
        )
        assert status == 200 and done["result"]["result"]["status"] == "success", done
        run_id = done["result"]["result"]["run_id"]
        status, got = post(
            address, {"jsonrpc": "2.0", "id": 3, "method": "runs/get", "params": {"run_id": run_id}}, headers=ACME
        )
        assert got["result"]["run"]["tenant_id"] == "acme"
        # Another tenant: refused before anything runs, naming the tenant.
        for method, params in (
            ("run", {"agent": "analyst", "input": "x", "tenant_id": "globex"}),
            ("runs/list", {"tenant_id": "globex"}),
            ("runs/get", {"run_id": run_id, "tenant_id": "globex"}),
        ):
            status, refused = post(
                address, {"jsonrpc": "2.0", "id": 4, "method": method, "params": params}, headers=ACME
            )
            assert refused["error"]["code"] == -32007, refused
            assert refused["error"]["data"] == {"tenant_id": "globex"}
        # globex's token has two tenants: it must name one of them, or act for "default", which it may not.
        status, refused = post(address, {**LIST, "id": 5}, headers=GLOBEX)
        assert refused["error"]["code"] == -32007 and "'default'" in refused["error"]["message"]
        status, listed = post(address, {**LIST, "id": 6, "params": {"tenant_id": "globex-eu"}}, headers=GLOBEX)
        assert listed["result"] == {"runs": []}
        status, listed = post(address, {**LIST, "id": 7}, headers=ACME)
        assert [r["run_id"] for r in listed["result"]["runs"]] == [run_id]


def test_beyond_loopback_without_tokens_is_refused(tmp_path: Path) -> None:
    config = write(tmp_path)
    done = warm_cli.run(
        serve_command(config, "--http", "--host", "0.0.0.0", "--port", "0"), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "beyond loopback) needs bearer tokens: set SEGUE_SERVE_TOKEN or add http.tokens" in done.stderr


def test_token_config_errors_name_the_pointer(tmp_path: Path) -> None:
    config = write(tmp_path, tokens_config())
    done = warm_cli.run(serve_command(config, "--http", "--port", "0"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "agents.json#/http/tokens/0/token_env: the environment variable ACME_TOKEN is not set" in done.stderr


def test_tokens_unit() -> None:
    from segue.generated.serve import HttpConfig, HttpToken

    hashed = "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"  # sha256("secret")
    config = HttpConfig(tokens=[HttpToken(name="ops", token_sha256=hashed, tenants=["*"])])
    tokens = Tokens.load(config, env={"SEGUE_SERVE_TOKEN": "other"})
    assert tokens is not None
    ops = tokens.authenticate("Bearer secret")
    assert ops == Principal(name="ops", tenants=None) and ops.tenant_for(None) == "default"
    assert tokens.authenticate("bearer other") == Principal(name="SEGUE_SERVE_TOKEN", tenants=None)
    assert tokens.authenticate("Bearer nope") is None and tokens.authenticate(None) is None
    assert Tokens.load(None, env={}) is None
    one = Principal(name="a", tenants=frozenset({"acme"}))
    assert one.tenant_for(None) == "acme"
    with pytest.raises(TenantNotAllowed, match="the token 'a' may act for tenants acme, not 'globex'"):
        one.tenant_for("globex")


# -- events are scoped ----------------------------------------------------------------------------------------


def test_events_reach_only_the_session_and_token_that_started_the_run(tmp_path: Path) -> None:
    """Issue 16 item 12: a listener on GET /events received another client's events, answer text included."""
    with http_server(write(tmp_path, tokens_config()), env=TOKENS) as address:
        conn = http.client.HTTPConnection(*address, timeout=10)
        conn.request("GET", "/events", headers=ACME)
        answer = conn.getresponse()
        assert answer.status == 400 and "name the session" in json.loads(answer.read())["error"]
        conn.close()
        mine = Events(address, "s1", ACME)
        spy_other_token = Events(address, "s1", GLOBEX)  # the same session name, another token
        spy_other_session = Events(address, "s2", ACME)
        try:
            body = {**RUN, "id": 1, "params": {"agent": "analyst", "input": "How many orders?"}}
            status, done = post(address, body, session="s1", headers=ACME)
            assert done["result"]["result"]["status"] == "success"
            assert mine.until(1, "RUN_COMPLETED")[-1]["result"]["answer"] == done["result"]["result"]["answer"]
            status, _ = post(
                address, {**RUN, "id": 2, "params": {"agent": "analyst", "input": "Tables?"}}, headers=ACME
            )
            assert status == 200
            time.sleep(0.3)
            assert spy_other_token.items.empty() and spy_other_session.items.empty()
            assert mine.items.empty(), "a request without a session has events of its own"
        finally:
            mine.close()
            spy_other_token.close()
            spy_other_session.close()


# -- limits ---------------------------------------------------------------------------------------------------


PARTIAL = b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1500\r\n\r\n{"


def test_slow_bodies_time_out_and_connections_are_limited(tmp_path: Path) -> None:
    """Issue 16 item 3: no body timeout (slow bodies stayed open for good) and no connection limit."""
    http = {"request_timeout_seconds": 1.0, "max_connections": 3}
    with http_server(write(tmp_path, http)) as address:
        slow = [open_sending(address, PARTIAL) for _ in range(3)]
        time.sleep(0.2)
        refused = open_sending(address, b"")
        assert status_of(refused) == 503, "a fourth connection is refused at once"
        refused.close()
        started = time.monotonic()
        assert [status_of(s) for s in slow] == [408, 408, 408]
        assert time.monotonic() - started < 5
        for s in slow:
            s.close()
        status, listed = post(address, {**LIST, "id": 1})
        assert status == 200 and listed["result"] == {"runs": []}, "normal clients are served again"


def test_bodies_held_at_once_are_capped(tmp_path: Path) -> None:
    """Issue 16 item 3: two 60 MB bodies took 540 MB; now the bodies held at once are capped."""
    http = {"max_body_bytes": 2048, "max_bodies_bytes": 2048}
    with http_server(write(tmp_path, http)) as address:
        status, reply = post(address, b"[" + b" " * 3000 + b"]")
        assert status == 413 and "max_body_bytes" in reply["error"]
        holding = open_sending(address, PARTIAL)  # 1500 bytes announced, still arriving
        time.sleep(0.3)
        status, reply = post(address, b" " * 1000 + json.dumps({**LIST, "id": 1}).encode())
        assert status == 503 and "max_bodies_bytes" in reply["error"]
        holding.close()
        time.sleep(0.3)
        status, reply = post(address, b" " * 1000 + json.dumps({**LIST, "id": 2}).encode())
        assert status == 200 and reply["id"] == 2


def test_sessions_are_capped_and_freed(tmp_path: Path) -> None:
    """Issue 16 item 3: every `?session=` name allocated state that was never freed."""
    http = {"max_sessions": 3, "session_idle_seconds": 0.3}
    with http_server(write(tmp_path, http)) as address:
        for i in range(3):
            assert post(address, {**LIST, "id": i}, session=f"s{i}")[0] == 200
        status, reply = post(address, {**LIST, "id": 9}, session="s9")
        assert status == 503 and "max_sessions" in reply["error"]
        time.sleep(1.0)  # idle sessions are freed
        for i in range(3, 6):
            assert post(address, {**LIST, "id": i}, session=f"s{i}")[0] == 200


async def test_idle_sessions_are_reaped() -> None:
    sessions = Sessions(max_sessions=100, idle_seconds=0.0, buffer=10)
    for i in range(10):
        with sessions.use(None, f"s{i}"):
            pass
    assert len(sessions.channels) == 10
    with sessions.use(None, "busy"):
        assert sessions.reap() == 10 and list(sessions.channels) == [("", "busy")], "a session in use is kept"
    assert sessions.reap() == 1 and sessions.channels == {}


def test_the_dashboard_drops_a_client_that_stops_sending(tmp_path: Path) -> None:
    """Issue 16 item 3: the dashboard kept partial requests open for good."""
    from segue.apps.dashboard import create_app
    from segue.apps.dashboard import server as dashboard_server
    from segue.store import RunStore

    assert dashboard_server.REQUEST_TIMEOUT_SECONDS == 30.0  # the default; shortened here to keep the test quick
    store = RunStore(f"sqlite:///{tmp_path}/runs.db")
    running = dashboard_server.serve_in_thread(create_app(store), request_timeout=0.5)
    try:
        host, port = running.url.removeprefix("http://").rsplit(":", 1)
        sock = open_sending((host, int(port)), b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finishes its head
        sock.settimeout(5)
        started = time.monotonic()
        assert sock.recv(1024) == b"" and time.monotonic() - started < 4, "the server closed the connection"
        sock.close()
    finally:
        running.stop()
        store.close()


# -- event order ----------------------------------------------------------------------------------------------


class RawEvents:
    """A GET /events stream read from a raw socket, so a test can see exactly what has arrived so far."""

    def __init__(self, address: tuple[str, int], session: str, last_event_id: int | None = None) -> None:
        extra = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id is not None else ""
        self.sock = open_sending(
            address, f"GET /events?session={session} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode()
        )
        self.buffer = b""
        while b": subscribed\n\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        self.buffer = self.buffer.split(b": subscribed\n\n", 1)[1]
        self.events: list[dict[str, Any]] = []

    def arrived(self) -> list[dict[str, Any]]:
        """Every event whose bytes have arrived, without waiting."""
        while select.select([self.sock], [], [], 0)[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            self.buffer += chunk
        while b"\n\n" in self.buffer:
            block, self.buffer = self.buffer.split(b"\n\n", 1)
            fields = dict(line.split(": ", 1) for line in block.decode().splitlines() if not line.startswith(":"))
            if fields:
                self.events.append({"id": int(fields["id"]), **json.loads(fields["data"])["params"]})
        return self.events

    def close(self) -> None:
        self.sock.close()


def test_every_event_arrives_before_its_response_and_last_event_id_resumes(tmp_path: Path) -> None:
    """Issue 16 item 13: events arrived after the response (7 of 60); Last-Event-ID was ignored."""
    with http_server(write(tmp_path)) as address:
        stream = RawEvents(address, "s")
        for i in range(1, 13):
            status, _ = post(
                address, {**RUN, "id": i, "params": {"agent": "analyst", "input": "How many orders?"}}, session="s"
            )
            assert status == 200
            mine = [e for e in stream.arrived() if e["request_id"] == i]
            assert mine and mine[-1]["event"]["type"] == "RUN_COMPLETED", f"request {i}: {len(mine)} events so far"
        seen = stream.events[-1]["id"]
        stream.close()
        # While no stream is connected, another request runs; a reconnect with Last-Event-ID gets its events.
        status, _ = post(address, {**RUN, "id": 50, "params": {"agent": "analyst", "input": "Tables?"}}, session="s")
        assert status == 200
        back = RawEvents(address, "s", last_event_id=seen)
        deadline = time.monotonic() + 10
        while not any(e["request_id"] == 50 and e["event"]["type"] == "RUN_COMPLETED" for e in back.arrived()):
            assert time.monotonic() < deadline, back.events
            time.sleep(0.05)
        missed = [e for e in back.events if e["request_id"] == 50]
        assert missed[0]["event"]["type"] == "RUN_STARTED" and missed[0]["id"] == seen + 1
        assert [e["id"] for e in back.events] == list(range(seen + 1, seen + 1 + len(back.events)))
        back.close()


def test_a_cancelled_run_ends_with_one_terminal_event_and_tool_call_comes_first(tmp_path: Path) -> None:
    """Issue 16 item 13: TOOL_CALL came only after the tool finished; a cancelled run sent no final event."""
    (tmp_path / "slow_tools.py").write_text(SLOW_TOOL)
    agent = scripted([call_reply("wait"), text_reply("never")], [{"name": "wait", "python": "slow_tools:wait"}])
    with http_server(write(tmp_path, agents=[agent])) as address:
        stream = RawEvents(address, "s")
        result: dict[str, Any] = {}
        body = {**RUN, "id": 1, "params": {"agent": "scripted", "input": "go"}}
        worker = threading.Thread(target=lambda: result.update(reply=post(address, body, session="s")))
        worker.start()
        deadline = time.monotonic() + 20
        while not any(e["event"]["type"] == "TOOL_CALL" for e in stream.arrived()):
            assert time.monotonic() < deadline, "no TOOL_CALL while the tool runs"
            time.sleep(0.05)
        assert (
            post(address, {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}}, session="s")[0] == 204
        )
        worker.join(30)
        status, reply = result["reply"]
        assert status == 200 and reply["error"]["code"] == -32800
        events = [e["event"] for e in stream.arrived() if e["request_id"] == 1]
        assert [e["type"] for e in events] == ["RUN_STARTED", "TOOL_CALL", "RUN_ERROR"], events
        assert events[-1]["result"]["status"] == "cancelled" and events[-1]["error"] == "the run was cancelled"
        stream.close()


def test_the_connection_default_stays_below_the_open_file_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """With 64 files (the issue's setting), 70 slow connections must not take them all: the default is 32."""
    import resource

    from segue.apps.protocol.http import Limits
    from segue.generated.serve import HttpConfig

    monkeypatch.setattr(resource, "getrlimit", lambda _: (64, 64))
    assert Limits.from_config(None).max_connections == 32
    assert Limits.from_config(HttpConfig(max_connections=7, request_timeout_seconds=2.0)) == Limits(
        max_connections=7, request_timeout=2.0
    )
    monkeypatch.setattr(resource, "getrlimit", lambda _: (100_000, 100_000))
    assert Limits.from_config(None).max_connections == 100
