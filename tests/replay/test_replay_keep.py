"""A window bounded to M runs in all (`replay_keep`): older runs are left out, not only collapsed, in steps with
`replay_step`, so requests stop growing in a long conversation and the prefix holds between steps."""

from __future__ import annotations

from typing import Any

import pytest

from segue import Agent, IdempotencyConflictError, ReplayRunError, RunStore
from segue.cache.explain import explain_run
from segue.demo import PROMPT, demo_tools, long_chat
from segue.generated import TextBlock
from segue.providers import AnthropicProvider
from segue.testing import canonical_messages
from segue_twin import Twin
from tests._support.helpers import converse, lookup, policy_provider


def question(turn: int) -> str:
    return f"Question number {turn:02d}?"


def asked(request: Any) -> list[str]:
    """The questions a request carries (the user texts of the replayed runs and of the new input)."""
    return [
        b.text
        for m in request.messages
        if m.role == "user"
        for b in m.content
        if isinstance(b, TextBlock) and b.text.startswith("Question number")
    ]


#: replay_last=2, replay_keep=4, replay_step=3: for each count of earlier runs, (left out, collapsed) - the oldest
#: `left out` runs are not replayed, the next ones up to `collapsed` go as question + answer, the rest in full.
#: Worked out by hand: the window collapses 3 runs at once when 2 + 3 have accumulated (counts 5, 8, 11), and
#: keeps 4 - 2 = 2 of the collapsed ones, so 4 to 6 runs are replayed.
EXPECTED = {
    **dict.fromkeys(range(5), (0, 0)),
    **dict.fromkeys(range(5, 8), (1, 3)),
    **dict.fromkeys(range(8, 11), (4, 6)),
    **dict.fromkeys(range(11, 14), (7, 9)),
}
MOVES = {5, 8, 11}


async def test_the_window_replays_at_most_keep_plus_step_minus_one_runs_and_leaves_older_ones_out(
    store: RunStore,
) -> None:
    provider = policy_provider()
    agent = Agent(provider, "p", [lookup], store)
    ids: list[str] = []
    firsts: list[int] = []  # index of each turn's first request
    for turn in range(14):
        firsts.append(len(provider.requests))
        result = await agent.run(question(turn), runs=ids or None, replay_last=2, replay_keep=4, replay_step=3)
        assert result.status == "success"
        left_out, collapsed = EXPECTED[len(ids)]
        if ids:
            assert result.replay is not None
            assert result.replay.runs_text == ids[left_out:collapsed], turn
            assert result.replay.runs_full == ids[collapsed:], turn
            assert len(ids) < 4 or 4 <= len(ids) - left_out <= 6
        # What the request carries: the kept runs' questions and the new one, none of the left-out runs'.
        assert asked(provider.requests[firsts[turn]]) == [question(t) for t in range(left_out, turn + 1)], turn
        ids.append(result.run_id)
    # S-1 turns out of S, a turn's first request extends the previous turn's last request; a move (a collapse
    # and a drop on the same turn) changes the prefix once.
    for turn in range(1, 14):
        before = canonical_messages(provider.requests[firsts[turn] - 1])
        now = canonical_messages(provider.requests[firsts[turn]])
        assert (now[: len(before)] == before) is (turn not in MOVES), turn


async def test_a_drop_is_a_prefix_change_and_reasoning_follows_the_prefix_rule(store: RunStore) -> None:
    """replay_last=3, replay_keep=3, replay_step=2: every kept run is in full and the window leaves two runs out
    every second turn. The first kept run was produced after the runs now left out, so its reasoning is dropped
    (cause `seed`), the runs of that time follow it, and runs produced since the move keep theirs."""
    agent = Agent(policy_provider(), "p", [lookup], store)
    ids: list[str] = []
    for turn in range(10):
        result = await agent.run(question(turn), runs=ids or None, replay_last=3, replay_keep=3, replay_step=2)
        if ids:
            assert result.replay is not None
            left_out = 0 if len(ids) <= 3 else (len(ids) - 3) // 2 * 2
            assert result.replay.runs_text == []
            assert result.replay.runs_full == ids[left_out:]
            seeds = [w.run_id for w in result.replay.warnings if w.cause == "seed"]
            assert seeds == ([ids[left_out]] if left_out else []), (turn, result.replay.warnings)
            assert result.replay.reasoning_kept == (ids[left_out + 3 :] if left_out else ids), turn
        ids.append(result.run_id)


