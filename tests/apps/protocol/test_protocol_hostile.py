"""Hostile and faulty input to `segue serve --stdio`: one bad frame is that frame's error and never the server's
end; the envelope rules of JSON-RPC 2.0; unstorable params named by pointer; no log flooding; event order."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from segue.store import RunStore
from tests._support import warm_cli
from tests._support.protocol_harness import (
    LIST,
    LIST_TABLES_CLIENT,
    NO_PARAMS,
    answer,
    answer_list_tables,
    scripted_agent,
    serve_command,
    stdio_server,
    twin_agent,
    write_config,
)
from tests._support.store_rows import new_run

DEEP = '{"jsonrpc":"2.0","id":7,"method":"runs/list","params":{"x":' + "[" * 1000 + "]" * 1000 + "}}"


def tool_call(name: str, call_id: str = "c1") -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_call", "id": call_id, "name": name, "arguments": {}}]}


def test_a_deeply_nested_frame_is_that_frames_error_and_runs_in_flight_go_on(tmp_path: Path) -> None:
    """Issue 16 item 1: RecursionError left the frame reader, the server exited 1 and every run was cancelled."""
    config = write_config(tmp_path / "agents.json", [twin_agent([LIST_TABLES_CLIENT])])
    assert len(DEEP) < 2100
    with stdio_server(config) as client:
        run_id = client.request("run", {"agent": "analyst", "input": "Which tables are there?"})
        while "id" not in (message := client.next_message()) or message.get("method") != "tool/call":
            client.notifications.append(message)
        # The run now waits for the client's tool; a hostile frame arrives meanwhile.
        client.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(DEEP), DEEP.encode()))
        refused = client.next_message()
        assert refused["id"] is None and refused["error"]["code"] == -32700
        assert "nested too deeply" in refused["error"]["message"]
        client.send({"jsonrpc": "2.0", "id": message["id"], **answer_list_tables(message)})
        done = client.response(run_id)
        assert done["result"]["result"]["status"] == "success", done
        assert client.close() == 0


def test_a_request_id_with_a_lone_surrogate_gets_its_answer(tmp_path: Path) -> None:
    """Issue 16 item 1: UnicodeEncodeError while encoding the reply ended the server."""
    config = write_config(tmp_path / "agents.json", [twin_agent([])])
    with stdio_server(config) as client:
        body = b'{"jsonrpc":"2.0","id":"\\ud800","method":"runs/list","params":{}}'
        client.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        reply = client.next_message()
        assert reply == {"jsonrpc": "2.0", "id": "\ud800", "result": {"runs": []}}
        client.send({**LIST, "id": 2})
        assert client.next_message()["id"] == 2
        assert client.close() == 0


def test_objects_that_are_no_message_get_invalid_request_with_a_null_id(tmp_path: Path) -> None:
    """Issue 16 item 11: `{}` and `{"foo": 1}` got no reply (JSON-RPC 2.0 answers Invalid Request, id null)."""
    config = write_config(tmp_path / "agents.json", [twin_agent([])])
    with stdio_server(config) as client:
        for message in ({}, {"foo": 1}, {"jsonrpc": "2.0"}):
            client.send(message)
            reply = client.next_message()
            assert reply["id"] is None and reply["error"]["code"] == -32600, reply
            assert 'no "method"' in reply["error"]["message"]
        client.send({"jsonrpc": "2.0", "method": "$/unknown/thing"})  # a notification: still never answered
        client.send({**LIST, "id": 3})
        assert client.next_message()["id"] == 3
        assert client.close() == 0


def test_unstorable_params_are_invalid_params_naming_the_field(tmp_path: Path) -> None:
    """Issue 16 items 5 and 11: a lone surrogate was an internal error with a traceback; offset 2**63 too."""
    config = write_config(tmp_path / "agents.json", [twin_agent([])])
    with stdio_server(config) as client:
        cases = [
            ("run", {"agent": "analyst", "input": "bad \ud800"}, "/input"),
            ("run", {"agent": "analyst", "input": "ok", "tenant_id": "t\udfff"}, "/tenant_id"),
            ("runs/list", {"offset": 2**63}, "/offset"),
        ]
        for method, params, pointer in cases:
            raw = json.dumps({"jsonrpc": "2.0", "id": 9, "method": method, "params": params}).encode()
            client.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(raw), raw))
            reply = client.next_message()
            assert reply["error"]["code"] == -32602, reply
            assert reply["error"]["data"]["errors"][0]["pointer"] == pointer
        big = {"agent": "analyst", "input": "ok", "metadata": {"blob": "x" * 70_000}}
        reply = client.call("run", big)
        assert reply["error"]["code"] == -32003 and "metadata is 70,011 characters" in reply["error"]["message"]
        assert client.close() == 0
        assert "Traceback" not in "".join(client.stderr)


def test_unknown_notifications_do_not_flood_the_log(tmp_path: Path) -> None:
    """Issue 16 item 11: every unknown notification logged a WARNING."""
    config = write_config(tmp_path / "agents.json", [twin_agent([])])
    with stdio_server(config) as client:
        for i in range(50):
            client.send({"jsonrpc": "2.0", "method": f"custom/ping{i}", "params": {}})
            client.send({"jsonrpc": "2.0", "method": "$/setTrace", "params": {}})
        client.send({**LIST, "id": 1})
        assert client.next_message()["id"] == 1
        assert client.close() == 0
    warnings = [line for line in client.stderr if "ignoring notification" in line]
    assert len(warnings) == 1 and "custom/ping0" in warnings[0] and "logged at DEBUG" in warnings[0], client.stderr


def test_the_config_never_prints_a_store_password(tmp_path: Path) -> None:
    """Issue 16 item 7: `segue serve --config` printed the PostgreSQL password of the store URL."""
    agent = {**twin_agent([]), "store": "postgresql://segue:hunter2@127.0.0.1:1/runs"}
    config = write_config(tmp_path / "agents.json", [agent])
    done = warm_cli.run(serve_command(config, "--stdio"), input=b"", capture_output=True, timeout=60, cwd=tmp_path)
    err = done.stderr.decode()
    assert done.returncode == 2 and "cannot open the run store postgresql://segue:***@127.0.0.1:1/runs" in err
    assert "hunter2" not in err


def test_serve_sweeps_abandoned_runs_at_start(tmp_path: Path) -> None:
    """Issue 16 item 10: a killed server's runs stayed `running`, so replaying them answered not_terminal."""
    store = RunStore(f"sqlite:///{tmp_path}/runs.db")
    abandoned = "01J" + "0" * 23
    store.create_run(
        new_run(abandoned, "default", input="i", lease_seconds=0.01),
        [],
    )
    # Its lease lapsed longer ago than the grace period a recoverer is given (and no agent here can recover it).
    store.db.execute_sql("UPDATE agent_runs SET lease_expires_at = lease_expires_at - 601 WHERE id = ?", (abandoned,))
    store.close()
    time.sleep(0.05)
    config = write_config(tmp_path / "agents.json", [twin_agent([])])
    with stdio_server(config) as client:
        got = client.call("runs/get", {"run_id": abandoned})
        assert got["result"]["run"]["status"] == "error"
        assert got["result"]["run"]["error"] == "abandoned: the run's lease expired"
        assert client.close() == 0
    assert any("marked 1 abandoned run(s) error" in line for line in client.stderr)


