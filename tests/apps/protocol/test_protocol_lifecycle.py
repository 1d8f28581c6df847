"""`segue serve --stdio` as a language server: initialize, shutdown, exit, and what a session may send when.

The codes are the ones docs/protocol.md documents: ServerNotInitialized (-32002) for a newer method before
initialize, InvalidRequest (-32600) for a second initialize, a shutdown twice or any request after shutdown,
UnsupportedProtocolVersion (-32009), ServerBusy (-32010). Each refusal changes nothing: the session keeps its
phase and what initialize set, and no run row is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from segue._support.resources import package_version
from segue.apps.protocol.framing import MAX_BODY_BYTES
from segue.generated.protocol_methods import METHODS
from segue.store import RunStore
from tests._support.protocol_harness import (
    LIST_TABLES_CLIENT,
    StdioClient,
    answer_list_tables,
    stdio_server,
    twin_agent,
)

DESCRIBE = {"name": "describe_table", "python": "segue.demo.shop_db:describe_table"}
RUN_QUERY = {"name": "run_query", "python": "segue.demo.shop_db:run_query"}
TOOLS = [LIST_TABLES_CLIENT, DESCRIBE, RUN_QUERY]
INITIALIZE = {"protocol_version": "1.1", "client_info": {"name": "pytest", "version": "1"}}


def config_file(tmp_path: Path, **top: Any) -> Path:
    path = tmp_path / "agents.json"
    path.write_text(json.dumps({"agents": [twin_agent(TOOLS)], **top}))
    return path


def notify(client: StdioClient, method: str, params: Any = None) -> None:
    client.send({"jsonrpc": "2.0", "method": method, **({} if params is None else {"params": params})})


def code_of(answer: dict[str, Any]) -> int:
    assert "error" in answer, answer
    code: int = answer["error"]["code"]
    return code


def read_until(client: StdioClient, seen: list[dict[str, Any]], done: Callable[[list[dict[str, Any]]], bool]) -> None:
    """Read messages into `seen` until `done(seen)`."""
    while not done(seen):
        seen.append(client.next_message())


def response_to(seen: list[dict[str, Any]], request_id: Any) -> dict[str, Any] | None:
    return next((m for m in seen if m.get("id") == request_id and "method" not in m), None)


def stored_runs(tmp_path: Path) -> list[str]:
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        return [r.run_id for r in store.list_runs()]
    finally:
        store.close()


def test_initialize_says_what_the_server_is_and_what_the_session_may_do(tmp_path: Path) -> None:
    with stdio_server(config_file(tmp_path, max_concurrent_runs=3)) as client:
        answer = client.call("initialize", {**INITIALIZE, "capabilities": {"client_tools": True}})
        result = answer["result"]
        assert result["protocol_version"] == "1.1"
        assert result["server_info"] == {"name": "segue", "version": package_version()}
        capabilities = result["capabilities"]
        from_client = [n for n, m in METHODS.items() if m.direction in ("clientToServer", "both")]
        # A 1.1 session is offered 1.1's methods, and no feature whose method is newer.
        assert capabilities["methods"] == [n for n in from_client if METHODS[n].since in ("1.0", "1.1")]
        assert "prewarm" not in capabilities["methods"] and capabilities["features"] == []
        assert capabilities["notifications"] == ["$/cancelRequest", "run/event"]
        assert capabilities["server_requests"] == ["tool/call"]
        assert (capabilities["transport"], capabilities["tool_calls"]) == ("stdio", "request")
        assert (capabilities["tenants"], capabilities["default_tenant"]) == (["*"], "default")
        assert capabilities["limits"] == {
            "max_message_bytes": MAX_BODY_BYTES,
            "max_concurrent_runs": 3,
            "shutdown_timeout_seconds": 10.0,
        }
        assert "run_events" not in capabilities, "no filter asked for: every event type is sent"
        # LSP clients send `initialized` next: taken quietly, no answer.
        notify(client, "initialized", {})
        assert client.call("agents/list", {})["result"]["agents"][0]["name"] == "analyst"
        notify(client, "exit")
        assert client.proc.wait(timeout=30) == 1, "exit without shutdown: code 1, as LSP says"
    assert not [line for line in client.stderr if "ignoring" in line], client.stderr


def test_versions_are_negotiated_within_the_major_version(tmp_path: Path) -> None:
    with stdio_server(config_file(tmp_path)) as client:
        for asked in ("2.0", "0.9", "1.0"):
            refused = client.call("initialize", {"protocol_version": asked})
            assert code_of(refused) == -32009, refused
            assert refused["error"]["data"] == {"requested": asked, "supported": ["1.1", "1.2"]}
            assert f"initialize asked for protocol {asked}" in refused["error"]["message"]
            # Nothing changed: the session is still uninitialized.
            assert code_of(client.call("agents/list", {})) == -32002
        # A later minor version of the same major: the server answers with what it speaks.
        assert client.call("initialize", {"protocol_version": "1.7"})["result"]["protocol_version"] == "1.2"
        assert client.call("agents/list", {})["result"]["agents"]


def test_bad_lifecycle_input_gets_the_documented_codes_and_changes_nothing(tmp_path: Path) -> None:
    with stdio_server(config_file(tmp_path)) as client:
        before = client.call("agents/get", {"agent": "analyst"})
        assert code_of(before) == -32002
        assert before["error"]["message"].startswith("server not initialized: send initialize first")
        assert code_of(client.call("shutdown", {})) == -32002, "shutdown is a request like any other"

        ready = client.call("initialize", {**INITIALIZE, "capabilities": {"client_tools": False}})
        assert ready["result"]["capabilities"]["tool_calls"] == "resume"
        again = client.call("initialize", {**INITIALIZE, "capabilities": {"client_tools": True}})
        assert code_of(again) == -32600 and "initialize was already answered" in again["error"]["message"]
        # The second initialize changed nothing: client-side tools still pause instead of asking the client.
        paused = client.call("run", {"agent": "analyst", "input": "Which tables are there?"})  # no tool/call
        assert paused["result"]["result"]["status"] == "waiting_approval"
        assert paused["result"]["pending"][0]["client_tool"] is True

        down = client.call("shutdown", {})
        assert down["result"] == {"requests": []}
        twice = client.call("shutdown", {})
        assert code_of(twice) == -32600 and "shutdown was already requested" in twice["error"]["message"]
        late = client.call("run", {"agent": "analyst", "input": "How many orders are there?"})
        assert code_of(late) == -32600 and "the session is shut down" in late["error"]["message"]
        assert code_of(client.call("runs/list", {})) == -32600
        assert stored_runs(tmp_path) == [paused["result"]["result"]["run_id"]], "no run was started after shutdown"
        notify(client, "exit")
        assert client.proc.wait(timeout=30) == 0


def test_shutdown_lets_runs_in_flight_finish_then_cancels_the_rest(tmp_path: Path) -> None:
    with stdio_server(config_file(tmp_path)) as client:
        client.call("initialize", INITIALIZE)
        finishing = client.request("run", {"agent": "analyst", "input": "Which tables are there?"})
        stuck = client.request("run", {"agent": "analyst", "input": "Which tables are there?"})
        seen: list[dict[str, Any]] = []

        def asks(messages: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
            return {m["params"]["request_id"]: m for m in messages if m.get("method") == "tool/call"}

        read_until(client, seen, lambda s: len(asks(s)) == 2)
        shutdown = client.request("shutdown", {"timeout_seconds": 2})
        refused = client.request("run", {"agent": "analyst", "input": "How many orders are there?"})
        # The first run gets its tool result after shutdown began: it may still finish.
        client.send({"jsonrpc": "2.0", "id": asks(seen)[finishing]["id"], **answer_list_tables(asks(seen)[finishing])})
        read_until(client, seen, lambda s: response_to(s, shutdown) is not None)

        assert code_of(response_to(seen, refused) or {}) == -32600, "shutting down: no new work"
        done = response_to(seen, finishing)
        assert done is not None and done["result"]["result"]["status"] == "success"
        cancelled = response_to(seen, stuck)
        assert cancelled is not None and code_of(cancelled) == -32800
        # The server stopped waiting for the stuck run's tool and told the client so.
        cancel_ids = [m["params"]["id"] for m in seen if m.get("method") == "$/cancelRequest"]
        assert cancel_ids == [asks(seen)[stuck]["id"]]
        last = [m["params"]["event"] for m in seen if m.get("method") == "run/event"]
        stuck_run = next(
            e["run_id"]
            for e in last
            if e["type"] == "RUN_STARTED" and e["run_id"] != done["result"]["result"]["run_id"]
        )
        terminal = [e for e in last if e["run_id"] == stuck_run and e["type"] in ("RUN_COMPLETED", "RUN_ERROR")]
        assert [(e["type"], e["result"]["status"]) for e in terminal] == [("RUN_ERROR", "cancelled")]

        report = (response_to(seen, shutdown) or {})["result"]["requests"]
        assert report == [
            {
                "id": finishing,
                "method": "run",
                "agent": "analyst",
                "run_id": done["result"]["result"]["run_id"],
                "outcome": "finished",
                "status": "success",
            },
            {
                "id": stuck,
                "method": "run",
                "agent": "analyst",
                "run_id": stuck_run,
                "outcome": "cancelled",
                "status": "cancelled",
            },
        ]
        notify(client, "exit")
        assert client.proc.wait(timeout=30) == 0
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        assert {r.run_id: r.status for r in store.list_runs()} == {
            done["result"]["result"]["run_id"]: "success",
            stuck_run: "cancelled",
        }
    finally:
        store.close()


def test_a_session_that_never_initializes_speaks_protocol_1_0(tmp_path: Path) -> None:
    """The compatibility rule: 1.0's methods are served as 1.0 served them, with 1.0's codes (IdempotencyConflict
    was -32002 then); the same conflict after initialize carries 1.1's code."""
    with stdio_server(config_file(tmp_path)) as client:
        first = {"agent": "analyst", "input": "How many orders are there?", "idempotency_key": "k1"}
        assert client.call("run", first, answer_list_tables)["result"]["result"]["status"] == "success"
        conflict = client.call("run", {**first, "input": "Something else"})
        assert code_of(conflict) == -32002 and conflict["error"]["data"] == {"idempotency_key": "k1"}
        client.call("initialize", INITIALIZE)
        conflict = client.call("run", {**first, "input": "Something else"})
        assert code_of(conflict) == -32008 and conflict["error"]["data"] == {"idempotency_key": "k1"}


