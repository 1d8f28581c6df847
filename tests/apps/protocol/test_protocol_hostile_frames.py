"""More hostile input to `segue serve --stdio` (issue 24): a `null` body (N4), a request and its cancellation in
one write (N7), and schemas or answers nested past the limit or pointing outside themselves (N2, N10)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from segue._core.json_schema import MAX_NESTING
from tests._support.protocol_harness import (
    LIST,
    LIST_TABLES_CLIENT,
    answer,
    answer_list_tables,
    frame,
    scripted_agent,
    stdio_server,
    twin_agent,
    write_config,
)


def test_a_null_body_is_an_invalid_request_and_the_session_goes_on(tmp_path: Path) -> None:
    """N4: `null` was read as the end of input: the run held at tool/call was told the client is gone, exit 0."""
    config = write_config(tmp_path / "agents.json", [twin_agent([LIST_TABLES_CLIENT])])
    with stdio_server(config) as client:
        run_id = client.request("run", {"agent": "analyst", "input": "Which tables are there?"})
        while "id" not in (message := client.next_message()) or message.get("method") != "tool/call":
            client.notifications.append(message)
        for body in (b"null", b"5", b'"str"', b"true"):
            client.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            refused = client.next_message()
            assert refused["id"] is None and refused["error"]["code"] == -32600, (body, refused)
        client.send({"jsonrpc": "2.0", "id": message["id"], **answer_list_tables(message)})
        done = client.response(run_id)
        assert done["result"]["result"]["status"] == "success", done
        client.send({**LIST, "id": 50})
        assert client.next_message()["id"] == 50
        assert client.close() == 0


def test_a_request_cancelled_in_the_same_write_still_gets_its_answer(tmp_path: Path) -> None:
    """N7: a task cancelled before its first step never ran its body: no answer (20 of 20), id stuck in flight."""
    config = write_config(tmp_path / "agents.json", [twin_agent([])])
    with stdio_server(config) as client:
        for i in range(20):
            request = {"jsonrpc": "2.0", "id": i, "method": "run", "params": {"agent": "analyst", "input": "hi"}}
            cancel = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": i}}
            client.send_raw(frame(request) + frame(cancel))
            reply = client.response(i)
            assert reply["error"]["code"] == -32800, reply
            assert reply["error"]["message"] == f"request {i} was cancelled"
        # The ids are free again: the same id gets its result.
        client.send({**LIST, "id": 0})
        listed = client.next_message()
        assert listed["id"] == 0 and listed["result"]["runs"] == [], listed  # nothing of a cancelled run was written
        assert client.close() == 0


def deep(levels: int, leaf: Any = "v") -> str:
    return '{"c":' * levels + json.dumps(leaf) + "}" * levels


def test_schemas_and_answers_past_the_limit_are_clear_errors_without_tracebacks(tmp_path: Path) -> None:
    """N2 and N10 over the protocol: -32603 with a traceback on stderr, or a fetch of the $ref's URL."""
    replies = [answer(deep(990)), answer(deep(990))]
    agent = scripted_agent(replies, [], name="deep")
    config = write_config(tmp_path / "agents.json", [agent])
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        schema = {"type": "object", "properties": {"c": schema}}
    with stdio_server(config) as client:
        refused = {
            "points at nothing in the schema": {"type": "object", "properties": {"x": {"$ref": "#/$defs/gone"}}},
            "points outside the schema": {"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/"}}},
            f"nests deeper than {MAX_NESTING} levels": schema,
            # Issue 35 R3: a oneOf of two references to the next link, 18 links: 85 s per check on main.
            "segue._core.schema_work.MAX_APPLICATIONS": {
                "type": "object",
                "$defs": {f"l{i}": {"oneOf": [{"$ref": f"#/$defs/l{i - 1}"}] * 2} for i in range(1, 19)}
                | {"l0": {"type": "object"}},
                "$ref": "#/$defs/l18",
            },
        }
        for message, output_type in refused.items():
            reply = client.call("run", {"agent": "deep", "input": "hi", "output_type": output_type})
            assert reply["error"]["code"] == -32003 and message in reply["error"]["message"], reply
        reply = client.call("run", {"agent": "deep", "input": "hi", "output_type": {"type": "object"}})
        result = reply["result"]["result"]
        assert result["status"] == "error" and f"nests deeper than {MAX_NESTING} levels" in result["error"], reply
        assert client.close() == 0
    assert "Traceback" not in "".join(client.stderr), client.stderr


def test_hostile_model_settings_are_refused_naming_them_without_tracebacks(tmp_path: Path) -> None:
    """Issue 35 R9 over the protocol: Python's JSON reader takes `Infinity` and `NaN`, so `"temperature": Infinity`
    reached the run and came back as -32603 with a traceback on stderr, NaN as a ClassValidationError naming no
    field; 10**30 as max_tokens or seed was sent."""
    agent = scripted_agent([answer("never sent")], [], name="settings")
    config = write_config(tmp_path / "agents.json", [agent])
    not_json = "is not a JSON number (RFC 8259 has no NaN or Infinity); send a finite number"
    hostile = {
        f"/model_settings/temperature: Infinity {not_json}": (-32602, {"temperature": float("inf")}),
        f"/model_settings/temperature: NaN {not_json}": (-32602, {"temperature": float("nan")}),
        # The schema says JSON's exact range (ModelSettings' maximum), so the protocol refuses it as invalid params,
        # as it refuses max_tokens=0 (the schema's minimum), before the run is asked.
        "/model_settings/max_tokens: 1000000000000000000000000000000 is greater than the maximum of 9007199254740991": (
            -32602,
            {"max_tokens": 10**30},
        ),
        "/model_settings/seed: 1000000000000000000000000000000 is greater than the maximum": (-32602, {"seed": 10**30}),
    }
    with stdio_server(config) as client:
        for message, (code, settings) in hostile.items():
            reply = client.call("run", {"agent": "settings", "input": "hi", "model_settings": settings})
            assert reply["error"]["code"] == code and message in reply["error"]["message"], reply
        client.send({**LIST, "id": 99})
        assert client.next_message()["result"]["runs"] == []  # nothing written
        assert client.close() == 0
    assert "Traceback" not in "".join(client.stderr), client.stderr
