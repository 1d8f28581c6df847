"""Issue 41, item 5: runs seen as a tree. `segue runs show` and `runs explain` list a run's sub-runs under it, each
with its cache share and cost, and the total; `runs list` puts each sub-run right under its parent."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest

from segue import Agent, RunStore
from segue.apps.cli.main import main
from segue.apps.dashboard.app import create_app
from segue.providers import AnthropicProvider
from segue.testing import ScriptedProvider, text
from segue_twin import Twin
from segue_twin.scripted import ScriptedPolicy
from segue_twin.view import AssistantTurn, PlannedCall


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


async def test_show_list_and_explain_show_the_sub_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = RunStore(url)
    # Priced runs: every agent on the twin's Anthropic wire (the twin's figures are emulated, and shown as such).
    twin = Twin(
        policy=ScriptedPolicy(
            [
                AssistantTurn(
                    tool_calls=(
                        PlannedCall(name="billing", arguments={"task": "refund?"}),
                        PlannedCall(name="shipping", arguments={"task": "where?"}),
                    )
                ),
                "refund sent",
                "in the depot",
                "Refund sent; parcel in the depot.",
            ]
        )
    )
    client = twin.anthropic_client()

    def agent(name: str, tools: list[object]) -> Agent:
        return Agent(AnthropicProvider("claude-sonnet-4-6", client=client), f"You are {name}.", tools, store, name=name)

    billing, shipping = agent("billing", []), agent("shipping", [])
    lead = agent("lead", [billing.as_tool(), shipping.as_tool()])
    result = await lead.run("Refund me and find my parcel.")
    assert result.status == "success"
    children = result.children or []
    assert {c.agent_name for c in children} == {"billing", "shipping"}
    assert result.total_cost is not None and result.total_cost.twin_usd is not None
    assert result.cost is not None and result.cost.twin_usd is not None
    assert result.total_cost.twin_usd > result.cost.twin_usd
    store.close()

    code, out = run_cli(capsys, "runs", "show", result.run_id, "--db", url)
    assert code == 0
    lines = out.splitlines()
    start = lines.index("sub-runs: 2")
    shown = lines[start + 1 : start + 3]
    for child in children:
        [line] = [s for s in shown if child.run_id in s]
        assert line.startswith("  ⤷ ") and f"{child.agent_name} (call {child.call_id}) success" in line
        assert "· cached " in line and "· cost twin (emulated, $" in line
    assert lines[start + 3].startswith("total with sub-runs: twin (emulated, $")

    code, out = run_cli(capsys, "runs", "list", "--db", url)
    lines = out.splitlines()
    assert lines[1].split()[0] == result.run_id  # the parent first, its sub-runs right under it
    assert {line.split()[0] for line in lines[2:4]} == {c.run_id for c in children}
    question = lines[0].index("QUESTION")
    # A sub-run's question says it is one, and whose (cut to the column's room).
    assert sorted(line[question:][:7] for line in lines[2:4]) == ["  ⤷ bil", "  ⤷ shi"]

    code, out = run_cli(capsys, "runs", "explain", result.run_id, "--db", url)
    assert "sub-runs: 2" in out and "total with sub-runs: twin (emulated, $" in out

    # The dashboard's run page: the same rows, and each sub-run's page names its parent.
    reader = RunStore(url, read_only=True)
    app = create_app(reader)
    page = dashboard_page(app, f"/runs/{result.run_id}")
    rows = re.findall(r'<tr class="sub-run" data-run-id="([^"]+)" data-depth="1">', page)
    assert sorted(rows) == sorted(c.run_id for c in children)
    assert 'Total with sub-runs: <span class="cost">twin (emulated, $' in page
    child_page = dashboard_page(app, f"/runs/{children[0].run_id}")
    assert "A sub-run of <a" in child_page and result.run_id in child_page and children[0].call_id in child_page
    reader.close()


def dashboard_page(app: Any, path: str) -> str:
    environ: dict[str, Any] = {"PATH_INFO": path, "QUERY_STRING": "", "REQUEST_METHOD": "GET"}
    setup_testing_defaults(environ)
    environ["HTTP_HOST"] = "127.0.0.1:8710"
    environ["wsgi.input"] = io.BytesIO(b"")
    status: list[str] = []
    body = b"".join(app(environ, lambda s, h, e=None: status.append(s)))
    assert status[0].startswith("200"), status
    return body.decode("utf-8")


async def test_a_run_without_sub_runs_shows_no_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    agent = Agent(ScriptedProvider.of(text("hi")), "P.", (), RunStore(url), name="solo")
    result = await agent.run("hello")
    code, out = run_cli(capsys, "runs", "show", result.run_id, "--db", url)
    assert code == 0 and "sub-runs" not in out and "total with sub-runs" not in out


def test_the_web_streams_final_event_carries_the_sub_runs_and_the_total() -> None:
    """AG-UI's RUN_FINISHED metadata and the AI SDK's finish messageMetadata (segue.apps.protocol.web)."""
    from segue.apps.protocol.web import AgUiEncoder, AiSdkEncoder
    from segue.generated import ChildRun, RunCost, RunResult, Usage
    from segue.run.state import make_event

    usage = Usage(input_tokens=100, output_tokens=5, cache_read_tokens=90)
    child = ChildRun(
        run_id="01J0000000000000000000CHLD",
        agent_name="billing",
        call_id="call_billing",
        status="success",
        usage=usage,
        cached_share=0.9,
        cost=RunCost(usd=0.25, prices=[]),
    )
    result = RunResult(
        run_id="01J0000000000000000000PRNT",
        status="success",
        usage=usage,
        iterations=2,
        cost=RunCost(usd=0.5, prices=[]),
        children=[child],
        total_cost=RunCost(usd=0.75, prices=[]),
    )
    event = make_event("RUN_COMPLETED", result.run_id, 2, result=result)
    expected_children = [
        {
            "run_id": child.run_id,
            "agent_name": "billing",
            "call_id": "call_billing",
            "status": "success",
            "cached_share": 0.9,
            "cost_usd": 0.25,
        }
    ]
    [finished] = AgUiEncoder("thread", result.run_id).event(event)[-1:]
    assert finished["type"] == "RUN_FINISHED"
    assert finished["metadata"]["children"] == expected_children
    assert finished["metadata"]["total_cost"] == {"usd": 0.75}
    parts = AiSdkEncoder().event(event)
    [finish] = [p for p in parts if isinstance(p, dict) and p.get("type") == "finish"]
    assert finish["messageMetadata"]["children"] == expected_children
    assert finish["messageMetadata"]["total_cost"] == {"usd": 0.75}