def test_the_client_chooses_which_run_events_it_receives(tmp_path: Path) -> None:
    with stdio_server(config_file(tmp_path)) as client:
        wanted = ["TOOL_CALL", "RUN_COMPLETED"]
        answer = client.call("initialize", {**INITIALIZE, "capabilities": {"run_events": {"types": wanted}}})
        assert answer["result"]["capabilities"]["run_events"] == {"types": wanted}
        request_id = client.request("run", {"agent": "analyst", "input": "How many orders are there?"})
        assert client.response(request_id, answer_list_tables)["result"]["result"]["status"] == "success"
        assert [e["type"] for e in client.events(request_id)] == ["TOOL_CALL"] * 3 + ["RUN_COMPLETED"]


def test_client_tools_pause_for_a_client_that_answers_no_tool_call(tmp_path: Path) -> None:
    with stdio_server(config_file(tmp_path)) as client:
        answer = client.call("initialize", {**INITIALIZE, "capabilities": {"client_tools": False}})
        assert answer["result"]["capabilities"]["server_requests"] == []
        paused = client.call("run", {"agent": "analyst", "input": "How many orders are there?"})  # never asked
        call = paused["result"]["pending"][0]["call"]
        tables = json.dumps(["customers", "order_items", "orders", "products"])
        resumed = client.call(
            "resume",
            {
                "agent": "analyst",
                "run_id": paused["result"]["result"]["run_id"],
                "tool_results": [{"call_id": call["id"], "content": tables}],
            },
        )
        assert resumed["result"]["result"]["status"] == "success"
        assert resumed["result"]["result"]["answer"] == "Orders:\n- orders: 220"


