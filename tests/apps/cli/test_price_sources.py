"""Issue 40 item 3: a price's source is a short catalog reference (the file's name and row) wherever it leaves the
process, never an absolute path or a JSON pointer; the long form (pointer and the row's notes) only on request."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from segue import Agent, RunResult, RunStore
from segue.apps.cli.main import main
from segue.providers import AnthropicProvider
from segue.twin import Twin, sample_db
from tests._support.environment import REPO


def _row(model: str) -> int:
    """The model's row in the shipped catalogs/models.json."""
    rows = json.loads((REPO / "catalogs" / "models.json").read_text(encoding="utf-8"))["models"]
    return next(i for i, r in enumerate(rows) if r.get("id") == model)


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, RunResult]:
    url = f"sqlite:///{tmp_path_factory.mktemp('prices') / 'segue.db'}"
    store = RunStore(url)
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()),
        "You answer questions about the shop database.",
        [sample_db.list_tables],
        store,
    )
    try:
        return url, asyncio.run(agent.run("Which tables are there?", tenant_id="acme"))
    finally:
        store.close()


def test_runs_show_prints_the_short_reference_and_the_long_form_only_with_sources(
    priced: tuple[str, RunResult], capsys: pytest.CaptureFixture[str]
) -> None:
    url, result = priced
    row = _row("claude-sonnet-4-6")
    assert main(["runs", "show", result.run_id, "--db", url, "--tenant", "acme"]) == 0
    out = capsys.readouterr().out
    [cost] = [line for line in out.splitlines() if line.startswith("cost: ")]
    assert cost.endswith(f"from claude-sonnet-4-6@anthropic: models.json row {row})"), cost
    assert len(cost) < 160 and str(REPO) not in out and "#/models" not in out and "read 2026-12-01" not in out
    assert main(["runs", "show", result.run_id, "--db", url, "--tenant", "acme", "--sources"]) == 0
    [source] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("price source: ")]
    assert source.startswith(
        "price source: claude-sonnet-4-6@anthropic: models.json#/models/15/configuration/pricing ("
    )
    assert "read 2026-12-01" in source and str(REPO) not in source


def test_the_cost_repr_is_short_and_keeps_the_long_form_as_data(priced: tuple[str, RunResult]) -> None:
    cost = priced[1].cost
    assert cost is not None
    shown = repr(cost)
    assert len(shown) < 250 and "/" not in shown, shown
    assert re.search(r"PriceSource\(model='claude-sonnet-4-6', vendor='anthropic', file='models.json', ", shown)
    [source] = cost.prices
    assert source.pointer == f"/models/{_row('claude-sonnet-4-6')}/configuration/pricing"
    assert source.note is not None and "read 2026-12-01" in source.note
    assert not Path(source.file or "/").is_absolute()


def test_cost_sources_is_the_long_form_runs_show_prints_and_reads_back_from_the_store(
    priced: tuple[str, RunResult], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40 item 3, `cost.sources`: the long form on request, from the result and from the stored run alike
    (its price sources are stored once, segue.store.repeats, and read back whole); the repr stays short."""
    url, result = priced
    cost = result.cost
    assert cost is not None
    row = _row("claude-sonnet-4-6")
    [line] = cost.sources
    assert line.startswith(f"claude-sonnet-4-6@anthropic: models.json#/models/{row}/configuration/pricing (Sources")
    assert "read 2026-12-01" in line and str(REPO) not in line
    assert "sources" not in repr(cost) and "read 2026-12-01" not in repr(cost)
    assert main(["runs", "show", result.run_id, "--db", url, "--tenant", "acme", "--sources"]) == 0
    shown = [x.removeprefix("price source: ") for x in capsys.readouterr().out.splitlines() if x.startswith("price ")]
    assert shown == cost.sources
    store = RunStore(url, read_only=True)
    try:
        detail = store.get_run(result.run_id, tenant_id="acme")
        [summary] = store.list_runs(tenant_id="acme")
    finally:
        store.close()
    assert detail is not None and detail.meta.segue_cost is not None and summary.cost is not None
    assert detail.meta.segue_cost.sources == summary.cost.sources == cost.sources
