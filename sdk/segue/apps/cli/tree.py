"""Runs as a tree (segue.run.subrun): a run's sub-runs under it, each with its cache share and cost, and the total
(`segue runs show`, `segue runs explain`); `segue runs list` puts each sub-run right under its parent."""

from __future__ import annotations

from collections.abc import Sequence

from segue._core.usage import cache_parts
from segue.apps.cli.render import clean, share
from segue.apps.dashboard.views import CostFn, money, shown_cost, twin_money
from segue.generated import ChildRun, RunCost, RunDetail, RunSummary
from segue.run.lineage import total_cost


def tree_lines(run: RunDetail, descendants: Sequence[tuple[int, RunSummary]], price: CostFn) -> list[str]:
    """The run's sub-runs, depth first, indented by depth, then the run's cost with them all (none: no lines)."""
    if not descendants:
        return []
    out = [f"sub-runs: {len(descendants)}"]
    for level, child in descendants:
        call = f" (call {clean(child.parent_call_id or '?', 40)})"
        out.append(
            f"{'  ' * level}⤷ {child.run_id} {clean(child.agent_name, 24)}{call} {child.status} · cached "
            f"{share(cache_parts(child.usage).read_share)} · cost {shown_cost(child, price)[0]}"
        )
    own = run.meta.segue_cost if run.meta is not None else None
    out.append(f"total with sub-runs: {total_text(own, [c for _, c in descendants])}")
    return out


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
    return money(total.usd) if total.usd is not None else f"unknown ({clean(total.missing or '', 80)})"


def nested(runs: Sequence[RunSummary]) -> list[RunSummary]:
    """The page's runs with each sub-run right under its parent (when the parent is on the page), in page order."""
    on_page = {r.run_id for r in runs}
    children: dict[str, list[RunSummary]] = {}
    for r in runs:
        if r.parent_run_id in on_page:
            children.setdefault(r.parent_run_id or "", []).append(r)
    out: list[RunSummary] = []

    def add(run: RunSummary) -> None:
        out.append(run)
        for child in sorted(children.get(run.run_id, []), key=lambda c: c.run_id):
            add(child)

    for r in runs:
        if r.parent_run_id not in on_page:
            add(r)
    return out