def test_max_concurrent_runs_refuses_runs_beyond_it_before_anything_is_written(tmp_path: Path) -> None:
    with stdio_server(config_file(tmp_path, max_concurrent_runs=1)) as client:
        client.call("initialize", INITIALIZE)
        first = client.request("run", {"agent": "analyst", "input": "Which tables are there?"})
        seen: list[dict[str, Any]] = []
        read_until(client, seen, lambda s: any(m.get("method") == "tool/call" for m in s))
        busy = client.call("run", {"agent": "analyst", "input": "How many orders are there?"})
        assert code_of(busy) == -32010 and busy["error"]["data"] == {"max_concurrent_runs": 1}
        assert "max_concurrent_runs" in busy["error"]["message"]
        # Reads are not runs: they are served meanwhile.
        assert client.call("agents/list", {})["result"]["agents"]
        ask = next(m for m in seen if m.get("method") == "tool/call")
        client.send({"jsonrpc": "2.0", "id": ask["id"], **answer_list_tables(ask)})
        assert client.response(first)["result"]["result"]["status"] == "success"
        # The slot is free again.
        again = client.call("run", {"agent": "analyst", "input": "How many orders are there?"}, answer_list_tables)
        assert again["result"]["result"]["status"] == "success"
    assert len(stored_runs(tmp_path)) == 2, "the refused run wrote nothing"
