"""A window that moves in steps (`replay_step`), and the replayed region fitted to the context window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from segue import Agent, ContextBlock, IdempotencyConflictError, InputError, ReplayRunError, RunStore, SingleCall
from segue.catalog import Catalog
from segue.demo import PROMPT, QUESTIONS, demo_tools
from segue.providers import AnthropicProvider
from segue.testing import canonical_messages
from segue_twin import Twin
from tests._support.helpers import catalog_layer, converse, lookup, policy_provider


def seeds(result: Any) -> list[str]:
    return [w.run_id for w in result.replay.warnings if w.cause == "seed"]


async def test_a_stepped_window_collapses_step_runs_at_once_and_keeps_the_prefix_between(store: RunStore) -> None:
    """replay_last=2, replay_step=3: 2 to 4 runs in full; the window moves on every third turn only (one `seed`
    drop per position), and between moves each turn's request extends the one before it."""
    provider = policy_provider()
    agent = Agent(provider, "p", [lookup], store)
    ids: list[str] = []
    firsts: list[int] = []  # index of each turn's first request
    for turn in range(12):
        firsts.append(len(provider.requests))
        result = await agent.run(f"q{turn}", runs=ids or None, replay_last=2, replay_step=3)
        assert result.status == "success"
        if ids:
            assert result.replay is not None
            collapsed = 0 if len(ids) <= 2 else (len(ids) - 2) // 3 * 3
            assert result.replay.runs_text == ids[:collapsed]
            assert result.replay.runs_full == ids[collapsed:]
            assert 2 <= len(result.replay.runs_full) <= 4 or len(ids) < 2
            # One `seed` drop per window position: its first full run, produced before the window moved; the
            # rest of the runs of that time follow it, and every run produced since keeps its reasoning.
            assert seeds(result) == ([ids[collapsed]] if collapsed else []), (turn, result.replay.warnings)
            assert result.replay.reasoning_kept == ids[collapsed + 2 :] if collapsed else ids
        ids.append(result.run_id)
    # Between moves, a turn's first request extends the previous turn's last request: the cache prefix holds.
    moved_turns = {t for t in range(12) if t > 2 and (t - 2) % 3 == 0}
    for turn in range(1, 12):
        if turn in moved_turns:
            continue
        before, now = (
            canonical_messages(provider.requests[firsts[turn] - 1]),
            canonical_messages(provider.requests[firsts[turn]]),
        )
        assert now[: len(before)] == before, turn


async def test_step_one_is_todays_window(store: RunStore) -> None:
    """replay_step=1 (and no replay_step) collapse one run per turn: a `seed` drop on every turn past N."""
    agent = Agent(policy_provider(), "p", [lookup], store)
    stepped = await converse(agent, [f"q{i}" for i in range(6)], replay_last=2, replay_step=1)
    plain = await converse(agent, [f"q{i}" for i in range(6)], replay_last=2)
    for a, b in zip(stepped[1:], plain[1:], strict=True):
        assert a.replay is not None and b.replay is not None
        assert (len(a.replay.runs_full), len(a.replay.runs_text)) == (len(b.replay.runs_full), len(b.replay.runs_text))
    assert [len(seeds(r)) for r in stepped[3:]] == [1, 1, 1]


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"replay_last": 3, "replay_step": 0}, "replay_step must be a whole number >= 1"),
        ({"replay_last": 3, "replay_step": True}, "replay_step must be a whole number >= 1"),
        ({"replay_last": 3, "replay_step": "2"}, "replay_step must be a whole number >= 1"),
        ({"replay_last": "all", "replay_step": 2}, "needs an int replay_last, got 'all'"),
    ],
)
async def test_bad_replay_step_is_refused_before_any_row(store: RunStore, knobs: dict[str, Any], message: str) -> None:
    agent = Agent(policy_provider(), "p", [lookup], store)
    first = await agent.run("q0")
    before = store.counts()
    with pytest.raises(ReplayRunError, match=message) as caught:
        await agent.run("q1", runs=[first.run_id], **knobs)
    assert caught.value.reason == "invalid"
    assert store.counts() == before


async def test_replay_step_is_in_the_fingerprint_and_in_retry(store: RunStore) -> None:
    agent = Agent(policy_provider(), "p", [lookup], store)
    ids = [r.run_id for r in await converse(agent, [f"q{i}" for i in range(4)], replay_last=1, replay_step=2)]
    keyed = await agent.run("q", runs=ids, replay_last=1, replay_step=2, idempotency_key="k")
    with pytest.raises(IdempotencyConflictError):
        await agent.run("q", runs=ids, replay_last=1, replay_step=3, idempotency_key="k")
    again = await agent.run("q", runs=ids, replay_last=1, replay_step=2, idempotency_key="k")
    assert again.run_id == keyed.run_id
    retried = await agent.retry(keyed.run_id)
    assert retried.replay is not None and keyed.replay is not None
    assert retried.replay.knobs.replay_step == 2
    assert retried.replay.runs_full == keyed.replay.runs_full == ids[2:]


