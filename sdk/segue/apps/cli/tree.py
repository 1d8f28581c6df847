"""Runs as a tree (segue.run.subrun) in the terminal: `segue runs show` and `segue runs explain` list a run's
sub-runs under it (apps/dashboard/subruns.py builds the rows), `segue runs list` puts each sub-run right under its
parent."""

from __future__ import annotations

from collections.abc import Sequence

from segue.apps.cli.render import clean
from segue.apps.dashboard.subruns import subrun_rows
from segue.apps.dashboard.views import CostFn
from segue.generated import RunDetail, RunSummary


def tree_lines(run: RunDetail, descendants: Sequence[tuple[int, RunSummary]], price: CostFn) -> list[str]:
    """The run's sub-runs, depth first, indented by depth, then the run's cost with them all (none: no lines)."""
    rows, total = subrun_rows(run, descendants, price)
    if not rows:
        return []
    out = [f"sub-runs: {len(rows)}"]
    for r in rows:
        out.append(
            f"{'  ' * r.depth}⤷ {r.run_id} {clean(r.agent, 24)} (call {clean(r.call_id, 40)}) {r.status} · cached "
            f"{r.read_share} · cost {r.cost}"
        )
    out.append(f"total with sub-runs: {clean(total)}")
    return out


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