def test_cancelling_a_run_cancels_its_tool_call_and_ends_with_one_terminal_event(tmp_path: Path) -> None:
    """Issue 16 item 13 (stdio): the server never cancelled its own pending tool/call, and a cancelled run sent no
    final event. Also: TOOL_CALL is announced before the tool runs (here: before the tool/call request)."""
    config = write_config(tmp_path / "agents.json", [twin_agent([LIST_TABLES_CLIENT])])
    with stdio_server(config) as client:
        run_id = client.request("run", {"agent": "analyst", "input": "Which tables are there?"})
        while "id" not in (message := client.next_message()) or message.get("method") != "tool/call":
            client.notifications.append(message)
        seen = [e["type"] for e in client.events(run_id)]
        assert seen[-1] == "TOOL_CALL", "the TOOL_CALL event precedes the tool/call request"
        client.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": run_id}})
        cancel = client.next_message()
        assert cancel == {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": message["id"]}}
        done = client.response(run_id)
        assert done["error"]["code"] == -32800
        events = client.events(run_id)
        terminal = [e for e in events if e["type"] in ("RUN_COMPLETED", "RUN_ERROR", "RUN_PAUSED")]
        assert len(terminal) == 1 and terminal[0]["type"] == "RUN_ERROR", events
        assert terminal[0]["result"]["status"] == "cancelled" and terminal[0]["meta"]["status"] == "cancelled"
        # The client's late answer to the cancelled tool/call is ignored quietly.
        client.send({"jsonrpc": "2.0", "id": message["id"], **answer_list_tables(message)})
        client.send({**LIST, "id": 99})
        assert client.next_message()["id"] == 99
        assert client.close() == 0
    assert not any("ignoring a response" in line for line in client.stderr), client.stderr


def test_resume_streams_text_deltas(tmp_path: Path) -> None:
    """Issue 16 item 13: `resume` sent no TEXT_DELTA events."""
    approve = {"name": "approve_me", "description": "Needs approval.", "parameters": NO_PARAMS}
    agent = scripted_agent(
        [tool_call("approve_me"), answer("the answer after approval")],
        [{**approve, "python": "segue.demo.shop_db:list_tables", "requires_approval": True}],
    )
    config = write_config(tmp_path / "agents.json", [agent])
    with stdio_server(config) as client:
        paused = client.call("run", {"agent": "scripted", "input": "go"})
        assert paused["result"]["result"]["status"] == "waiting_approval"
        resume_id = client.request(
            "resume", {"agent": "scripted", "run_id": paused["result"]["result"]["run_id"], "approved": True}
        )
        done = client.response(resume_id)
        assert done["result"]["result"]["answer"] == "the answer after approval"
        deltas = [e["text"] for e in client.events(resume_id) if e["type"] == "TEXT_DELTA"]
        assert "".join(deltas) == "the answer after approval"
        assert client.close() == 0


def test_a_request_the_server_cannot_encode_is_that_requests_error() -> None:
    from segue.apps.protocol.framing import encode_frame, encode_message

    assert (
        encode_message({"jsonrpc": "2.0", "id": "\udc80", "result": 1})
        == b'{"jsonrpc":"2.0","id":"\\udc80","result":1}'
    )
    nan = json.loads(encode_message({"jsonrpc": "2.0", "id": 5, "result": float("nan")}) or b"{}")
    assert nan["id"] == 5 and nan["error"]["code"] == -32603 and "could not encode" in nan["error"]["message"]
    assert encode_frame({"jsonrpc": "2.0", "method": "run/event", "params": {"x": float("inf")}}) is None
