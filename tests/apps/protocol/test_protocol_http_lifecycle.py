"""`segue serve --http`: initialize, shutdown and exit belong to one session, never to the server.

Each named session has its own lifecycle: initializing or shutting down one leaves every other session as it was,
and `exit` frees the session (its event streams close; the name starts afresh). A request without a session name
is a session of its own, so it cannot initialize.
"""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path
from typing import Any

from segue.apps.protocol.http import Limits
from tests._support.protocol_harness import LIST_TABLES_CLIENT, twin_agent
from tests._support.protocol_http import Events, http_server, post

INITIALIZE = {"protocol_version": "1.1", "client_info": {"name": "pytest"}}
#: A Python tool that answers once the file go-<request id> exists, so the test decides when each run proceeds.
SLOW_TOOLS = '''
import asyncio
import json
from pathlib import Path

from segue.apps.protocol.rpc import current_request
from segue.demo import shop_db as sample_db


async def list_tables() -> str:
    """List the tables of the shop database."""
    request = current_request()
    while not Path(f"go-{request.request_id}").exists():
        await asyncio.sleep(0.02)
    return json.dumps(sample_db.list_tables())
'''


def rpc(request_id: int, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def call(address: tuple[str, int], session: str, request_id: int, method: str, params: Any, **kw: Any) -> Any:
    status, answer = post(address, rpc(request_id, method, params), session=session, **kw)
    assert status == 200, (status, answer)
    return answer


def code_of(answer: dict[str, Any]) -> int:
    assert "error" in answer, answer
    code: int = answer["error"]["code"]
    return code


def write(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "agents.json"
    path.write_text(json.dumps(config))
    return path


def test_initialize_is_tied_to_the_session(tmp_path: Path) -> None:
    config = write(tmp_path, {"agents": [twin_agent([LIST_TABLES_CLIENT])], "max_concurrent_runs": 8})
    with http_server(config) as address:
        nameless = call(address, "", 1, "initialize", INITIALIZE)
        assert code_of(nameless) == -32600 and "needs a named session" in nameless["error"]["message"]
        assert code_of(call(address, "s1", 2, "agents/list", {})) == -32002

        conn = http.client.HTTPConnection(*address, timeout=30)
        body = json.dumps(rpc(3, "initialize", INITIALIZE)).encode()
        conn.request("POST", "/rpc", body, {"Content-Type": "application/json", "Segue-Session": "s1"})
        answer = conn.getresponse()
        assert answer.getheader("Segue-Protocol-Version") == "1.2", "the newest version the server speaks"
        capabilities = json.loads(answer.read())["result"]["capabilities"]
        conn.close()
        assert (capabilities["transport"], capabilities["tool_calls"], capabilities["server_requests"]) == (
            "http",
            "resume",
            [],
        )
        defaults = Limits.from_config(None)
        assert capabilities["limits"] == {
            "max_message_bytes": defaults.max_body_bytes,
            "max_concurrent_runs": 8,
            "shutdown_timeout_seconds": 10.0,
            "http": {
                "max_connections": defaults.max_connections,
                "request_timeout_seconds": defaults.request_timeout,
                "max_body_bytes": defaults.max_body_bytes,
                "max_bodies_bytes": defaults.max_bodies_bytes,
                "max_sessions": defaults.max_sessions,
                "session_idle_seconds": defaults.session_idle_seconds,
                "event_buffer": defaults.event_buffer,
            },
        }
        assert [a["name"] for a in call(address, "s1", 4, "agents/list", {})["result"]["agents"]] == ["analyst"]
        assert code_of(call(address, "s2", 5, "agents/list", {})) == -32002, "another session is not initialized"
        again = call(address, "s1", 6, "initialize", INITIALIZE)
        assert code_of(again) == -32600 and "already answered" in again["error"]["message"]


def test_shutdown_drains_one_session_and_exit_frees_it(tmp_path: Path) -> None:
    (tmp_path / "slow_tools.py").write_text(SLOW_TOOLS)
    slow = {"name": "list_tables", "python": "slow_tools:list_tables"}
    config = write(tmp_path, {"agents": [twin_agent([slow])]})
    with http_server(config) as address:
        call(address, "s1", 1, "initialize", INITIALIZE)
        call(address, "s2", 1, "initialize", INITIALIZE)
        events = Events(address, "s1")
        answers: dict[int, Any] = {}

        def send(request_id: int, method: str, params: Any) -> None:
            answers[request_id] = call(address, "s1", request_id, method, params)

        threads = [
            threading.Thread(target=send, args=(i, "run", {"agent": "analyst", "input": "Which tables are there?"}))
            for i in (2, 3)
        ]
        for t in threads:
            t.start()
        started: dict[str, int] = {}  # run id -> request id, once both runs wait on their tool
        waiting: set[int] = set()
        while waiting != {2, 3}:
            params = events.items.get(timeout=30)["message"]["params"]
            if params["event"]["type"] == "RUN_STARTED":
                started[params["event"]["run_id"]] = params["request_id"]
            waiting |= {params["request_id"]} if params["event"]["type"] == "TOOL_CALL" else set()
        shutdown = threading.Thread(target=send, args=(4, "shutdown", {"timeout_seconds": 3}))
        shutdown.start()
        while "result" in call(address, "s1", 5, "runs/list", {}):  # served until shutdown was accepted
            pass
        late = call(address, "s1", 6, "run", {"agent": "analyst", "input": "How many orders are there?"})
        assert code_of(late) == -32600 and "shutting down" in late["error"]["message"]
        (tmp_path / "go-2").touch()  # run 2 may finish while the session drains; run 3 never gets its tool result
        for t in [*threads, shutdown]:
            t.join(timeout=30)

        assert answers[2]["result"]["result"]["status"] == "success", answers
        assert code_of(answers[3]) == -32800
        run_of = {i: run_id for run_id, i in started.items()}
        report = answers[4]["result"]["requests"]
        # A runs/list probe may have been in flight as shutdown arrived: it finished too.
        assert {(r["method"], r["outcome"]) for r in report if r["method"] != "run"} <= {("runs/list", "finished")}
        # Listed in the order they arrived, which two threads do not fix: compare by id.
        assert sorted((r for r in report if r["method"] == "run"), key=lambda r: r["id"]) == [
            {
                "id": 2,
                "method": "run",
                "agent": "analyst",
                "run_id": run_of[2],
                "outcome": "finished",
                "status": "success",
            },
            {
                "id": 3,
                "method": "run",
                "agent": "analyst",
                "run_id": run_of[3],
                "outcome": "cancelled",
                "status": "cancelled",
            },
        ]
        assert events.until(3, "RUN_ERROR")[-1]["result"]["status"] == "cancelled"
        # The other session is untouched by s1's shutdown.
        assert call(address, "s2", 2, "agents/list", {})["result"]["agents"]

        status, nothing = post(address, {"jsonrpc": "2.0", "method": "exit"}, session="s1")
        assert (status, nothing) == (204, None)
        assert events.ended.wait(10), "exit closes the session's event streams"
        events.close()
        # The name starts a fresh session: not initialized, not shut down.
        assert code_of(call(address, "s1", 7, "agents/list", {})) == -32002
        assert call(address, "s1", 8, "initialize", INITIALIZE)["result"]["protocol_version"] == "1.1"


def test_tokens_shape_the_session_and_sweeping_needs_every_tenant(tmp_path: Path) -> None:
    tokens = [{"name": "acme-app", "token_env": "ACME_TOKEN", "tenants": ["acme"]}]
    config = write(tmp_path, {"agents": [twin_agent([LIST_TABLES_CLIENT])], "http": {"tokens": tokens}})
    env = {"ACME_TOKEN": "acme-secret", "SEGUE_SERVE_TOKEN": "ops-secret"}
    acme = {"headers": {"Authorization": "Bearer acme-secret"}}
    ops = {"headers": {"Authorization": "Bearer ops-secret"}}
    with http_server(config, env) as address:
        mine = call(address, "a", 1, "initialize", INITIALIZE, **acme)["result"]["capabilities"]
        assert (mine["tenants"], mine["default_tenant"]) == (["acme"], "acme")
        refused = call(address, "a", 2, "runs/sweep", {}, **acme)
        assert code_of(refused) == -32007 and refused["error"]["data"] == {"tenant_id": "*"}
        everyone = call(address, "o", 1, "initialize", INITIALIZE, **ops)["result"]["capabilities"]
        assert (everyone["tenants"], everyone["default_tenant"]) == (["*"], "default")
        assert call(address, "o", 2, "runs/sweep", {}, **ops)["result"] == {"run_ids": []}
