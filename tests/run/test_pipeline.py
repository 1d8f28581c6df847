"""The run pipeline's order: validate everything before any I/O, plan once (the seed of the new run's prefix
descriptor included), and record by appending only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import segue.replay.prefix_rule as prefix_rule
import segue.run.plan as plan_module
from segue import Agent, InputError, ReplayRunError, RunStore
from segue.run.plan import Planner, RunPlan
from segue.testing import ScriptedProvider
from tests._support.helpers import LookupPolicy, converse, lookup, policy_provider, script, state_text

STORE_CALLS = ("find_idempotent", "load_runs", "get_run", "create_run", "record_iteration", "finish_run")
A_RUN = "01J9Z3M6Q2W8X4Y7T5R1N0P3K6"


def spy(store: RunStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the store methods called, in order."""
    calls: list[str] = []

    def counted(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kw: Any) -> Any:
            calls.append(name)
            return real(*args, **kw)

        return call

    for name in STORE_CALLS:
        monkeypatch.setattr(store, name, counted(name, getattr(store, name)))
    return calls


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"runs": [A_RUN], "replay_last": -1, "idempotency_key": "k"}, ReplayRunError),
        # Stable context with runs= is compared with the conversation's, which takes the replay's read
        # (tests/replay/test_replay_window.py); a bad replay_step is an argument like any other.
        ({"runs": [A_RUN], "replay_last": "all", "replay_step": 2}, ReplayRunError),
        ({"runs": [A_RUN], "metadata": {"x": float("nan")}, "idempotency_key": "k"}, InputError),
        ({"runs": [A_RUN], "history": [{"role": "assistant", "content": []}]}, InputError),
    ],
    ids=["knob", "replay-step", "metadata", "history"],
)
async def test_every_argument_is_checked_before_the_store_is_read(
    arguments: dict[str, Any], error: type[Exception], sqlite_store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validation is one step, before the idempotency lookup and the replay's read: a bad argument never costs a
    query (and a replayed run that does not exist is not what the caller hears about first)."""
    calls = spy(sqlite_store, monkeypatch)
    agent = Agent(ScriptedProvider.of(), "p", [lookup], sqlite_store)
    with pytest.raises(error):
        await agent.run("question", **arguments)
    assert calls == []


async def test_the_steps_run_in_order(sqlite_store: RunStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """idempotency lookup -> the replay's one read -> the run row -> one write per step (the response before its
    tools, the tool round's result with its tool message, the next response) -> the end."""
    agent = Agent(policy_provider(), "p", [lookup], sqlite_store)
    (first,) = await converse(agent, ["first"])
    calls = spy(sqlite_store, monkeypatch)
    await agent.run("second", runs=[first.run_id], replay_last="all", idempotency_key="k2")
    writes = ["record_iteration"] * 3
    assert calls == ["find_idempotent", "load_runs", "create_run", *writes, "finish_run"]


async def test_recording_only_appends_when_the_layout_restores_iteration_one(
    sqlite_store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An auto layout decided appendOnly by the first response restores iteration 1's fragment before iteration 1
    is recorded: every write appends after what was written, and each trace keeps the iteration it came from."""
    writes: list[tuple[int, int]] = []
    real = sqlite_store.record_iteration

    def record(run_id: str, **kw: Any) -> None:
        writes.append((kw["first_index"], len(kw["traces"])))
        real(run_id, **kw)

    monkeypatch.setattr(sqlite_store, "record_iteration", record)
    provider = ScriptedProvider.of(*script(), vendor="openai", model="gpt-4.1-mini")
    agent = Agent(provider, "p", [lookup], sqlite_store, trailing_state=state_text)
    result = await agent.run("go")
    detail = sqlite_store.get_run(result.run_id)
    assert detail is not None and detail.meta is not None and detail.meta.segue_layout is not None
    assert detail.meta.segue_layout.restored_iteration == 1
    # After the user message: the fragment and the assistant (before its tools), the tool message, ...
    assert writes == [(1, 2), (3, 1), (4, 2), (6, 1), (7, 2)]
    assert [t.iteration for t in detail.traces] == [0, 1, 1, 1, 2, 2, 2, 3, 3]


async def test_the_new_runs_seed_is_hashed_once_by_the_planner(
    sqlite_store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = Agent(policy_provider(LookupPolicy()), "p", [lookup], sqlite_store)
    earlier = await converse(agent, ["one", "two"], replay_last="all")
    plans: list[RunPlan] = []
    real_plan = Planner.plan

    async def plan(self: Planner, request: Any) -> RunPlan:
        plans.append(await real_plan(self, request))
        return plans[-1]

    def rehashed(*args: Any, **kw: Any) -> str:
        raise AssertionError("the prefix was hashed again after planning")

    monkeypatch.setattr(Planner, "plan", plan)
    monkeypatch.setattr(plan_module, "seed_of", rehashed)
    monkeypatch.setattr(prefix_rule, "seed_of", rehashed)
    result = await agent.run("three", runs=[r.run_id for r in earlier], replay_last="all")
    detail = sqlite_store.get_run(result.run_id)
    assert detail is not None and detail.prefix is not None and result.replay is not None
    (planned,) = plans
    assert detail.prefix.seed == planned.seeds[planned.path]
    assert result.replay.reasoning_kept == [r.run_id for r in earlier]
