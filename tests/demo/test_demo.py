"""The headline demo on the twin: replay stops re-exploration and keeps the cache warm; history= does not."""

from __future__ import annotations

import pytest

from segue import RunStore
from segue.demo.chat import format_report, run_chat
from segue_twin import Twin


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_replay_all_reads_from_cache_and_never_re_explores(vendor: str) -> None:
    reports = await run_chat("all", vendor=vendor, twin=Twin())  # type: ignore[arg-type]
    assert reports[0].tool_calls[0] == "list_tables" and reports[0].tool_calls.count("describe_table") == 4
    for r in reports[1:]:
        assert r.tool_calls == ["run_query"], (r.turn, r.tool_calls)
        assert r.cached_share >= 0.85, (r.turn, r.usage)
        assert r.replay is not None and r.replay.reasoning_kept == r.replay.runs_full and not r.replay.warnings


async def test_history_only_re_explores() -> None:
    reports = await run_chat("history", vendor="anthropic", twin=Twin())
    for r in reports[1:]:
        assert "list_tables" in r.tool_calls and "describe_table" in r.tool_calls, (r.turn, r.tool_calls)
        assert r.replay is None
    replayed = await run_chat("all", vendor="anthropic", twin=Twin())
    assert sum(r.cost or 0 for r in replayed) < sum(r.cost or 0 for r in reports)


async def test_tool_added_on_turn_three_drops_reasoning_for_cause_tools() -> None:
    reports = await run_chat("tool_added", vendor="anthropic", twin=Twin())
    third = reports[2].replay
    assert third is not None
    assert [w.cause for w in third.warnings] == ["tools", "tools"], "each run names its own cause"
    assert reports[2].cached_share < reports[1].cached_share
    # Issue 40 item 8: the report said "warnings: tools; tools"; it says each distinct warning once, in words.
    lines = format_report(reports, title="tool_added").splitlines()
    line = next(x for x in lines if "dropped 2" in x)
    assert line.endswith("warnings: reasoning dropped: the tool definitions changed since the run (2 runs)"), line


async def test_moving_window_replays_older_turns_as_question_and_answer(tmp_path: object) -> None:
    store = RunStore(f"sqlite:///{tmp_path}/demo.db")
    reports = await run_chat("last3", vendor="anthropic", twin=Twin(), store=store)
    fifth = reports[4].replay
    assert fifth is not None and len(fifth.runs_text) == 1 and len(fifth.runs_full) == 3
    assert "seed" in [w.cause for w in fifth.warnings], fifth.warnings
    assert store.list_runs(tenant_id="demo")[0].continued_from == reports[3].run_id