async def test_all_with_keep_replays_every_kept_run_in_full(store: RunStore) -> None:
    """replay_keep alone (replay_last stays "all"): the latest M runs in full, stepped like any window."""
    agent = Agent(policy_provider(), "p", [lookup], store)
    results = await converse(agent, [question(t) for t in range(8)], replay_keep=2, replay_step=2)
    ids = [r.run_id for r in results]
    for count, result in enumerate(results[1:], start=1):
        assert result.replay is not None
        left_out = 0 if count <= 2 else (count - 2) // 2 * 2
        assert result.replay.runs_full == ids[left_out:count] and result.replay.runs_text == []


async def test_explain_names_the_run_a_moved_window_left_out(store: RunStore) -> None:
    """On the twin (exact bodies, cache markers and all): between moves each turn's first request extends the
    previous turn's last one byte for byte (explain: `extends`), and a move is a `window` change naming the run
    left out."""
    twin = Twin()
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), PROMPT, demo_tools(), store)
    results = await converse(agent, long_chat(7), replay_last=1, replay_keep=1, replay_step=2)
    ids = [r.run_id for r in results]
    for turn in range(1, 7):
        run, previous = store.get_run(ids[turn]), store.get_run(ids[turn - 1])
        assert run is not None and previous is not None
        first = explain_run(run, previous).iterations[0]
        left_out = 0 if turn <= 1 else (turn - 1) // 2 * 2
        if turn in (3, 5):  # the turns where the window moved: two runs left out at once
            assert first.cause == "window", (turn, first)
            assert f"run {ids[left_out - 2]} was replayed before and is now left out" in first.reason
        else:
            assert first.cause == "extends", (turn, first)


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"replay_keep": 0}, "replay_keep must be a whole number >= 1"),
        ({"replay_keep": True}, "replay_keep must be a whole number >= 1"),
        ({"replay_keep": "4"}, "replay_keep must be a whole number >= 1"),
        ({"replay_keep": 4.0}, "replay_keep must be a whole number >= 1"),
        ({"replay_last": 3, "replay_keep": 2}, "replay_keep=2 replays fewer runs than replay_last=3"),
        ({"replay_last": "all", "replay_step": 2}, "needs an int replay_last, got 'all'"),
        ({"replay_keep": 3, "replay_step": 0}, "replay_step must be a whole number >= 1"),
    ],
)
async def test_bad_replay_keep_is_refused_before_any_row(store: RunStore, knobs: dict[str, Any], message: str) -> None:
    agent = Agent(policy_provider(), "p", [lookup], store)
    first = await agent.run("q0")
    before = store.counts()
    with pytest.raises(ReplayRunError, match=message) as caught:
        await agent.run("q1", runs=[first.run_id], **knobs)
    assert caught.value.reason == "invalid"
    assert store.counts() == before


async def test_replay_keep_is_in_the_fingerprint_and_in_retry(store: RunStore) -> None:
    agent = Agent(policy_provider(), "p", [lookup], store)
    ids = [r.run_id for r in await converse(agent, [question(t) for t in range(5)], replay_last=1, replay_keep=2)]
    keyed = await agent.run("q", runs=ids, replay_last=1, replay_keep=2, idempotency_key="k")
    with pytest.raises(IdempotencyConflictError):
        await agent.run("q", runs=ids, replay_last=1, replay_keep=3, idempotency_key="k")
    with pytest.raises(IdempotencyConflictError):
        await agent.run("q", runs=ids, replay_last=1, idempotency_key="k")
    again = await agent.run("q", runs=ids, replay_last=1, replay_keep=2, idempotency_key="k")
    assert again.run_id == keyed.run_id
    retried = await agent.retry(keyed.run_id)
    assert retried.replay is not None and keyed.replay is not None
    assert retried.replay.knobs is not None and retried.replay.knobs.replay_keep == 2
    assert (retried.replay.runs_text, retried.replay.runs_full) == (keyed.replay.runs_text, keyed.replay.runs_full)
    assert keyed.replay.runs_text == ids[3:4] and keyed.replay.runs_full == ids[4:]
