"""A window that moves in steps (`replay_step`), and the replayed region fitted to the context window."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import converse, lookup, policy_provider

from segue import Agent, IdempotencyConflictError, ReplayRunError, RunStore
from segue.testing import canonical_messages


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
