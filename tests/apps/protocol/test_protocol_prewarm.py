"""`prewarm` over the protocol (stdio and HTTP): Agent.prewarm with the params of the next `run`, its errors, and
the `prewarm` feature in the initialize result (protocol 1.2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from segue.store import RunStore
from tests._support.protocol_harness import stdio_server, twin_agent
from tests._support.protocol_http import http_server, post

TOOLS = [
    {"name": "list_tables", "python": "segue.demo.shop_db:list_tables"},
    {"name": "describe_table", "python": "segue.demo.shop_db:describe_table"},
    {"name": "run_query", "python": "segue.demo.shop_db:run_query"},
]
SCRIPTED = {
    "name": "bot",
    "provider": {"kind": "scripted", "model": "scripted-1", "replies": []},
    "store": "sqlite:///runs.db",
}
UNKNOWN_RUN = "01J9Z3M6Q2W8X4Y7T5R1N0P3K6"


def config(tmp_path: Path) -> Path:
    path = tmp_path / "agents.json"
    path.write_text(json.dumps({"agents": [twin_agent(TOOLS), SCRIPTED]}))
    return path


def result(answer: dict[str, Any]) -> Any:
    assert "result" in answer, answer
    return answer["result"]


def error(answer: dict[str, Any]) -> dict[str, Any]:
    assert "error" in answer, answer
    found: dict[str, Any] = answer["error"]
    return found


def check_prewarm_flow(call: Any, tmp_path: Path) -> None:
    """The same conversation on either transport: a run, a prewarm of its next turn, that turn, the refusals."""
    first = result(call("run", {"agent": "analyst", "input": "Which tables are there?", "tenant_id": "acme"}))
    run_id = first["result"]["run_id"]
    warm = result(call("prewarm", {"agent": "analyst", "runs": [run_id], "replay_last": "all", "tenant_id": "acme"}))
    warmed = warm["result"]
    assert (warmed["vendor"], warmed["model"], warmed["runs"]) == ("anthropic", "claude-sonnet-4-6", [run_id])
    assert warmed["usage"]["output_tokens"] == 0 and warmed["tenant_id"] == "acme"
    nxt = result(call("run", {"agent": "analyst", "input": "How many customers?", "runs": [run_id],
                              "replay_last": "all", "tenant_id": "acme"}))  # fmt: skip
    assert nxt["result"]["status"] == "success"
    listed = [r["run_id"] for r in result(call("runs/list", {"tenant_id": "acme"}))["runs"]]
    assert listed == [nxt["result"]["run_id"], run_id], "a prewarm is not a run"

    unknown = error(call("prewarm", {"agent": "analyst", "runs": [UNKNOWN_RUN], "tenant_id": "acme"}))
    assert unknown["code"] == -32001 and unknown["data"]["reason"] == "not_found"
    other = error(call("prewarm", {"agent": "analyst", "runs": [run_id], "tenant_id": "globex"}))
    assert other["code"] == -32001 and run_id in other["message"]
    unsupported = error(call("prewarm", {"agent": "bot"}))
    assert unsupported["code"] == -32003 and "scripted/scripted-1 has no documented way" in unsupported["message"]
    with_input = error(call("prewarm", {"agent": "analyst", "input": "Hi"}))
    assert with_input["code"] == -32602

    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}", read_only=True)
    try:
        recorded = store.prewarms.list(tenant_id="acme")
        assert [p.prewarm_id for p in recorded] == [warmed["prewarm_id"]]
        assert store.prewarms.list(tenant_id="globex") == store.prewarms.list() == []
    finally:
        store.close()


def test_prewarm_over_stdio(tmp_path: Path) -> None:
    with stdio_server(config(tmp_path)) as client:
        old = error(client.call("prewarm", {"agent": "analyst"}))
        assert old["code"] == -32002, "before initialize the session speaks 1.0, which has no prewarm"
        init = result(client.call("initialize", {"protocol_version": "1.2"}))
        assert "prewarm" in init["capabilities"]["methods"] and init["capabilities"]["features"] == [
            "prewarm",
            "structured-output",
        ]
        check_prewarm_flow(client.call, tmp_path)


def test_a_1_1_session_is_not_offered_prewarm(tmp_path: Path) -> None:
    with stdio_server(config(tmp_path)) as client:
        init = result(client.call("initialize", {"protocol_version": "1.1"}))
        assert init["capabilities"]["features"] == [] and "prewarm" not in init["capabilities"]["methods"]
        refused = error(client.call("prewarm", {"agent": "analyst"}))
        assert "prewarm is new in protocol 1.2; this session speaks 1.1" in refused["message"]


def test_prewarm_over_http(tmp_path: Path) -> None:
    with http_server(config(tmp_path)) as address:
        ids = iter(range(1, 100))

        def call(method: str, params: Any) -> Any:
            body = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
            status, answer = post(address, body, session="s1")
            assert status == 200, (status, answer)
            return answer

        init = result(call("initialize", {"protocol_version": "1.2"}))
        assert init["capabilities"]["transport"] == "http" and init["capabilities"]["features"] == [
            "prewarm",
            "structured-output",
        ]
        check_prewarm_flow(call, tmp_path)
