"""Discovery and parity over the protocol: agents/list, agents/get, catalog/list, runs/explain, runs/sweep.

Each answer is checked against the SDK operation it stands for (the catalog, `segue runs explain --json`,
RunStore.sweep), so a client learns from the server what an app in Python would learn from the SDK.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from segue.catalog import Catalog
from segue.demo import shop_db as sample_db
from segue.store import RunStore
from segue.tools import tool
from tests._support import warm_cli
from tests._support.protocol_harness import (
    LIST_TABLES_CLIENT,
    StdioClient,
    answer_list_tables,
    stdio_server,
    twin_agent,
)
from tests._support.store_rows import new_run

INITIALIZE = {"protocol_version": "1.1"}
DESCRIBE = {"name": "describe_table", "python": "segue.demo.shop_db:describe_table", "requires_approval": True}
RUN_QUERY = {
    "name": "run_query",
    "description": "Run one SELECT.",
    "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
    "url": "http://127.0.0.1:9/tools/run_query",
    "timeout_seconds": 5,
}
SCRIPTED = {
    "name": "bot",
    "provider": {"kind": "scripted", "model": "scripted-1", "replies": []},
    "store": "sqlite:///runs.db",
}


@pytest.fixture
def client(tmp_path: Path) -> Any:
    tools = [LIST_TABLES_CLIENT, {"name": "describe_table", "python": "segue.demo.shop_db:describe_table"}]
    tools.append({"name": "run_query", "python": "segue.demo.shop_db:run_query"})
    path = tmp_path / "agents.json"
    path.write_text(
        json.dumps({"agents": [twin_agent(tools), twin_agent([DESCRIBE, RUN_QUERY], name="careful"), SCRIPTED]})
    )
    with stdio_server(path) as client:
        assert "result" in client.call("initialize", INITIALIZE)
        yield client


def result(answer: dict[str, Any]) -> Any:
    assert "result" in answer, answer
    return answer["result"]


def test_agents_list_and_get_describe_the_configured_agents(client: StdioClient) -> None:
    listed = result(client.call("agents/list", {}))["agents"]
    assert listed == [
        {
            "name": "analyst",
            "provider": {"kind": "twin-anthropic", "model": "claude-sonnet-4-6", "vendor": "anthropic"},
            "tools": ["list_tables", "describe_table", "run_query"],
        },
        {
            "name": "careful",
            "provider": {"kind": "twin-anthropic", "model": "claude-sonnet-4-6", "vendor": "anthropic"},
            "tools": ["describe_table", "run_query"],
        },
        {"name": "bot", "provider": {"kind": "scripted", "model": "scripted-1", "vendor": "scripted"}, "tools": []},
    ]

    analyst = result(client.call("agents/get", {"agent": "analyst"}))["agent"]
    tools = {t["name"]: t for t in analyst["tools"]}
    assert tools["list_tables"] == {
        "name": "list_tables",
        "description": LIST_TABLES_CLIENT["description"],
        "parameters": LIST_TABLES_CLIENT["parameters"],
        "kind": "client",
        "client_tool": True,
        "requires_approval": False,
        "timeout_seconds": 60.0,
    }
    # A Python tool's description and schema come from the function, as the model is offered them.
    assert tools["describe_table"]["kind"] == "python" and not tools["describe_table"]["client_tool"]
    described = tool(sample_db.describe_table)
    assert tools["describe_table"]["description"] == described.description
    assert tools["describe_table"]["parameters"] == described.parameters
    assert analyst["max_iterations"] == 10

    resolved = Catalog.load().resolve("claude-sonnet-4-6", "anthropic")
    path = analyst["catalog"]
    assert (path["label"], path["api_name"], path["wire"], path["layers"]) == (
        resolved.label,
        resolved.api_name,
        resolved.wire,
        list(resolved.layers),
    )
    assert path["config"]["llm"]["cache_ttls"] == resolved.cache_ttls
    assert path["config"]["pricing"]["input"] == resolved.get("pricing", "input")
    layout = analyst["layout"]
    assert layout["configured"] == "auto" and layout["mode"] in ("appendOnly", "replace")
    # The reason quotes the catalog value the decision read, which the same answer carries.
    shown = json.dumps(path["config"]["llm"]["prefix_prompt_cache"])
    assert f"prefix_prompt_cache={shown}" in layout["reason"]

    careful = {t["name"]: t for t in result(client.call("agents/get", {"agent": "careful"}))["agent"]["tools"]}
    assert careful["describe_table"]["requires_approval"] is True
    assert (careful["run_query"]["kind"], careful["run_query"]["timeout_seconds"]) == ("url", 5.0)
    assert "url" not in careful["run_query"], "a callback's address stays in the server"

    bot = result(client.call("agents/get", {"agent": "bot"}))["agent"]
    assert "catalog" not in bot and "unknown vendor 'scripted'" in bot["catalog_note"]
    assert bot["layout"]["mode"] == "replace" and bot["layout"]["reason"].startswith("catalog: no entry for")

    unknown = client.call("agents/get", {"agent": "nobody"})
    assert unknown["error"]["code"] == -32602
    assert unknown["error"]["data"]["errors"] == [
        {"pointer": "/agent", "message": "no agent 'nobody' in the server's config; configured: analyst, bot, careful"}
    ]


def test_catalog_list_is_the_catalogs_serving_paths(client: StdioClient) -> None:
    catalog = Catalog.load()
    every = result(client.call("catalog/list", {}))["paths"]
    assert [(p["model"], p.get("vendor")) for p in every] == catalog.serving_paths()
    haiku = result(client.call("catalog/list", {"model": "claude-haiku-4-5-20251001"}))["paths"]  # an alias
    assert {p["model"] for p in haiku} == {"claude-haiku-4-5"} and haiku[0]["label"] == "claude-haiku-4-5"
    anthropic = result(client.call("catalog/list", {"vendor": "anthropic"}))["paths"]
    assert anthropic and {p["vendor"] for p in anthropic} == {"anthropic"}
    assert len(anthropic) == len([1 for _, v in catalog.serving_paths() if v == "anthropic"])
    typo = client.call("catalog/list", {"model": "claude-sonet-4-6"})
    assert typo["error"]["code"] == -32006 and "claude-sonnet-4-6" in typo["error"]["message"]
    nowhere = client.call("catalog/list", {"vendor": "nowhere"})
    assert nowhere["error"]["code"] == -32006 and "unknown vendor 'nowhere'" in nowhere["error"]["message"]


def test_runs_explain_is_segue_runs_explain(client: StdioClient, tmp_path: Path) -> None:
    first = result(client.call("run", {"agent": "analyst", "input": "Which tables are there?"}, answer_list_tables))
    run_ids = [first["result"]["run_id"]]
    second = result(
        client.call(
            "run",
            {"agent": "analyst", "input": "How many orders are there?", "runs": run_ids, "replay_last": "all"},
        )
    )
    run_id = second["result"]["run_id"]
    explained = result(client.call("runs/explain", {"run_id": run_id.lower()}))  # ULIDs: either case
    cli = warm_cli.run(
        [
            sys.executable,
            "-m",
            "segue.apps.cli.main",
            "runs",
            "explain",
            run_id,
            "--json",
            "--db",
            f"sqlite:///{tmp_path}/runs.db",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert explained["explanation"] == json.loads(cli.stdout)
    assert cli.returncode == (1 if explained["breaks"] else 0)
    iterations = explained["explanation"]["iterations"]
    assert explained["explanation"]["continued_from"] == run_ids[0]
    assert iterations[0]["previous_run_id"] == run_ids[0], "iteration 1 is compared with the replayed run"
    assert [it["iteration"] for it in iterations if it["cause"] not in ("first", "extends")] == explained["breaks"]

    missing = client.call("runs/explain", {"run_id": "01J9Z3M6Q2W8X4Y7T5R1N0P3K6"})
    assert missing["error"]["code"] == -32005
    other_tenant = client.call("runs/explain", {"run_id": run_id, "tenant_id": "acme"})
    assert other_tenant["error"]["code"] == -32005, "runs of another tenant are not found"


def test_runs_sweep_ends_runs_whose_process_died(client: StdioClient, tmp_path: Path) -> None:
    assert result(client.call("runs/sweep", {})) == {"run_ids": []}
    store = RunStore(f"sqlite:///{tmp_path}/runs.db")
    try:
        abandoned = "01J" + "0" * 23
        store.create_run(new_run(abandoned, "default", input="i", lease_seconds=0.01), [])
        time.sleep(0.05)
        assert result(client.call("runs/sweep", {})) == {"run_ids": [abandoned]}
        run = store.get_run(abandoned, tenant_id="default")
        assert run is not None and (run.status, run.error) == ("error", "abandoned: the run's lease expired")
        assert result(client.call("runs/sweep", {})) == {"run_ids": []}
    finally:
        store.close()
