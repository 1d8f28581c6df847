"""Every surface that explains a cache miss states the stored cause with its number first (issue 30 item 1).

A two-turn conversation on the twin with a prompt below claude-sonnet-4-6's minimum cacheable length: the run
stores a `cache-below-minimum` note with the prompt's tokens and the catalog's minimum, and `segue runs show`,
`segue runs explain` (text and --json), the dashboard's run page and its conversation cards say
"N tokens, below the M-token minimum" before anything the vendor leaves open. A tools change is named on the
conversation card of the turn it broke.
"""

from __future__ import annotations

import asyncio
import html
import json
from pathlib import Path
from typing import Any

import pytest

from segue import Agent, RunStore, tool
from segue.apps.cli.main import main
from segue.apps.dashboard import create_app
from segue.catalog import Catalog
from segue.providers import AnthropicProvider
from segue.twin import Twin
from tests._support.dashboard import get

MODEL = "claude-sonnet-4-6"


@tool
def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: the order id
    """
    return f"order {order}: shipped"


@tool
def cancel(order: str) -> str:
    """Cancel an order.

    Args:
        order: the order id
    """
    return f"order {order}: cancelled"


def _minimum() -> int:
    value = Catalog.load().resolve(MODEL, "anthropic").get("llm", "cache_min_tokens")
    assert isinstance(value, int)
    return value


async def _conversation(url: str) -> tuple[str, str, str]:
    store = RunStore(url)
    client = Twin().anthropic_client()
    try:
        agent = Agent(AnthropicProvider(MODEL, client=client), "You help.", [lookup], store)
        first = await agent.run("Where is order 7?", tenant_id="t")
        second = await agent.run("And order 8?", runs=[first.run_id], tenant_id="t")
        # The third turn offers another tool: its first request breaks the replayed prefix at the tools.
        changed = Agent(AnthropicProvider(MODEL, client=client), "You help.", [lookup, cancel], store)
        third = await changed.run("Cancel order 8.", runs=[first.run_id, second.run_id], tenant_id="t")
        return first.run_id, second.run_id, third.run_id
    finally:
        store.close()


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str, str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('miss') / 'segue.db'}"
    return (url, *asyncio.run(_conversation(url)))


def _stored(url: str, run_id: str) -> Any:
    store = RunStore(url)
    try:
        run = store.get_run(run_id, tenant_id="t")
        assert run is not None and run.meta is not None and run.meta.segue_notes
        return next(n for n in run.meta.segue_notes if n.kind == "cache-below-minimum")
    finally:
        store.close()


def _stated(url: str, run_id: str) -> str:
    note = _stored(url, run_id)
    assert note.limit == _minimum() and note.measured is not None and note.measured < note.limit
    return f"{note.measured:,} tokens, below the {note.limit:,}-token minimum"


def test_the_note_stores_the_prompts_tokens_and_the_catalogs_minimum(chat: tuple[str, str, str, str]) -> None:
    url, first, _, _ = chat
    assert _stored(url, first).limit == _minimum()  # catalog llm.cache_min_tokens, not a figure of segue's


def test_runs_explain_states_the_cause_first(
    chat: tuple[str, str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _, second, _ = chat
    main(["runs", "explain", second, "--db", url, "--tenant", "t"])
    out = capsys.readouterr().out
    notes = [line for line in out.splitlines() if "note:" in line]
    assert notes and all(
        line.split("note: ", 1)[1].split(" tokens, below the ")[1].startswith(f"{_minimum():,}-token minimum")
        for line in notes
    ), out
    assert "may have expired" not in out.split("note:")[1].split("tokens")[0]  # the number comes first
    main(["runs", "explain", second, "--db", url, "--tenant", "t", "--json"])
    explained = json.loads(capsys.readouterr().out)
    first_note = explained["iterations"][0]["note"]
    assert first_note.startswith(_stated(url, second).split(" tokens")[0].split(",")[0][:1])
    assert f"below the {_minimum():,}-token minimum" in first_note


def test_runs_show_names_the_stored_cause(chat: tuple[str, str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    url, first, _, _ = chat
    main(["runs", "show", first, "--db", url, "--tenant", "t"])
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("cache miss:"))
    assert _stated(url, first) in line and line.index("tokens") < line.index("(segue runs explain")


def test_the_dashboard_run_page_and_cards_state_it(chat: tuple[str, str, str, str], tmp_path: Path) -> None:
    url, first, _second, third = chat
    store = RunStore(url)
    try:
        app = create_app(store, tenant="t")
        page = html.unescape(get(app, f"/runs/{first}").text)
        assert _stated(url, first) in page
        cards = html.unescape(get(app, f"/conversations/{third}").text)
        assert f"missed the cache: request 1: {_stated(url, first)}" in cards
        # The vendor's own verdict first (Anthropic's cache diagnostics, answered by the twin), segue's beside it.
        assert "missed the cache: request 1: the vendor says: tools_changed" in cards
        assert "segue agrees: tool definitions changed at tools" in cards
    finally:
        store.close()