def small_window(tmp_path: Path, tokens: int) -> Catalog:
    """The packaged catalog with a context window of `tokens` on claude-sonnet-4-6 at Anthropic (a test layer:
    the packaged catalog gives no window for it), so a short chat outgrows it."""
    return catalog_layer(tmp_path, {"context_window": tokens}, file="window.json")


def shop_agent(store: RunStore, catalog: Catalog, twin: Twin) -> Agent:
    provider = AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client())  # max_tokens 4096
    return Agent(provider, PROMPT, demo_tools(), store, catalog=catalog, max_iterations=8)


async def test_all_beyond_the_context_window_collapses_then_leaves_out_the_oldest_runs(
    store: RunStore, tmp_path: Path
) -> None:
    """replay_last="all" on a 7,000-token window less 4,096 for output: the oldest full runs collapse, then the
    oldest question + answer pairs go, each with a `budget` warning, and every run completes."""
    agent = shop_agent(store, small_window(tmp_path, 7_000), Twin())
    ids: list[str] = []
    collapsed = left_out = False
    for question in QUESTIONS * 6:
        result = await agent.run(question, runs=ids or None, replay_last="all")
        assert result.status == "success", result.error
        if result.replay is not None:
            summary = result.replay
            gone = [r for r in ids if r not in summary.runs_full and r not in summary.runs_text]
            budget = {w.run_id: w.message for w in summary.warnings if w.cause == "budget"}
            assert set(budget) == set(summary.runs_text) | set(gone)
            assert all(
                "claude-sonnet-4-6's context window (7,000 tokens, less 4,096 for output)" in m for m in budget.values()
            )
            assert gone == ids[: len(gone)], "the oldest go first"
            collapsed, left_out = collapsed or bool(summary.runs_text), left_out or bool(gone)
            first = store.get_run(result.run_id).llm_interactions[0]  # type: ignore[union-attr]
            assert first.usage.input_tokens <= 7_000 - 4_096
        ids.append(result.run_id)
    assert collapsed and left_out


async def test_a_run_whose_own_input_exceeds_the_window_is_refused_before_any_row(
    store: RunStore, tmp_path: Path
) -> None:
    twin = Twin()
    agent = shop_agent(store, small_window(tmp_path, 5_700), twin)
    before = store.counts()
    with pytest.raises(InputError, match=r"does not fit anthropic/claude-sonnet-4-6's context window \(5,700 tokens"):
        await agent.run("How many customers are there? " + "Please be precise. " * 400)
    assert store.counts() == before and not twin.exchanges


async def test_runs_alone_replay_every_run_in_full(store: RunStore) -> None:
    """Issue 27 (c): `runs=ids` with no replay_last replays the runs in full (tool calls and results too), so the
    model does not re-explore what it already looked up; a SingleCall, which replays text only, keeps 0."""
    agent = Agent(policy_provider(), "p", [lookup], store)
    ids = [r.run_id for r in await converse(agent, ["a", "b", "c"])]
    result = await agent.run("d", runs=ids)
    assert result.replay is not None
    assert (result.replay.knobs.replay_last, result.replay.runs_full, result.replay.runs_text) == ("all", ids, [])
    single = SingleCall(policy_provider(), "p", store)
    answered = await single.run("e", runs=ids)
    assert answered.replay is not None and answered.replay.runs_text == ids


async def test_a_conversation_keeps_the_stable_context_it_started_with(store: RunStore) -> None:
    """Issue 27 (a): turn 1's placement="stable" context is the conversation's. Later turns with runs= send it
    again (beside the system prompt, where turn 1 had it), so turn 1's reasoning is kept (no `system` cause) and
    the system cache holds; repeating it is allowed, other stable context is refused before any row."""
    provider = policy_provider()
    agent = Agent(provider, "p", [lookup], store)
    policy = ContextBlock(text="Refunds within 30 days.", placement="stable")
    first = await agent.run("a", context=[policy])
    second = await agent.run("b", runs=[first.run_id])
    third = await agent.run("c", runs=[first.run_id, second.run_id], context=[policy])
    heads = [r.stable_head for r in provider.requests]
    assert heads[0] is not None and set(heads) == {heads[0]}
    for result in (second, third):
        assert result.replay is not None and result.replay.warnings == []
    assert third.replay is not None and third.replay.reasoning_kept == [first.run_id, second.run_id]
    retried = await agent.retry(second.run_id)  # its stored request names the context it was sent with
    assert retried.status == "success" and provider.requests[-1].stable_head == heads[0]
    before = store.counts()
    other = ContextBlock(text="Refunds within 60 days.", placement="stable")
    with pytest.raises(ReplayRunError, match=f"differs from the stable context run {first.run_id}") as caught:
        await agent.run("d", runs=[first.run_id], context=[other])
    assert caught.value.reason == "invalid" and store.counts() == before
