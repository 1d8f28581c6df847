"""Issue 36: the web streams (`/ag-ui/`, `/ai-sdk/`) resume. Every frame carries the SSE id of the run event it
encodes, `<run_id>:<seq>` (`<run_id>:<seq>.<i>` on the i-th frame of an event that is several frames, before its
last); a client that lost its connection GETs `/{route}/{agent}/{thread}/stream` with `Last-Event-ID` and
receives exactly the frames after the last one it saw, from the server that holds the run, also when that server
recovered the run at start after another one died (segue.apps.protocol.run_logs, web.py `read`). A real
`segue serve --http` with the twin as its model; the helpers are this module's own."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from segue import RunStore
from tests._support.protocol_harness import serve_command, twin_agent

pytestmark = pytest.mark.slow  # real servers, some killed and recovered

#: run_query sleeps first, so a client can drop its connection while the run goes on; and, while FLAG is absent,
#: the first server dies in it (SIGKILL), as a crash would kill it.
TOOLS = '''
import os, signal, time
from pathlib import Path

from segue import tool
from segue.demo.shop_db import run_query as _run_query

FLAG = Path(__file__).with_name("killed")


@tool(retry_safe=True)  # a read: the recovered run runs the query the crash interrupted again
def run_query(sql: str) -> list:
    """Run one read-only SQL query on the shop database."""
    if os.environ.get("KILL_IN_QUERY") and not FLAG.exists():
        FLAG.write_text("1")
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(float(os.environ.get("QUERY_SECONDS", "0")))
    return _run_query(sql)
'''
TOOL_SPECS = [
    {"name": "list_tables", "python": "segue.demo.shop_db:list_tables"},
    {"name": "describe_table", "python": "segue.demo.shop_db:describe_table"},
    {"name": "run_query", "python": "web_resume_tools:run_query"},
]
ID = re.compile(r"^(?P<run>[0-9A-Z]+):(?P<seq>\d+)(\.(?P<part>\d+))?$")


def _config(tmp_path: Path, **settings: Any) -> Path:
    (tmp_path / "web_resume_tools.py").write_text(TOOLS)
    path = tmp_path / "agents.json"
    path.write_text(json.dumps({"agents": [twin_agent(TOOL_SPECS)], **settings}))
    return path


@contextmanager
def _server(config: Path, **env: str) -> Iterator[tuple[subprocess.Popen[str], tuple[str, int]]]:
    """A `segue serve --http`; it must exit cleanly on SIGTERM unless the test killed it."""
    proc = subprocess.Popen(
        serve_command(config, "--http", "--port", "0"),
        stderr=subprocess.PIPE,
        text=True,
        cwd=config.parent,
        env={**os.environ, "PYTHONPATH": str(config.parent), **env},
    )
    try:
        assert proc.stderr is not None
        found = re.search(r"http://([\d.]+):(\d+)/rpc", proc.stderr.readline())
        assert found
        yield proc, (found.group(1), int(found.group(2)))
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def _body(route: str, thread: str, question: str, tenant: str | None = None) -> dict[str, Any]:
    if route == "ag-ui":
        body: dict[str, Any] = {
            "threadId": thread,
            "runId": f"{thread}-run",
            "state": {},
            "messages": [{"id": "u1", "role": "user", "content": question}],
            "tools": [],
            "context": [],
            "forwardedProps": {"tenant_id": tenant} if tenant else {},
        }
        return body
    body = {"id": thread, "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": question}]}]}
    return {**body, "tenant_id": tenant} if tenant else body


class Stream:
    """One web stream read frame by frame: (id or None, data) pairs, data parsed as JSON (or the AI SDK's [DONE])."""

    def __init__(self, address: tuple[str, int], method: str, path: str, body: Any = None, **headers: str) -> None:
        self.conn = http.client.HTTPConnection(*address, timeout=60)
        sent = {"Accept": "text/event-stream", **{k.replace("_", "-"): v for k, v in headers.items()}}
        if body is not None:
            sent["Content-Type"] = "application/json"
        self.conn.request(method, path, json.dumps(body).encode() if body is not None else None, sent)
        self.response = self.conn.getresponse()
        self.status = self.response.status

    def frames(self) -> Iterator[tuple[str | None, Any]]:
        frame: dict[str, str] = {}
        for raw in self.response:
            line = raw.decode().rstrip("\n")
            if line.startswith(("id: ", "data: ")):
                key, _, value = line.partition(": ")
                frame[key] = value
            elif not line and "data" in frame:
                data = frame["data"]
                yield frame.get("id"), data if data == "[DONE]" else json.loads(data)
                frame = {}

    def take(self, count: int) -> list[tuple[str | None, Any]]:
        taken = []
        for item in self.frames():
            taken.append(item)
            if len(taken) == count:
                break
        return taken

    def close(self) -> None:
        self.response.close()  # (the response holds the socket open past the connection's close)
        self.conn.close()


def _read_all(address: tuple[str, int], method: str, path: str, body: Any = None, **headers: str) -> list[Any]:
    stream = Stream(address, method, path, body, **headers)
    assert stream.status == 200, stream.response.read()
    try:
        return list(stream.frames())
    finally:
        stream.close()


def _status(address: tuple[str, int], path: str, **headers: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(*address, timeout=30)
    conn.request("GET", path, headers={k.replace("_", "-"): v for k, v in headers.items()})
    answer = conn.getresponse()
    data = answer.read()
    conn.close()
    return answer.status, data


def _position(frame_id: str) -> tuple[int, int]:
    found = ID.match(frame_id)
    assert found, frame_id
    return int(found["seq"]), int(found["part"]) if found["part"] else 1 << 30


def _check_ids(frames: list[tuple[str | None, Any]], run_id: str) -> None:
    """Each frame carries `<run_id>:<seq>` (or `.<i>` before its event's last frame), in stream order, never
    twice, and an event's earlier frames are followed by its last one. (An event the protocol does not show, such
    as reasoning on AG-UI, has no frame, so the frames' seqs may skip one.)"""
    ids = [frame_id for frame_id, _ in frames]
    assert all(i is not None for i in ids), frames
    assert all(ID.match(i) and ID.match(i)["run"] == run_id for i in ids if i), ids  # type: ignore[index]
    positions = [_position(i) for i in ids if i]
    assert positions == sorted(positions) and len(set(positions)) == len(positions), ids
    for seq, part in positions:
        assert (seq, 1 << 30) in positions, (seq, part)


def _run_id(route: str, frames: list[tuple[str | None, Any]]) -> str:
    first = frames[0][1]
    return first["metadata"]["run_id"] if route == "ag-ui" else first["messageMetadata"]["run_id"]


def test_every_web_frame_carries_its_run_event_id_and_a_resume_gets_exactly_the_frames_after_it(
    tmp_path: Path,
) -> None:
    with _server(_config(tmp_path)) as (_, address):
        for route in ("ag-ui", "ai-sdk"):
            whole = _read_all(address, "POST", f"/{route}/analyst", _body(route, f"{route}-t", "How many orders?"))
            run_id = _run_id(route, whole)
            _check_ids(whole, run_id)
            assert any(ID.match(i or "")["part"] for i, _ in whole), "some event is several frames"  # type: ignore[index]
            # A client that saw up to frame k (an event's last frame, or one before it) gets exactly the rest.
            for k in range(len(whole) - 1):
                rest = _read_all(address, "GET", f"/{route}/analyst/{route}-t/stream", Last_Event_ID=str(whole[k][0]))
                assert rest == whole[k + 1 :], (route, k, whole[k][0])
            # After the last frame there is nothing more: the stream ends at once.
            assert (
                _read_all(address, "GET", f"/{route}/analyst/{route}-t/stream", Last_Event_ID=str(whole[-1][0])) == []
            )
            # The run is over and the client names none: no active stream (the Vercel AI SDK's 204, below).
            assert _status(address, f"/{route}/analyst/{route}-t/stream")[0] == 204


def test_a_client_that_drops_mid_run_reconnects_and_the_run_goes_on_without_a_gap_or_a_repeat(tmp_path: Path) -> None:
    """The run goes on without its reader (web_resume_seconds, 15 s here; the default is 0); the client reconnects
    with the id of the last frame it saw, and what it got before and after is the run's whole stream, once."""
    with _server(_config(tmp_path, http={"web_resume_seconds": 15}), QUERY_SECONDS="2") as (_, address):
        for route in ("ag-ui", "ai-sdk"):
            thread = f"drop-{route}"
            first = Stream(address, "POST", f"/{route}/analyst", _body(route, thread, "How many orders?"))
            assert first.status == 200
            seen = first.take(5)
            first.close()  # the connection is lost mid-run (the slow query is still ahead)
            rest = _read_all(address, "GET", f"/{route}/analyst/{thread}/stream", Last_Event_ID=str(seen[-1][0]))
            run_id = _run_id(route, seen)
            whole = _read_all(address, "GET", f"/{route}/analyst/{thread}/stream", Last_Event_ID=f"{run_id}:0")
            assert seen + rest == whole, (seen, rest)
            _check_ids(whole, run_id)
            final = whole[-1][1] if route == "ag-ui" else whole[-2][1]
            metadata = final["metadata"] if route == "ag-ui" else final["messageMetadata"]
            assert metadata["status"] == "success", final


def test_the_ai_sdk_resume_protocol_a_reloaded_page_gets_the_active_run_and_204_when_there_is_none(
    tmp_path: Path,
) -> None:
    """The Vercel AI SDK's stream resumption, as its HttpChatTransport implements it (vercel/ai
    packages/ai/src/ui/http-chat-transport.ts, `reconnectToStream`): `useChat({ resume: true })` sends
    `GET ${api}/${chatId}/stream` (api: here `/ai-sdk/analyst`), and "no active stream found, so we do not
    resume" is `if (response.status === 204) { return null; }`. The AI SDK docs ("Chatbot Resume Streams"):
    "Two API endpoints: POST to create streams, GET to resume them". A reloaded page holds nothing of the message
    being streamed, sends no Last-Event-ID, and gets the active run's stream from its first part."""
    with _server(_config(tmp_path, http={"web_resume_seconds": 15}), QUERY_SECONDS="2") as (_, address):
        assert _status(address, "/ai-sdk/analyst/chat-1/stream") == (204, b"")
        first = Stream(address, "POST", "/ai-sdk/analyst", _body("ai-sdk", "chat-1", "How many orders?"))
        seen = first.take(3)
        first.close()  # the page reloads
        reloaded = _read_all(address, "GET", "/ai-sdk/analyst/chat-1/stream")
        assert reloaded[: len(seen)] == seen and reloaded[0][1]["type"] == "start"
        assert reloaded[-1][1] == "[DONE]" and reloaded[-2][1]["type"] == "finish"
        assert _status(address, "/ai-sdk/analyst/chat-1/stream") == (204, b"")


def test_a_token_of_one_tenant_never_reads_another_tenants_run_stream(tmp_path: Path) -> None:
    tokens = [
        {"name": "acme-app", "token_env": "ACME_TOKEN", "tenants": ["acme"]},
        {"name": "globex-app", "token_env": "GLOBEX_TOKEN", "tenants": ["globex"]},
    ]
    env = {"ACME_TOKEN": "acme-secret", "GLOBEX_TOKEN": "globex-secret"}
    acme, globex = "Bearer acme-secret", "Bearer globex-secret"
    with _server(_config(tmp_path, http={"tokens": tokens, "web_resume_seconds": 15}), QUERY_SECONDS="2", **env) as (
        _,
        address,
    ):
        stream = Stream(
            address, "POST", "/ai-sdk/analyst", _body("ai-sdk", "shared", "How many orders?"), Authorization=acme
        )
        seen = stream.take(2)
        stream.close()
        run_id = _run_id("ai-sdk", seen)
        # The other tenant's thread of the same id, with or without the run's id: nothing to resume.
        assert _status(address, "/ai-sdk/analyst/shared/stream", Authorization=globex)[0] == 204
        assert (
            _status(address, "/ai-sdk/analyst/shared/stream", Authorization=globex, Last_Event_ID=str(seen[-1][0]))[0]
            == 204
        )
        assert _status(address, "/ai-sdk/analyst/shared/stream?tenant_id=acme", Authorization=globex)[0] == 403
        # Nor the run's stream of run/event notifications: globex's session does not carry it.
        events = http.client.HTTPConnection(*address, timeout=5)
        events.request(
            "GET", f"/events?session=s&run={run_id}", headers={"Authorization": globex, "Last-Event-ID": f"{run_id}:0"}
        )
        answer = events.getresponse()
        assert answer.status == 200 and answer.readline() == b": subscribed\n" and answer.readline() == b"\n"
        try:
            assert answer.readline() in (b": keep-alive\n", b""), "no event of acme's run"
        except TimeoutError:
            pass  # nothing came within 5 s
        events.close()
        # Its own tenant resumes it.
        rest = _read_all(
            address, "GET", "/ai-sdk/analyst/shared/stream", Authorization=acme, Last_Event_ID=str(seen[-1][0])
        )
        assert rest[-1][1] == "[DONE]"


def test_a_run_cut_short_ends_with_the_protocols_error_frame_which_carries_no_id(tmp_path: Path) -> None:
    """No reader came back within web_resume_seconds: the run is cancelled naming the cause. A client that comes
    back later still reads the run's end: its frames after the last it saw, then the protocol's error. That error
    is not a run event (the run was cut short before it could say so): it carries no id, because nothing follows it
    to resume."""
    with _server(_config(tmp_path, http={"web_resume_seconds": 0.5}), QUERY_SECONDS="3") as (_, address):
        for route in ("ag-ui", "ai-sdk"):
            thread = f"cut-{route}"
            first = Stream(address, "POST", f"/{route}/analyst", _body(route, thread, "How many orders?"))
            seen = first.take(2)
            first.close()
            run_id = _run_id(route, seen)
            store = RunStore(f"sqlite:///{tmp_path}/runs.db")
            try:
                for _ in range(300):
                    run = store.get_run(run_id)
                    if run is not None and run.status != "running":
                        break
                    time.sleep(0.05)
                assert run is not None and run.status == "cancelled", run
                assert run.error == "the run was cancelled: the client closed the connection", run.error
            finally:
                store.close()
            rest = _read_all(address, "GET", f"/{route}/analyst/{thread}/stream", Last_Event_ID=str(seen[-1][0]))
            events = [(i, d) for i, d in rest if i is not None]
            assert rest[: len(events)] == events, "the frames without an id come last"
            closing = [d for i, d in rest if i is None]
            assert closing[-1]["type"] == ("RUN_ERROR" if route == "ag-ui" else "error"), closing
            said = closing[-1]["message" if route == "ag-ui" else "errorText"]
            assert said == "the run was cancelled: the client closed the connection", said
            _check_ids(seen + events, run_id)


def _killed_mid_run(config: Path, start: Any) -> tuple[list[tuple[str | None, Any]], str]:
    """Start a server whose run_query SIGKILLs it; `start(address)` opens the reader and starts the run. Returns
    the frames the reader got before the server died, and the database the run is in."""
    seen: list[tuple[str | None, Any]] = []
    with _server(config, KILL_IN_QUERY="1") as (proc, address):
        reader = start(address)
        try:
            for item in reader.frames():
                seen.append(item)
        except (OSError, http.client.HTTPException):
            pass  # the server died mid-stream
        assert proc.wait(timeout=60) == -signal.SIGKILL
        reader.close()
    # The clock is moved so the run's lease has lapsed when the next server starts (nothing else is changed).
    db = f"sqlite:///{config.parent}/runs.db"
    store = RunStore(db)
    store.db.execute_sql("UPDATE agent_runs SET lease_expires_at = 1 WHERE status = 'running'")
    store.close()
    return seen, db


def test_a_web_run_another_server_recovered_at_start_resumes_from_the_last_frame_the_client_saw(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    body = _body("ai-sdk", "crash", "How many orders?")
    seen, _ = _killed_mid_run(config, lambda address: Stream(address, "POST", "/ai-sdk/analyst", body))
    run_id = _run_id("ai-sdk", seen)
    assert seen and seen[-1][1]["type"] == "tool-input-available", seen  # it died in run_query
    with _server(config) as (_, address):  # recovers the run when it starts
        rest = _read_all(address, "GET", "/ai-sdk/analyst/crash/stream", Last_Event_ID=str(seen[-1][0]))
        fresh = _read_all(address, "POST", "/ai-sdk/analyst", _body("ai-sdk", "fresh", "How many orders?"))
    assert rest[-1][1] == "[DONE]" and rest[-2][1]["messageMetadata"]["status"] == "success", rest[-2:]
    _check_ids(seen + rest, run_id)  # one run, its seqs continued, no frame twice
    # The client ends with what an uninterrupted run shows: the same tool outputs and the same answer. (What it got
    # past the last event the journal proves, here the interrupted call's tool-input, is sent again after the
    # recovered run's start, as `run/event` consumers get it: segue.run.events.)
    assert _outputs(seen + rest) == _outputs(fresh) and _text(seen + rest) == _text(fresh) != ""
    again = next(d for _, d in rest if isinstance(d, dict) and d["type"].startswith("tool-"))
    assert again == {"type": "tool-input-start", "toolCallId": seen[-1][1]["toolCallId"], "toolName": "run_query"}


def test_an_ag_ui_run_another_server_recovered_at_start_resumes_with_last_event_id(tmp_path: Path) -> None:
    """AG-UI documents no resumption of a lost stream, so its client uses the SSE Last-Event-ID header on a GET of
    the same thread (docs/web.md), naming its AG-UI runId, which the recovering server never saw, for RUN_FINISHED.
    The run is not started again (AG-UI allows one RUN_STARTED per run)."""
    config = _config(tmp_path)
    body = _body("ag-ui", "crash", "How many orders?")
    seen, _ = _killed_mid_run(config, lambda address: Stream(address, "POST", "/ag-ui/analyst", body))
    run_id = _run_id("ag-ui", seen)
    assert seen and seen[-1][1]["type"] == "TOOL_CALL_END", seen  # it died in run_query
    with _server(config) as (_, address):
        path = "/ag-ui/analyst/crash/stream?runId=crash-run"
        rest = _read_all(address, "GET", path, Last_Event_ID=str(seen[-1][0]))
        fresh = _read_all(address, "POST", "/ag-ui/analyst", _body("ag-ui", "fresh", "How many orders?"))
    types = [d["type"] for _, d in rest]
    assert "RUN_STARTED" not in types and types[-1] == "RUN_FINISHED", types
    finished = rest[-1][1]
    assert (finished["threadId"], finished["runId"], finished["metadata"]["status"]) == (
        "crash",
        "crash-run",
        "success",
    )
    _check_ids(seen + rest, run_id)

    def shown(frames: list[tuple[str | None, Any]]) -> tuple[list[Any], str]:
        results = [d["content"] for _, d in frames if d["type"] == "TOOL_CALL_RESULT"]
        return results, "".join(d["delta"] for _, d in frames if d["type"] == "TEXT_MESSAGE_CONTENT")

    assert shown(seen + rest) == shown(fresh) and shown(fresh)[1] != ""


def _outputs(frames: list[tuple[str | None, Any]]) -> list[Any]:
    return [d["output"] for _, d in frames if isinstance(d, dict) and d["type"] == "tool-output-available"]


def _text(frames: list[tuple[str | None, Any]]) -> str:
    return "".join(d["delta"] for _, d in frames if isinstance(d, dict) and d["type"] == "text-delta")


def test_a_run_recovered_at_start_is_reachable_by_its_run_stream_with_last_event_id(tmp_path: Path) -> None:
    """Issue 36 item 2: the second server recovers the run when it starts (no client asked) and keeps its events;
    a client that reconnects with `Last-Event-ID: <run_id>:<seq>` gets the rest, one gapless sequence. The
    notifications' request_id says the server recovered it (no request of a client did)."""
    config = _config(tmp_path)

    def start(address: tuple[str, int]) -> Stream:
        events = Stream(address, "GET", "/events?session=a")
        run = {"jsonrpc": "2.0", "id": 1, "method": "run", "params": {"agent": "analyst", "input": "How many orders?"}}
        conn = http.client.HTTPConnection(*address, timeout=60)
        conn.request("POST", "/rpc?session=a", json.dumps(run).encode(), {"Content-Type": "application/json"})
        try:
            conn.getresponse()
        except (OSError, http.client.HTTPException):
            pass  # the server died during its query
        return events

    seen, _ = _killed_mid_run(config, start)
    events = [data["params"]["event"] for _, data in seen]
    run_id, last = events[0]["run_id"], events[-1]["seq"]
    assert [e["seq"] for e in events] == list(range(1, last + 1)) and events[-1]["type"] == "TOOL_CALL", events
    with _server(config) as (_, address):
        rest = []
        stream = Stream(address, "GET", f"/events?session=b&run={run_id}", Last_Event_ID=f"{run_id}:{last}")
        for frame_id, data in stream.frames():
            rest.append((frame_id, data))
            if data["params"]["event"]["type"] == "RUN_COMPLETED":
                break
        stream.close()
    later = [data["params"]["event"] for _, data in rest]
    assert later[0]["type"] == "RUN_STARTED" and later[0]["meta"]["recovered"] and later[0]["meta"]["after"] == last
    seqs = [e["seq"] for e in events + later]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    assert [frame_id for frame_id, _ in rest] == [f"{run_id}:{e['seq']}" for e in later]
    assert {data["params"]["request_id"] for _, data in rest} == {f"recovered:{run_id}"}
    assert later[-1]["result"]["status"] == "success"


async def test_a_resume_after_events_the_server_no_longer_holds_says_which_before_the_rest() -> None:
    """The run's log keeps its last `event_buffer` events: a client whose next events were dropped (or were sent by
    a server that died, and never reached this one) is told which, in an SSE comment, then gets what is held."""
    from segue.apps.protocol.run_logs import RunLog
    from segue.apps.protocol.web import read
    from segue.generated import RunEvent

    log = RunLog("R1", "default", "analyst", 2, thread="t")
    log.append(RunEvent(type="RUN_STARTED", run_id="R1", seq=1, iteration=0, meta={}))
    for seq in (2, 3, 4):
        log.append(RunEvent(type="TEXT_DELTA", run_id="R1", seq=seq, text=f"t{seq}", iteration=1, meta={}))
    log.finish()
    frames = [frame async for frame in read("ai-sdk", log, (1, None))]
    assert frames[0] == b": the run's events after seq 1 up to 2 are not held here\n\n"
    ids = [frame.split(b"\n")[0] for frame in frames if frame.startswith(b"id: ")]
    assert ids == [b"id: R1:3.1", b"id: R1:3.2", b"id: R1:3", b"id: R1:4"], frames
    whole = [frame async for frame in read("ai-sdk", log, (3, None))]
    assert whole[0].startswith(b"id: R1:4\n"), "nothing is missing after seq 3: no comment"
