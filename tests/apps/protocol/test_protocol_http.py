"""`segue serve --http`: POST /rpc for requests, GET /events (server-sent events) for run/event notifications.

The server cannot call an HTTP client back, so a client-side tool pauses the run (waiting_approval, with the
pending call in the response) and the client sends the result with `resume`.
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path

from segue.demo import shop_db as sample_db
from tests._support import warm_cli
from tests._support.protocol_harness import LIST_TABLES_CLIENT, serve_command, twin_agent, write_config
from tests._support.protocol_http import DESCRIBE, RUN_QUERY, Events, http_server, post


def test_client_tools_pause_and_resume_over_http_with_events(tmp_path: Path) -> None:
    config = write_config(tmp_path / "agents.json", [twin_agent([LIST_TABLES_CLIENT, DESCRIBE, RUN_QUERY])])
    with http_server(config) as address:
        events = Events(address, "s1")
        bystander = Events(address, "s2")
        try:
            run = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "run",
                "params": {"agent": "analyst", "input": "How many orders?"},
            }
            status, paused = post(address, run, session="s1")
            assert status == 200 and paused["id"] == 1
            result = paused["result"]
            assert result["result"]["status"] == "waiting_approval"
            assert len(result["pending"]) == 1 and result["pending"][0]["client_tool"] is True
            call = result["pending"][0]["call"]
            assert call["name"] == "list_tables"
            first = events.until(1, "RUN_PAUSED")
            assert first[0]["type"] == "RUN_STARTED" and first[-1]["meta"]["pending"] == [call["id"]]

            resume = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "resume",
                "params": {
                    "agent": "analyst",
                    "run_id": result["result"]["run_id"],
                    "tool_results": [{"call_id": call["id"], "content": json.dumps(sample_db.list_tables())}],
                },
            }
            status, done = post(address, resume, session="s1")
            assert status == 200
            assert done["result"]["result"]["status"] == "success"
            assert done["result"]["result"]["answer"] == "Orders:\n- orders: 220"
            second = events.until(2, "RUN_COMPLETED")
            assert [e["tool_call"]["name"] for e in second if e["type"] == "TOOL_CALL"] == [
                "list_tables",
                "describe_table",
                "run_query",
            ]
            assert bystander.items.empty(), "another session sees none of these events"

            status, listed = post(address, {"jsonrpc": "2.0", "id": 3, "method": "runs/list", "params": {}})
            assert [r["status"] for r in listed["result"]["runs"]] == ["success"]
        finally:
            events.close()
            bystander.close()


def test_http_errors(tmp_path: Path) -> None:
    config = write_config(tmp_path / "agents.json", [twin_agent([LIST_TABLES_CLIENT])])
    with http_server(config) as address:
        status, parse = post(address, b"{nope")
        assert status == 200 and parse["error"]["code"] == -32700 and parse["id"] is None
        status, unknown = post(address, {"jsonrpc": "2.0", "id": 9, "method": "runs/delete"})
        assert status == 200 and unknown["error"]["code"] == -32601
        status, invalid = post(address, {"jsonrpc": "2.0", "id": 10, "method": "run", "params": {"agent": "analyst"}})
        assert invalid["error"]["code"] == -32602 and "'input' is a required property" in invalid["error"]["message"]
        status, nothing = post(address, {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 99}})
        assert status == 204 and nothing is None
        status, error = post(
            address, {"jsonrpc": "2.0", "id": 11, "method": "runs/list"}, headers={"Content-Type": "text/plain"}
        )
        assert status == 415 and "application/json" in error["error"]
        status, error = post(
            address, {"jsonrpc": "2.0", "id": 12, "method": "runs/list"}, headers={"Host": "evil.example:80"}
        )
        assert status == 421 and "not a loopback name" in error["error"]

        conn = http.client.HTTPConnection(*address, timeout=10)
        conn.request("GET", "/rpc")
        answer = conn.getresponse()
        assert answer.status == 405 and answer.getheader("Allow") == "POST"
        conn.close()
        conn = http.client.HTTPConnection(*address, timeout=10)
        conn.request("GET", "/nowhere")
        answer = conn.getresponse()
        assert answer.status == 404 and "POST /rpc" in json.loads(answer.read())["error"]
        conn.close()
        # Still serving after all of that.
        status, listed = post(address, {"jsonrpc": "2.0", "id": 13, "method": "runs/list", "params": {}})
        assert status == 200 and listed == {"jsonrpc": "2.0", "id": 13, "result": {"runs": []}}


def test_a_taken_port_is_a_one_line_error(tmp_path: Path) -> None:
    config = write_config(tmp_path / "agents.json", [twin_agent([])])
    with http_server(config) as (_, port):
        taken = warm_cli.run(
            serve_command(config, "--http", "--port", str(port)), capture_output=True, text=True, timeout=60
        )
    assert taken.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in taken.stderr
