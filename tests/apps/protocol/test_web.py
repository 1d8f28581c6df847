"""Agents in a web page: `POST /ag-ui/{agent}` and `POST /ai-sdk/{agent}` on a loopback `segue serve --http` whose
model is the twin. Every AG-UI event is validated with the protocol's own Python models (ag-ui-protocol), and
@ag-ui/client's HttpAgent drives a conversation from Node (tests/node/ag-ui.test.mjs)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from segue.store import RunStore
from tests._support import warm_cli
from tests._support.environment import REPO
from tests._support.protocol_http import http_server
from tests._support.web import ag_ui_input, post_stream, sse_data, web_config

EVENT = TypeAdapter(Event)
#: The fields of each AI SDK UI message stream part segue sends (AI SDK docs, "Stream Protocols"; the SDK's own
#: chunk schema is strict: a part with another field is refused by useChat).
AI_SDK_PARTS = {
    "start": {"messageId", "messageMetadata"},
    "start-step": set(),
    "finish-step": set(),
    "text-start": {"id"},
    "text-delta": {"id", "delta"},
    "text-end": {"id"},
    "reasoning-start": {"id"},
    "reasoning-delta": {"id", "delta"},
    "reasoning-end": {"id"},
    "tool-input-start": {"toolCallId", "toolName"},
    "tool-input-available": {"toolCallId", "toolName", "input"},
    "tool-output-available": {"toolCallId", "output"},
    "tool-output-error": {"toolCallId", "errorText"},
    "finish": {"messageMetadata"},
    "error": {"errorText"},
}
NODE_PROJECT = Path(__file__).resolve().parents[2] / "node"


def _ag_ui(address: tuple[str, int], body: Any, token: str | None = None) -> list[dict[str, Any]]:
    status, headers, text = post_stream(address, "/ag-ui/analyst", body, token)
    assert status == 200, text
    assert headers["content-type"] == "text/event-stream"
    events = sse_data(text)
    for event in events:
        EVENT.validate_python(event)  # every event is one the AG-UI protocol defines, with its required fields
    return events


def _runs(tmp_path: Path) -> list[Any]:
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        return list(reversed(store.list_runs(all_tenants=True, limit=100)))
    finally:
        store.close()


def test_ag_ui_two_turns_of_a_thread_replay_the_first_with_its_tool_calls(tmp_path: Path) -> None:
    # One run at a time: the second turn also shows that the first gave its run slot back.
    with http_server(web_config(tmp_path, max_concurrent_runs=1)) as address:
        first = _ag_ui(address, ag_ui_input("thread-1", "client-run-1", "How many orders?"))
        second = _ag_ui(address, ag_ui_input("thread-1", "client-run-2", "How many customers?"))

    kinds = [e["type"] for e in first]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    # The requested run echoes the input's ids on its boundary events (AG-UI spec, "Run Input: Identity").
    assert {(e["threadId"], e["runId"]) for e in (first[0], first[-1])} == {("thread-1", "client-run-1")}
    starts = [e["toolCallName"] for e in first if e["type"] == "TOOL_CALL_START"]
    assert starts == ["list_tables", "describe_table", "run_query"]
    for name in ("TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"):
        assert kinds.count(name) == 3, name
    text = "".join(e["delta"] for e in first if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "Orders:\n- orders: 220"
    assert kinds.count("TEXT_MESSAGE_START") == kinds.count("TEXT_MESSAGE_END") >= 1

    runs = _runs(tmp_path)
    assert [r.metadata for r in runs] == [{"thread_id": "thread-1", "thread_turn": n} for n in (1, 2)]
    assert runs[1].continued_from == runs[0].run_id, "the second turn replayed the first"
    done1, done2 = first[-1]["metadata"], second[-1]["metadata"]
    assert (done1["run_id"], done2["run_id"]) == (runs[0].run_id, runs[1].run_id)
    assert done2["status"] == "success" and done2["cached_share"] > 0.5, done2
    assert done2["cached_share"] == runs[1].cached_share
    assert "replayed 1 run" in done2["replay_text"]


def test_ai_sdk_stream_two_turns_with_a_tool_call(tmp_path: Path) -> None:
    def chat(question: str, n: int) -> list[Any]:
        body = {
            "id": "chat-1",
            "messages": [{"id": f"u{n}", "role": "user", "parts": [{"type": "text", "text": question}]}],
        }
        status, headers, text = post_stream(address, "/ai-sdk/analyst", body)
        assert status == 200, text
        # AI SDK "Stream Protocols": a custom backend sets `x-vercel-ai-ui-message-stream: v1`.
        assert headers["x-vercel-ai-ui-message-stream"] == "v1"
        parts = sse_data(text)
        for part in parts[:-1]:
            assert set(part) - {"type"} == AI_SDK_PARTS[part["type"]], part
        return parts

    with http_server(web_config(tmp_path)) as address:
        first = chat("How many orders?", 1)
        second = chat("How many customers?", 2)
    kinds = [p if p == "[DONE]" else p["type"] for p in first]
    assert kinds[0] == "start" and kinds[-2:] == ["finish", "[DONE]"]
    tools = [p["toolName"] for p in first[:-1] if p["type"] == "tool-input-available"]
    assert tools == ["list_tables", "describe_table", "run_query"]
    outputs = [p for p in first[:-1] if p["type"] == "tool-output-available"]
    # Issue 40 item 8: the output is a JSON value (list_tables returned a list), not the JSON text of one.
    assert len(outputs) == 3 and outputs[0]["output"] == ["customers", "order_items", "orders", "products"]
    assert isinstance(outputs[2]["output"], list) and outputs[2]["output"][0] == {"orders": 220}
    assert kinds.count("start-step") == kinds.count("finish-step") == 4  # one step per provider call
    deltas = [p for p in first[:-1] if p["type"] == "text-delta"]
    assert "".join(p["delta"] for p in deltas) == "Orders:\n- orders: 220"
    started = {p["id"] for p in first[:-1] if p["type"] == "text-start"}
    assert started == {p["id"] for p in deltas} == {p["id"] for p in first[:-1] if p["type"] == "text-end"}
    runs = _runs(tmp_path)
    assert runs[1].continued_from == runs[0].run_id
    finish = second[-2]
    assert finish["type"] == "finish" and finish["messageMetadata"]["run_id"] == runs[1].run_id
    assert finish["messageMetadata"]["cached_share"] > 0.5
    # Issue 40 item 3: a price's source reaches the browser as a short catalog reference, never the server's path.
    [price] = finish["messageMetadata"]["cost"]["prices"]
    assert price == {"model": "claude-sonnet-4-6", "vendor": "anthropic", "source": price["source"]}
    assert re.fullmatch(r"models\.json row \d+", price["source"]), price
    sent = json.dumps([first, second])
    assert "catalogs" not in sent and str(REPO) not in sent and "#/models" not in sent


def test_a_failed_run_ends_with_each_protocols_error_event(tmp_path: Path) -> None:
    with http_server(web_config(tmp_path)) as address:
        body = ag_ui_input("thread-err", "r1", "How many orders?")
        status, _, text = post_stream(address, "/ag-ui/broken", body)
        assert status == 200
        events = sse_data(text)
        for event in events:
            EVENT.validate_python(event)
        assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_ERROR"
        assert "anthropic" in events[-1]["message"] and events[-1]["metadata"]["status"] == "error"

        chat = {"id": "c-err", "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}]}
        status, _, text = post_stream(address, "/ai-sdk/broken", chat)
        parts = sse_data(text)
        assert parts[-2]["type"] == "error" and "anthropic" in parts[-2]["errorText"]
        assert parts[-1] == "[DONE]"


def test_bad_requests_are_http_errors_and_store_nothing(tmp_path: Path) -> None:
    tokens = [
        {"name": "acme-app", "token_env": "ACME_TOKEN", "tenants": ["acme"]},
        {"name": "globex-app", "token_env": "GLOBEX_TOKEN", "tenants": ["globex"]},
    ]
    env = {"ACME_TOKEN": "acme-secret", "GLOBEX_TOKEN": "globex-secret"}
    with http_server(web_config(tmp_path, tokens=tokens), env=env) as address:
        good = ag_ui_input("shared-thread", "r1", "How many orders?")
        status, _, text = post_stream(address, "/ag-ui/analyst", good)
        assert status == 401 and "Bearer" in text
        status, _, text = post_stream(address, "/ag-ui/analyst", good, "acme-secret")
        assert status == 200 and sse_data(text)[-1]["type"] == "RUN_FINISHED"
        assert len(_runs(tmp_path)) == 1

        refused = [
            ("/ag-ui/analyst", b"{nope", "acme-secret", 400, "not JSON"),
            ("/ag-ui/analyst", {**good, "threadId": ""}, "acme-secret", 400, "threadId"),
            ("/ag-ui/analyst", {**good, "messages": []}, "acme-secret", 400, "no user message"),
            ("/ag-ui/nobody", good, "acme-secret", 404, "no agent 'nobody'"),
            ("/ai-sdk/analyst", {"id": "c", "messages": "hi"}, "acme-secret", 400, "messages"),
            # The token of globex may not act for acme (globex's own `shared-thread` is another thread: see
            # test_web_reliability.py::test_two_tenants_threads_of_one_id_are_two_threads).
            ("/ag-ui/analyst", ag_ui_input("t", "r", "Hi", tenant_id="acme"), "globex-secret", 403, "'acme'"),
        ]
        for path, body, token, expected, words in refused:
            status, _, text = post_stream(address, path, body, token)
            assert (status, words in json.loads(text)["error"]) == (expected, True), (path, body, text)
        assert len(_runs(tmp_path)) == 1, "no refused request stored a run"


def _node_installed() -> bool:
    return (NODE_PROJECT / "node_modules" / "@ag-ui" / "client" / "package.json").is_file()


def test_ag_ui_http_agent_from_node_drives_a_two_turn_conversation(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not _node_installed():
        if os.environ.get("CI"):
            pytest.fail("Node and tests/node/node_modules are required in CI; .ci/run installs them with npm ci")
        pytest.skip("@ag-ui/client is not installed: run `cd tests/node && npm ci --no-audit --no-fund`")
    with http_server(web_config(tmp_path)) as address:
        url = f"http://{address[0]}:{address[1]}/ag-ui/analyst"
        done = warm_cli.run(
            [node, str(NODE_PROJECT / "ag-ui.test.mjs"), url], capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    runs = [r for r in _runs(tmp_path) if r.agent_name == "analyst"]
    assert [r.run_id for r in runs] == report["runs"]
    assert runs[1].continued_from == runs[0].run_id
    assert report["tools"] == ["list_tables", "describe_table", "run_query"]
    assert report["cached_share"] > 0.5
    assert "anthropic" in report["error"], "the failed run reached HttpAgent as RUN_ERROR"


def test_serve_help_and_its_start_up_line_name_the_web_endpoints(tmp_path: Path) -> None:
    """Issue 40 item 8: `segue serve --help` and the line `--http` prints on start named only /rpc and /events."""
    from segue.apps.cli.main import build_parser
    from tests._support.protocol_harness import serve_command

    serve = build_parser()._subparsers._group_actions[0].choices["serve"]
    helped = serve.format_help()
    assert "/ag-ui/AGENT" in helped and "/ai-sdk/AGENT" in helped
    proc = warm_cli.Popen(
        serve_command(web_config(tmp_path), "--http", "--port", "0"), stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    found = re.search(r"(http://[\d.]+:\d+)/rpc", line)
    assert found, line
    assert f"POST {found.group(1)}/ag-ui/AGENT and {found.group(1)}/ai-sdk/AGENT" in line
