"""Run lists and pages answer what a run asked and cost: a question column, cost with its source in `runs show`
and on the pages, totals per conversation, and the run's own question and answer first, with the replayed
messages folded below. Everything from users and models is escaped."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import attrs
import pytest
from markupsafe import escape

from segue import Agent, RunStore
from segue.apps.dashboard import create_app
from segue.catalog import Catalog
from segue.providers import AnthropicProvider
from segue_twin import Twin
from tests._support.cli import run_cli
from tests._support.dashboard import get
from tests._support.helpers import lookup, unmarked_twin_client

SYSTEM = "You answer questions about the shop database, precisely and briefly. " * 150
XSS = '<script>alert("q")</script> & friends'


@attrs.frozen
class Conversation:
    url: str
    first: str
    second: str


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> Conversation:
    url = f"sqlite:///{tmp_path_factory.mktemp('views') / 'segue.db'}"

    async def build() -> Conversation:
        store = RunStore(url)
        try:
            # A vendor's run (the twin's answers without its mark): how a charge is priced and shown.
            agent = Agent(
                AnthropicProvider("claude-sonnet-4-6", client=unmarked_twin_client(Twin())), SYSTEM, [lookup], store
            )
            first = await agent.run("Which tables are there?")
            second = await agent.run(XSS, runs=[first.run_id], replay_last="all")
        finally:
            store.close()
        assert first.cost is not None and first.cost.usd and second.cost is not None and second.cost.usd
        return Conversation(url=url, first=first.run_id, second=second.run_id)

    return asyncio.run(build())


def _recorded_usd(url: str, run_id: str) -> float:
    store = RunStore(url)
    try:
        run = store.get_run(run_id)
        assert run is not None and run.meta is not None and run.meta.segue_cost is not None
        usd = run.meta.segue_cost.usd
        assert usd is not None
        return usd
    finally:
        store.close()


def test_run_list_has_an_escaped_question_column_and_costs_with_their_source(conversation: Conversation) -> None:
    store = RunStore(conversation.url)
    try:
        page = get(create_app(store), "/")
    finally:
        store.close()
    assert page.code == 200
    assert "<th>Question</th>" in page.text
    assert "<script>alert" not in page.text
    assert str(escape(XSS)) in page.text  # the cell's title and text, escaped
    assert '<td class="question-cell" title="Which tables are there?">Which tables are there?</td>' in page.text
    usd = _recorded_usd(conversation.url, conversation.first)
    cell = re.search(
        rf'data-run-id="{conversation.first}".*?<td class="num cost" title="([^"]*)">([^<]*)</td>', page.text, re.S
    )
    assert cell is not None
    assert cell.group(2) == f"${usd:,.4f}"
    assert "priced when the run was recorded, from claude-sonnet-4-6@anthropic:" in cell.group(1)
    # A price's source in short (issue 40 item 3): the catalog file's name and row, no server path or notes.
    assert re.search(r"anthropic: models\.json row \d+", cell.group(1)) and "#/models" not in cell.group(1)
    assert "catalogs/" not in page.text


def test_run_page_shows_its_own_question_and_answer_first_and_folds_the_replayed_messages(
    conversation: Conversation,
) -> None:
    store = RunStore(conversation.url)
    try:
        page = get(create_app(store), f"/runs/{conversation.second}").text
        run = store.get_run(conversation.second)
    finally:
        store.close()
    assert run is not None and run.answer
    exchange = page.index('<section id="exchange">')
    assert exchange < page.index('<section id="replay">') < page.index('<section id="messages">')
    assert f'<p class="question">{escape(XSS)}</p>' in page
    assert f'<p class="answer">{escape(run.answer)}</p>' in page
    assert "<script>alert" not in page
    folded = page[
        page.index('<details class="earlier"') : page.index("</details>", page.index('<details class="earlier"'))
    ]
    assert re.findall(r'<li class="message origin-(\w+)', folded) == ["replayed"] * len(
        re.findall(r"origin-replayed", page)
    )
    assert "origin-replayed" in folded and "origin-new" not in folded
    own = page[page.index('<ol class="messages own">') :]
    assert re.findall(r'<li class="message origin-(\w+)', own)[0] == "new"


def test_conversation_page_totals_the_chain(conversation: Conversation) -> None:
    store = RunStore(conversation.url)
    try:
        page = get(create_app(store), f"/conversations/{conversation.second}").text
        runs = [store.get_run(r) for r in (conversation.first, conversation.second)]
    finally:
        store.close()
    assert all(r is not None for r in runs)
    inp = sum(r.usage.input_tokens for r in runs if r)
    read = sum(r.usage.cache_read_tokens or 0 for r in runs if r)
    usd = _recorded_usd(conversation.url, conversation.first) + _recorded_usd(conversation.url, conversation.second)
    totals = page[page.index('<dl class="facts" id="totals">') : page.index("</dl>", page.index('id="totals"'))]
    assert "<dt>runs</dt><dd>2</dd>" in totals
    assert f"<dd>{inp:,} in / " in totals
    assert f"<dt>cache read</dt><dd>{read:,}</dd>" in totals
    assert f"<dt>cache-read share</dt><dd>{read / inp:.0%}</dd>" in totals
    assert f'title="the sum of 2 runs&#39; costs">${usd:,.4f}</dd>' in totals


def test_cli_list_has_question_and_cost_and_show_has_cost_and_conversation_totals(
    conversation: Conversation, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "runs", "list", "--db", conversation.url, "--wide")
    assert code == 0 and err == ""
    head, second, first = out.splitlines()
    assert second[head.index("QUESTION") :] == XSS  # a terminal shows it as text
    usd = _recorded_usd(conversation.url, conversation.first)
    assert first[head.index("COST") :].split()[0] == f"${usd:,.4f}"

    code, out, err = run_cli(capsys, "runs", "show", conversation.second, "--db", conversation.url)
    assert code == 0 and err == ""
    lines = out.splitlines()
    cost = next(line for line in lines if line.startswith("cost: "))
    own = _recorded_usd(conversation.url, conversation.second)
    assert cost.startswith(f"cost: ${own:,.4f} (priced when the run was recorded, from claude-sonnet-4-6@anthropic:")
    total = next(line for line in lines if line.startswith("conversation so far: "))
    assert total.startswith("conversation so far: 2 runs, input ")
    assert total.endswith(f"cost ${usd + own:,.4f}")


def test_cli_prices_a_run_recorded_without_a_cost_from_the_catalog(
    conversation: Conversation, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs recorded before segue kept their cost are priced now from the catalog, from their total usage."""
    import sqlite3

    path = tmp_path / "old.db"
    with sqlite3.connect(conversation.url.removeprefix("sqlite:///")) as src, sqlite3.connect(path) as dst:
        src.backup(dst)
        dst.execute("UPDATE agent_runs SET meta = json_remove(meta, '$.\"segue.cost\"')")
    url = f"sqlite:///{path}"
    store = RunStore(url)
    try:
        run = store.get_run(conversation.first)
    finally:
        store.close()
    assert run is not None and run.meta is not None and run.meta.segue_cost is None
    expected = Catalog.load().cost(run.usage, run.model, run.vendor)
    code, out, _ = run_cli(capsys, "runs", "show", conversation.first, "--db", url)
    assert code == 0
    assert f"cost: ${expected:,.4f} (priced by the dashboard's cost function" in out
