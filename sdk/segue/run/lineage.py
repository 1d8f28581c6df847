"""Who called a run: the link from a sub-run to the run whose tool call made it (segue.run.subrun), and the
roll-up of a run's cost with its sub-runs'.

While a run's tool runs, `CALLER` holds that run and the call (set by segue.run.tool_calls around each call, in the
call's own task, so concurrent calls never see each other's). A sub-agent offered as a tool reads it to link its
run to the caller, to inherit the tenant and the caller's chain of agents (the depth limit), and to hand its result
back for the caller's total cost.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from typing import Any

import attrs

from segue.generated import ChildRun, RunCost

#: How deep sub-runs may nest by default (a top-level run is depth 0): agents that offer each other, or an agent
#: that forks itself, stop here rather than recursing until the money runs out.
DEFAULT_MAX_DEPTH = 3


@attrs.frozen(kw_only=True)
class Parent:
    """The link a sub-run is recorded with: its parent run, the parent's tool call, and the agents from the
    top-level run down to the parent (its `chain`; the sub-run's depth is its length)."""

    run_id: str
    call_id: str
    chain: tuple[str, ...]
    tenant_id: str
    fork: bool = False


@attrs.frozen(kw_only=True)
class Caller:
    """The run whose tool is running: its state (segue.run.state.RunState), the call, and its pipeline (a fork runs
    the caller's own agent)."""

    state: Any
    call_id: str
    pipeline: Any
    agent: str
    #: The app's approval of this call when the run was resumed (None: no decision was given for it): a sub-run
    #: that paused for approval is resumed with it.
    decision: bool | None = None

    @property
    def chain(self) -> tuple[str, ...]:
        parent: Parent | None = self.state.request.parent
        return (*parent.chain, self.agent) if parent is not None else (self.agent,)

    def link(self, *, fork: bool = False) -> Parent:
        return Parent(
            run_id=self.state.run_id,
            call_id=self.call_id,
            chain=self.chain,
            tenant_id=self.state.request.tenant_id,
            fork=fork,
        )


CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("segue_caller", default=None)


def total_cost(own: RunCost | None, children: Iterable[ChildRun]) -> RunCost | None:
    """`own` plus each child's total (its own cost when it made no sub-run): usd and twin_usd are sums, absent
    when any part lacks them (`missing` names the first part that does); the price sources are each part's, once.
    None when there are no children."""
    parts = [own, *((c.total_cost or c.cost) for c in children)]
    if len(parts) == 1:
        return None
    usd: float | None = 0.0
    twin: float | None = None
    missing: str | None = None
    prices: list[Any] = []
    for i, part in enumerate(parts):
        who = "the run" if i == 0 else "a sub-run"
        if part is None:
            usd, missing = None, missing or f"{who} has no cost recorded"
            continue
        if part.usd is None:
            usd, missing = None, missing or part.missing or f"{who} has no usd"
        elif usd is not None:
            usd += part.usd
        if part.twin_usd is not None:
            twin = (twin or 0.0) + part.twin_usd
        prices.extend(p for p in part.prices if p not in prices)
    return RunCost(usd=usd, twin_usd=twin, missing=missing if usd is None else None, prices=prices)
