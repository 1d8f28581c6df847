"""`segue serve --stdio`: a replayed conversation driven through the protocol only, with the twin as the model.

The twin's DatabaseChatPolicy calls list_tables / describe_table / run_query only for facts missing from its
context, so which tools each turn calls shows what the replay put in front of it. Here list_tables is a
client-side tool (answered by this test over `tool/call`), describe_table a Python tool and run_query an HTTP
callback to a loopback server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from segue.generated import RunDetail, get_converter
from segue.generated.protocol import RunResponse
from segue.store import RunStore
from tests._support.protocol_harness import (
    LIST_TABLES_CLIENT,
    StdioClient,
    answer_list_tables,
    stdio_server,
    tool_server,
    twin_agent,
    write_config,
)

DESCRIBE_PYTHON = {"name": "describe_table", "python": "segue.demo.shop_db:describe_table"}
RUN_QUERY_PARAMS = {
    "type": "object",
    "properties": {"sql": {"type": "string"}},
    "required": ["sql"],
    "additionalProperties": False,
}


def no_client_calls(message: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError(f"the replayed turn must not ask the client anything, got {message}")


def result_of(response: dict[str, Any]) -> RunResponse:
    assert "error" not in response, response
    parsed: RunResponse = get_converter().structure(response["result"], RunResponse)
    return parsed


def test_three_turn_replayed_conversation_over_stdio(tmp_path: Path) -> None:
    with tool_server() as (url, callback_calls):
        run_query = {"name": "run_query", "description": "Run one SELECT.", "parameters": RUN_QUERY_PARAMS, "url": url}
        config = write_config(tmp_path / "agents.json", [twin_agent([LIST_TABLES_CLIENT, DESCRIBE_PYTHON, run_query])])
        with stdio_server(config) as client:
            tool_calls: list[dict[str, Any]] = []

            def client_tool(message: dict[str, Any]) -> dict[str, Any]:
                tool_calls.append(message["params"])
                return answer_list_tables(message)

            first_id = client.request("run", {"agent": "analyst", "input": "Which tables are there?"})
            first = result_of(client.response(first_id, client_tool))
            assert first.result.status == "success"
            assert first.result.answer == "The database has 4 tables: customers, order_items, orders, products."
            assert [c["call"]["name"] for c in tool_calls] == ["list_tables"]
            assert tool_calls[0]["run_id"] == first.result.run_id
            assert tool_calls[0]["request_id"] == first_id and tool_calls[0]["agent"] == "analyst"

            events = client.events(first_id)
            kinds = [e["type"] for e in events]
            assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_COMPLETED"
            assert {"TOOL_CALL", "TOOL_RESULT", "TEXT_DELTA"} <= set(kinds)
            assert "".join(e["text"] for e in events if e["type"] == "TEXT_DELTA") == first.result.answer
            assert events[-1]["result"] == get_converter().unstructure(first.result)

            # Turn 2 replays turn 1: the table list is in context, so nobody asks the client for it again.
            second_id = client.request(
                "run",
                {
                    "agent": "analyst",
                    "input": "How many customers per country?",
                    "runs": [first.result.run_id],
                    "replay_last": "all",
                },
            )
            second = result_of(client.response(second_id, no_client_calls))
            assert second.result.status == "success"
            assert second.result.answer is not None and second.result.answer.startswith("Customers per country:")
            assert second.result.replay is not None and second.result.replay.runs_full == [first.result.run_id]
            assert [c["name"] for c in callback_calls] == ["run_query"]
            assert callback_calls[0]["run_id"] == second.result.run_id and callback_calls[0]["call_id"]

            third_id = client.request(
                "run",
                {
                    "agent": "analyst",
                    "input": "How many orders are there?",
                    "runs": [first.result.run_id, second.result.run_id],
                    "replay_last": "all",
                    "events": False,
                },
            )
            third = result_of(client.response(third_id, no_client_calls))
            assert third.result.answer == "Orders:\n- orders: 220"
            assert client.events(third_id) == [], "events: false sends no run/event notifications"

            missing = "01J9Z3M6Q2W8X4Y7T5R1N0P3K6"
            bad = client.call(
                "run",
                {"agent": "analyst", "input": "And now?", "runs": [third.result.run_id, missing], "replay_last": "all"},
            )
            assert bad["error"]["code"] == -32001
            assert bad["error"]["data"] == {"reason": "not_found", "run_id": missing}
            assert missing in bad["error"]["message"]

            listed = client.call("runs/list", {"agent_name": "analyst"})["result"]["runs"]
            assert [r["run_id"] for r in listed] == [third.result.run_id, second.result.run_id, first.result.run_id]
            assert listed[0]["continued_from"] == second.result.run_id
            detail: RunDetail = get_converter().structure(
                client.call("runs/get", {"run_id": third.result.run_id})["result"]["run"], RunDetail
            )
            assert detail.replay is not None and detail.replay.runs_full == [first.result.run_id, second.result.run_id]
            assert [t.name for t in detail.tool_calls] == ["describe_table", "run_query"]
            assert client.close() == 0
    # The runs are in the configured store (relative to the config file), as an app in Python would see them.
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        assert [r.run_id for r in store.list_runs()] == [third.result.run_id, second.result.run_id, first.result.run_id]
    finally:
        store.close()


def test_runs_get_retry_idempotency_and_catalog(tmp_path: Path) -> None:
    tools = [LIST_TABLES_CLIENT, DESCRIBE_PYTHON, {"name": "run_query", "python": "segue.demo.shop_db:run_query"}]
    config = write_config(tmp_path / "agents.json", [twin_agent(tools)])
    with stdio_server(config) as client:
        params = {"agent": "analyst", "input": "Which tables are there?", "idempotency_key": "k-1", "tenant_id": "acme"}
        first = result_of(client.call("run", params, answer_list_tables))
        again = result_of(client.call("run", params, no_client_calls))
        assert again.result.run_id == first.result.run_id, "the same key and request return the first run"
        conflict = client.call("run", {**params, "input": "Something else?"})
        assert conflict["error"]["code"] == -32002
        assert conflict["error"]["data"] == {"idempotency_key": "k-1"}

        retried = result_of(
            client.call(
                "retry", {"agent": "analyst", "run_id": first.result.run_id, "tenant_id": "acme"}, answer_list_tables
            )
        )
        assert retried.result.run_id != first.result.run_id and retried.result.status == "success"
        assert (
            client.call("runs/get", {"run_id": retried.result.run_id, "tenant_id": "acme"})["result"]["run"]["retry_of"]
            == first.result.run_id
        )

        other_tenant = client.call("runs/get", {"run_id": first.result.run_id})
        assert other_tenant["error"]["code"] == -32005
        assert other_tenant["error"]["data"] == {"run_id": first.result.run_id}
        assert client.call("runs/list", {})["result"] == {"runs": []}, "the default tenant sees none of acme's runs"
        unknown_retry = client.call("retry", {"agent": "analyst", "run_id": "nope"})
        assert unknown_retry["error"]["code"] == -32003 and "nope" in unknown_retry["error"]["message"]

        explained = client.call("catalog/explain", {"model": "claude-sonnet-4-6", "vendor": "anthropic"})["result"]
        assert explained["label"] == "claude-sonnet-4-6@anthropic"
        assert explained["keys"] and all(k["file"] and k["layer"] for k in explained["keys"])
        assert "note" not in explained, "a listed path needs no note"
        unlisted = client.call("catalog/explain", {"model": "no-such-model", "vendor": "openai"})["result"]
        assert unlisted["label"] == "no-such-model@openai", "a model the catalog does not list: the vendor's defaults"
        assert unlisted["layers"] == ["model type llm (default)", "vendor openai model_defaults"]
        assert unlisted["note"].startswith("not in the catalog: from the vendor's defaults")
        unknown = client.call("catalog/explain", {"model": "no-such-model", "vendor": "no-such-vendor"})
        assert unknown["error"]["code"] == -32006 and "no-such-vendor" in unknown["error"]["message"]
        assert client.close() == 0


def test_a_tool_needing_approval_pauses_and_resumes_over_stdio(tmp_path: Path) -> None:
    guarded = {"name": "run_query", "python": "segue.demo.shop_db:run_query", "requires_approval": True}
    config = write_config(tmp_path / "agents.json", [twin_agent([LIST_TABLES_CLIENT, DESCRIBE_PYTHON, guarded])])
    with stdio_server(config) as client:
        paused = result_of(client.call("run", {"agent": "analyst", "input": "How many orders?"}, answer_list_tables))
        assert paused.result.status == "waiting_approval"
        assert paused.pending is not None and len(paused.pending) == 1
        call = paused.pending[0]
        assert call.call.name == "run_query" and call.client_tool is False
        resume_id = client.request(
            "resume",
            {
                "agent": "analyst",
                "run_id": paused.result.run_id,
                "decisions": [{"call_id": call.call.id, "approved": True}],
            },
        )
        done = result_of(client.response(resume_id))
        assert done.result.status == "success" and done.result.answer == "Orders:\n- orders: 220"
        assert [e["type"] for e in client.events(resume_id)][-1] == "RUN_COMPLETED"
        both = client.call(
            "resume", {"agent": "analyst", "run_id": paused.result.run_id, "approved": True, "decisions": []}
        )
        assert both["error"]["code"] == -32602 and both["error"]["data"]["errors"][0]["pointer"] == "/decisions"
        not_paused = client.call("resume", {"agent": "analyst", "run_id": paused.result.run_id})
        assert not_paused["error"]["code"] == -32003 and "not waiting_approval" in not_paused["error"]["message"]
        # Issue 36: run/recover (protocol 1.2: a session that initialized with it) continues only a running run
        # whose lease lapsed; a finished one is refused.
        assert "result" in client.call("initialize", {"protocol_version": "1.2"})
        finished = client.call("run/recover", {"agent": "analyst", "run_id": paused.result.run_id})
        assert finished["error"]["code"] == -32003 and finished["error"]["data"]["reason"] == "not_lapsed"
        assert f"run {paused.result.run_id} is success, not running" in finished["error"]["message"]
        # A process that died during the run's final write: the answer is journaled, the end is not.
        store = RunStore(f"sqlite:///{tmp_path}/runs.db")
        lapsed = "UPDATE agent_runs SET status = 'running', lease_expires_at = 1 WHERE id = ?"
        store.db.execute_sql(lapsed, (paused.result.run_id,))
        store.close()
        recover_id = client.request("run/recover", {"agent": "analyst", "run_id": paused.result.run_id})
        recovered = result_of(client.response(recover_id))
        assert recovered.result.run_id == paused.result.run_id and recovered.result.status == "success"
        assert recovered.result.answer == "Orders:\n- orders: 220"
        events = client.events(recover_id)
        assert events[0]["type"] == "RUN_STARTED" and events[0]["meta"]["recovered"] is True
        assert events[-1]["type"] == "RUN_COMPLETED"
        assert client.close() == 0


def test_client_tool_errors_and_a_client_without_handler_become_error_results(tmp_path: Path) -> None:
    config = write_config(tmp_path / "agents.json", [twin_agent([LIST_TABLES_CLIENT])])
    with stdio_server(config) as client:
        failed = result_of(
            client.call(
                "run",
                {"agent": "analyst", "input": "Which tables are there?"},
                lambda m: {"result": {"content": "the catalog is offline", "is_error": True}},
            )
        )
        assert failed.result.status == "success"
        detail = client.call("runs/get", {"run_id": failed.result.run_id})["result"]["run"]
        assert detail["tool_calls"][0]["is_error"] is True
        assert "the catalog is offline" in detail["tool_calls"][0]["result"]

        refused = result_of(
            client.call(
                "run",
                {"agent": "analyst", "input": "Which tables are there?"},
                lambda m: {"error": {"code": -32601, "message": "this client does not handle tool/call"}},
            )
        )
        detail = client.call("runs/get", {"run_id": refused.result.run_id})["result"]["run"]
        assert "does not handle tool/call" in detail["tool_calls"][0]["result"]

        malformed = result_of(
            client.call(
                "run", {"agent": "analyst", "input": "Which tables are there?"}, lambda m: {"result": {"text": 1}}
            )
        )
        detail = client.call("runs/get", {"run_id": malformed.result.run_id})["result"]["run"]
        assert "invalid result" in detail["tool_calls"][0]["result"]
        assert client.close() == 0


@pytest.mark.parametrize("answer_first", [True, False])
def test_request_ids_in_flight_and_cancellation(tmp_path: Path, answer_first: bool) -> None:
    config = write_config(tmp_path / "agents.json", [twin_agent([LIST_TABLES_CLIENT])])
    with stdio_server(config) as client:
        client.request("run", {"agent": "analyst", "input": "Which tables are there?"}, id="conv-1")
        tool_call = client.next_message()
        while "id" not in tool_call:  # run/event notifications come first
            tool_call = client.next_message()
        assert tool_call["method"] == "tool/call"
        run_id = tool_call["params"]["run_id"]

        client.request("runs/list", {}, id="conv-1")
        reused = client.next_message()
        assert reused["id"] == "conv-1" and reused["error"]["code"] == -32004
        assert reused["error"]["data"] == {"id": "conv-1"}

        if answer_first:
            client.send({"jsonrpc": "2.0", "id": tool_call["id"], **answer_list_tables(tool_call)})
            done = client.response("conv-1")
            assert done["result"]["result"]["status"] == "success"
        else:
            client.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "conv-1"}})
            cancelled = client.response("conv-1")
            assert cancelled["error"]["code"] == -32800 and run_id in cancelled["error"]["message"]
            status = client.call("runs/get", {"run_id": run_id})["result"]["run"]["status"]
            assert status == "cancelled"
        # The id is free again once its request has finished.
        again = client.response(client.request("runs/list", {}, id="conv-1"))
        assert "result" in again
        assert client.close() == 0


def test_end_of_input_lets_runs_in_flight_finish(tmp_path: Path) -> None:
    config = write_config(tmp_path / "agents.json", [twin_agent([DESCRIBE_PYTHON])])
    client = StdioClient(config)
    try:
        request_id = client.request("run", {"agent": "analyst", "input": "How many orders?"})
        assert client.proc.stdin is not None
        client.proc.stdin.close()
        answer = client.response(request_id)
        # Without list_tables the twin says it cannot look it up: a complete run, answered after stdin closed.
        assert answer["result"]["result"]["status"] == "success"
        assert client.proc.wait(timeout=30) == 0
    finally:
        client.kill()
