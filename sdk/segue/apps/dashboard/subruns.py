"""A run's sub-runs (segue.run.subrun) as the dashboard's run page and `segue runs show` list them: each with its
depth, agent, the call that made it, status, cache share and cost, and the run's total with them all."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from segue._core.usage import cache_parts
from segue.apps.dashboard.views import CostFn, money, share, shown_cost, twin_money
from segue.generated import ChildRun, RunCost, RunDetail, RunSummary
from segue.run.lineage import total_cost


@attrs.frozen(kw_only=True)
class SubRunRow:
    depth: int
    run_id: str
    agent: str
    call_id: str
    status: str
    read_share: str
    cost: str


def subrun_rows(
    run: RunDetail, descendants: Sequence[tuple[int, RunSummary]], price: CostFn
) -> tuple[list[SubRunRow], str]:
    """The rows, depth first, and the run's cost with every sub-run (rows empty: no sub-runs)."""
    rows = [
        SubRunRow(
            depth=level,
            run_id=child.run_id,
            agent=child.agent_name,
            call_id=child.parent_call_id or "?",
            status=child.status,
            read_share=share(cache_parts(child.usage).read_share),
            cost=shown_cost(child, price)[0],
        )
        for level, child in descendants
    ]
    own = run.meta.segue_cost if run.meta is not None else None
    return rows, total_text(own, [c for _, c in descendants])


def total_text(own: RunCost | None, descendants: Sequence[RunSummary]) -> str:
    """The run's own cost plus every sub-run's (each priced on its own path when it was recorded)."""
    parts = [
        ChildRun(run_id=c.run_id, agent_name=c.agent_name, call_id="", status=c.status, usage=c.usage, cost=c.cost)
        for c in descendants
    ]
    total = total_cost(own, parts)
    if total is None:
        return "—"
    if total.twin_usd is not None:
        return twin_money(total.twin_usd, total.usd)
    return money(total.usd) if total.usd is not None else f"unknown ({total.missing or 'a price is missing'})"
