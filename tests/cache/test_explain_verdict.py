"""Where a miss is explained, the vendor's verdict comes first and segue's own reasoning stands beside it, saying
plainly where they disagree; and a request whose cause is that the previous request was below the minimum says so
instead of "segue recorded no cause" (issue 40 item 7)."""

from __future__ import annotations

import html
import json

import attrs
import pytest

from segue import Agent, RunStore
from segue.apps.cli.main import main
from segue.cache.explain import explain_run, miss_cause
from segue.cache.reasons import agreement, stored_cause
from segue.demo import shop_db as sample_db
from segue.generated import CacheVerdict, RunNote, Usage
from segue.providers import AnthropicProvider
from segue_twin import Twin

PROMPT = "You answer questions about the shop database. Keep answers short and exact. " * 150
TOOLS = [sample_db.list_tables, sample_db.describe_table, sample_db.run_query]


def test_agreement_reads_the_vendors_words() -> None:
    changed = CacheVerdict(status="changed", reason="tools_changed", missed_tokens=10)
    assert agreement("tools", changed) == "agree"
    assert agreement("system", changed) == "disagree"
    assert agreement("extends", CacheVerdict(status="unchanged")) == "agree"
    assert agreement("messages", CacheVerdict(status="unchanged")) == "disagree"
    assert agreement("window", CacheVerdict(status="changed", reason="messages_changed")) == "agree"
    assert agreement("extends", CacheVerdict(status="changed", reason="prompt_cache_key_changed")) == "disagree"
    for status in ("pending", "not_found", "unavailable", "unknown"):
        assert agreement("tools", CacheVerdict(status=status)) == "open"  # type: ignore[arg-type]
    assert agreement("tools", None) is None


def test_the_previous_request_below_the_minimum_is_named() -> None:
    """Issue 40 item 7: the second request extended the first intact and read nothing because the first was below
    the minimum (nothing was written): the note says that, not "segue recorded no cause"."""
    below = RunNote(kind="cache-below-minimum", message="below", limit=1024, measured=900, iteration=1, count=1)
    before = Usage(input_tokens=900, output_tokens=5, cache_read_tokens=0, cache_write_tokens=0)
    now = Usage(input_tokens=1_300, output_tokens=5, cache_read_tokens=0, cache_write_tokens=1_300)
    said = stored_cause("extends", now, below, before)
    assert said is not None and said.startswith(
        "nothing to read: the previous request (900 tokens) was below the 1,024"
    )
    assert "recorded no cause" not in said
    assert "recorded no cause" in (stored_cause("extends", now, below, attrs.evolve(before, input_tokens=2_000)) or "")


async def test_explain_puts_the_verdict_first_and_says_where_segue_disagrees(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    first = await Agent(
        AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), PROMPT, TOOLS, store
    ).run("Which tables are there?")
    reordered = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), PROMPT, list(reversed(TOOLS)), store
    )
    second = await reordered.run("How many customers?", runs=[first.run_id], replay_last="all")
    run, previous = store.get_run(second.run_id), store.get_run(first.run_id)
    assert run is not None and previous is not None
    explained = explain_run(run, previous)
    it = explained.iterations[0]
    assert it.vendor_verdict is not None and it.vendor_verdict.reason == "tools_changed"
    assert (it.cause, it.agreement) == ("tools", "agree")
    line = miss_cause(explained)
    assert line is not None and line.index("the vendor says: tools_changed") < line.index("segue agrees")

    # A verdict segue's own comparison does not share is said plainly, both shown.
    stored = run.llm_interactions[0]
    disputed = attrs.evolve(
        run,
        llm_interactions=[
            attrs.evolve(stored, cache_verdict=CacheVerdict(status="changed", reason="model_changed")),
            *run.llm_interactions[1:],
        ],
    )
    it = explain_run(disputed, previous).iterations[0]
    assert it.agreement == "disagree"
    line = miss_cause(explain_run(disputed, previous))
    assert line is not None and "the vendor says: model_changed; segue disagrees, it found: tool definitions" in line


async def test_runs_explain_text_and_json_lead_with_the_vendor(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    from pathlib import Path

    url = f"sqlite:///{Path(str(tmp_path)) / 'segue.db'}"
    twin, store = Twin(), RunStore(url)
    first = await Agent(
        AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), PROMPT, TOOLS, store
    ).run("Which tables are there?")
    edited = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()),
        "Today is Tuesday. " + PROMPT,
        TOOLS,
        store,
    )
    second = await edited.run("How many customers?", runs=[first.run_id], replay_last="all")
    store.close()
    main(["runs", "explain", second.run_id, "--db", url])
    out = capsys.readouterr().out
    lines = out.splitlines()
    said = next(i for i, x in enumerate(lines) if x.strip().startswith("1: the vendor says: system_changed"))
    assert lines[said + 1].strip().startswith("segue's comparison: system prompt changed"), out
    main(["runs", "explain", second.run_id, "--db", url, "--json"])
    first_request = json.loads(capsys.readouterr().out)["iterations"][0]
    assert first_request["vendor_verdict"]["reason"] == "system_changed"
    assert (first_request["cause"], first_request["agreement"]) == ("system", "agree")
    main(["runs", "show", second.run_id, "--db", url])
    shown = capsys.readouterr().out
    assert "VENDOR SAYS" in shown and "system_changed" in shown

    # The dashboard's run page: the vendor's verdict first in the request's row, segue's reasoning after it.
    from segue.apps.dashboard import create_app
    from tests._support.dashboard import get

    store = RunStore(url)
    try:
        page = html.unescape(get(create_app(store), f"/runs/{second.run_id}").text)
    finally:
        store.close()
    said = page.index("the vendor says: system_changed")
    assert said < page.index("system prompt changed at", said)


async def test_a_request_after_one_below_the_minimum_says_so_end_to_end(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 40 item 7 on the twin: a prompt that crosses claude-sonnet-4-6's 1,024-token minimum only at its third
    request reads nothing there, because the second (below it) wrote nothing; `runs explain` says that."""
    store = RunStore("sqlite:///:memory:")
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()),
        "You answer questions about the shop database. " * 60,
        TOOLS,
        store,
    )
    result = await agent.run("How many customers are in each country?")
    run = store.get_run(result.run_id)
    assert run is not None
    calls = run.llm_interactions
    crossing = next(i for i, c in enumerate(calls) if c.usage.input_tokens >= 1_024)
    assert crossing >= 1 and calls[crossing].usage.cache_read_tokens == 0, "nothing was written before it"
    it = explain_run(run).iterations[crossing]
    assert it.cause == "extends" and it.note is not None
    before = calls[crossing - 1].usage.input_tokens
    assert it.note.startswith(f"nothing to read: the previous request ({before:,} tokens) was below the 1,024-token")
    assert "recorded no cause" not in it.note
