"""A run served by segue's twin reads as the twin's everywhere: the store, `segue runs list/show` (and --json), the
dashboard and the cost, whose emulated figure cannot be taken for a vendor's charge.

The same answer without the twin's header (tests/providers/test_provider_offline.py) is a vendor's, so the vendor
run here
comes from the twin's bytes with that header taken off: only the header decides.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from segue import Agent, RunStore
from segue.apps.cli.main import main
from segue.apps.dashboard import create_app
from segue.demo import shop_db as sample_db
from segue.providers import AnthropicProvider
from segue_twin import Twin
from tests._support.dashboard import get
from tests._support.helpers import unmarked_twin_client

TOOLS = [sample_db.list_tables, sample_db.describe_table, sample_db.run_query]
QUESTION = "Which tables are there?"


@pytest.fixture
def runs(tmp_path: Path) -> tuple[str, str, str]:
    """(store url, a run on the twin, the same run from a "vendor"), tenant default."""
    url = f"sqlite:///{tmp_path}/runs.db"
    store = RunStore(url)
    try:
        twin = Twin()
        on_twin = AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client())
        vendor = AnthropicProvider("claude-sonnet-4-6", client=unmarked_twin_client(Twin()))

        async def both() -> tuple[str, str]:
            a = await Agent(on_twin, "You answer.", TOOLS, store).run(QUESTION)
            b = await Agent(vendor, "You answer.", TOOLS, store).run(QUESTION)
            assert a.status == b.status == "success"
            assert a.served_by == "twin" and b.served_by == "vendor"
            return a.run_id, b.run_id

        twin_run, vendor_run = asyncio.run(both())
    finally:
        store.close()
    return url, twin_run, vendor_run


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_runs_show_json_says_the_twin_served_it_and_what_it_did_not_cost(
    runs: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, twin_run, vendor_run = runs
    shown = json.loads(_cli(capsys, "runs", "show", twin_run, "--db", url, "--json"))
    assert shown["served_by"] == "twin" and shown["meta"]["segue.served_by"] == "twin"
    assert [c["served_by"] for c in shown["llm_interactions"]] == ["twin", "twin"]
    cost = shown["meta"]["segue.cost"]
    assert cost["usd"] == 0 and cost["twin_usd"] > 0  # the twin charged nothing; its price at Anthropic's is apart
    vendor = json.loads(_cli(capsys, "runs", "show", vendor_run, "--db", url, "--json"))
    assert vendor["served_by"] == "vendor" and [c["served_by"] for c in vendor["llm_interactions"]] == ["vendor"] * 2
    assert vendor["meta"]["segue.cost"]["usd"] == cost["twin_usd"] and "twin_usd" not in vendor["meta"]["segue.cost"]


def test_runs_list_and_show_mark_the_twin_in_text_and_json(
    runs: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, twin_run, vendor_run = runs
    listed = {r["run_id"]: r for r in json.loads(_cli(capsys, "runs", "list", "--db", url, "--json"))}
    assert listed[twin_run]["served_by"] == "twin" and listed[vendor_run]["served_by"] == "vendor"
    table = {line.split()[0]: line for line in _cli(capsys, "runs", "list", "--db", url, "--wide").splitlines()[1:]}
    assert re.search(r"twin \(emulated, \$0\.\d{4} at the vendor's prices\)", table[twin_run]), table[twin_run]
    assert "twin" not in table[vendor_run] and re.search(r"\$0\.\d{4}", table[vendor_run])
    # The default rows are narrower: what the twin charged, marked as the twin's (--wide has its emulated price).
    narrow = {line.split()[0]: line for line in _cli(capsys, "runs", "list", "--db", url).splitlines()[1:]}
    assert "  $0 (twin)  " in narrow[twin_run] and "twin" not in narrow[vendor_run]
    text = _cli(capsys, "runs", "show", twin_run, "--db", url)
    assert "served by segue's twin, an offline emulator: the answer is not a model's" in text
    assert "cost: twin (emulated, $" in text and "claude-sonnet-4-6 (twin)" in text
    assert "twin" not in _cli(capsys, "runs", "show", vendor_run, "--db", url).replace("Twin", "")


def test_the_dashboard_marks_the_twin_run_and_its_cost(runs: tuple[str, str, str]) -> None:
    url, twin_run, vendor_run = runs
    store = RunStore(url, read_only=True)
    try:
        app = create_app(store)
        listing = get(app, "/").text
        rows = dict(re.findall(r'<tr class="run-row" data-run-id="([^"]+)">(.*?)</tr>', listing, re.S))
        assert '<span class="twin"' in rows[twin_run] and '<span class="twin"' not in rows[vendor_run]
        assert re.search(r"twin \(emulated, \$0\.\d{4} at the vendor&#39;s prices\)", rows[twin_run])
        page = get(app, f"/runs/{twin_run}").text
        assert "<dt>served by</dt>" in page and "the answer is not a model" in page
        assert page.count('<span class="twin"') == 3  # the facts and both iterations
        assert "<dt>served by</dt>" not in get(app, f"/runs/{vendor_run}").text
    finally:
        store.close()
