"""Hypothesis: for random conversations, replay planning keeps the invariants vendors rely on.

- roles alternate (user -> assistant -> [tool -> assistant]* -> user ...), starting with user, ending with assistant;
- a tool call is never separated from its result;
- reasoning is never kept after a run whose reasoning was dropped.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segue.generated import (
    Message,
    PrefixDescriptor,
    ReasoningBlock,
    ReplayKnobs,
    RunMeta,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Trace,
    Usage,
)
from segue.replay.planner import plan_replay
from segue.replay.prefix_rule import CurrentPrefix, seed_of
from segue.store.records import StoredRun

CURRENT = CurrentPrefix(
    vendor="v", model="m", system_hash="sha256:" + "1" * 64, tools_hash="sha256:" + "2" * 64, tool_hashes={}
)
ALLOWED = {("user", "assistant"), ("assistant", "tool"), ("tool", "assistant"), ("assistant", "user")}


@st.composite
def conversation(draw: Any) -> tuple[list[StoredRun], ReplayKnobs]:
    ids = itertools.count()
    n_runs = draw(st.integers(1, 6))
    runs: list[StoredRun] = []
    for r in range(n_runs):
        run_id = f"01J{r:023d}"
        messages = [Message(role="user", content=[TextBlock(text=f"question {r}")])]
        for _ in range(draw(st.integers(0, 3))):
            calls = [ToolCallBlock(id=f"c{next(ids)}", name="t", arguments={}) for _ in range(draw(st.integers(1, 3)))]
            thinking = [ReasoningBlock(vendor="v", format="f", text="t", signature="s")] if draw(st.booleans()) else []
            messages.append(Message(role="assistant", content=[*thinking, *calls]))
            if draw(st.integers(0, 9)) == 0:
                break  # died before the results were stored
            messages.append(
                Message(role="tool", content=[ToolResultBlock(tool_call_id=c.id, content="r") for c in calls])
            )
        answered = messages[-1].role != "assistant" and draw(st.booleans())
        if answered:
            messages.append(Message(role="assistant", content=[TextBlock(text=f"answer {r}")]))
        status = "success" if answered else draw(st.sampled_from(["error", "max_iterations", "cancelled"]))
        meta = RunMeta()
        if draw(st.integers(0, 5)):
            # Usually the descriptor of a run replayed with every earlier run in full; sometimes a stale one.
            preceding = (
                plan_replay(
                    {x.run_id: x for x in runs},
                    ReplayKnobs(runs=[x.run_id for x in runs], replay_last="all", replay_reasoning=True),
                    CURRENT,
                ).messages
                if runs
                else []
            )
            seed = seed_of(preceding) if draw(st.integers(0, 4)) else "sha256:" + "9" * 64
            meta = RunMeta(
                segue_prefix=PrefixDescriptor(
                    schema_version=1,
                    vendor="v",
                    model=draw(st.sampled_from(["m", "m", "m", "m2"])),
                    system_hash=CURRENT.system_hash,
                    tools_hash=CURRENT.tools_hash,
                    seed=seed,
                )
            )
        runs.append(
            StoredRun(
                run_id=run_id,
                tenant_id="t",
                status=status,
                input=f"question {r}",
                answer=f"answer {r}" if answered else None,
                meta=meta,
                traces=[Trace(index=i, message=m) for i, m in enumerate(messages)],
                usage=Usage(input_tokens=0, output_tokens=0),
            )
        )
    knobs = ReplayKnobs(
        runs=[x.run_id for x in runs],
        replay_last=draw(st.one_of(st.just("all"), st.integers(0, 6))),
        replay_reasoning=draw(st.booleans()),
        replay_budget_tokens=draw(st.one_of(st.none(), st.integers(20, 2000))),
    )
    return runs, knobs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation())
def test_planning_invariants(case: tuple[list[StoredRun], ReplayKnobs]) -> None:
    runs, knobs = case
    plan = plan_replay({r.run_id: r for r in runs}, knobs, CURRENT)
    messages = plan.messages
    if messages:
        assert messages[0].role == "user" and messages[-1].role == "assistant"
    for a, b in itertools.pairwise(messages):
        assert (a.role, b.role) in ALLOWED, [m.role for m in messages]
    for i, m in enumerate(messages):
        calls = {c.id for c in m.content if isinstance(c, ToolCallBlock)}
        if calls:
            following = messages[i + 1] if i + 1 < len(messages) else None
            assert following is not None and following.role == "tool"
            assert {r.tool_call_id for r in following.content if isinstance(r, ToolResultBlock)} == calls
    dropped_at = None
    for run_id in plan.summary.runs_full:
        if run_id in plan.summary.reasoning_dropped and dropped_at is None:
            dropped_at = run_id
        if dropped_at is not None:
            assert run_id not in plan.summary.reasoning_kept
    kept_blocks = sum(isinstance(b, ReasoningBlock) for m in messages for b in m.content)
    if not plan.summary.reasoning_kept:
        assert kept_blocks == 0
