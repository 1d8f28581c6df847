"""The run list page's shape: one page of runs grouped into conversations, and what an empty page says.

A conversation is the runs linked by `continued_from`; on one page of the newest runs its turns can lie among
other runs. The page shows each conversation's turns together (newest first, where its newest turn falls in the
list), so a reader sees threads instead of a flat list of turns.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from segue._core.run_text import other_tenants
from segue.apps.dashboard.views import CostFn, RunRow, run_row
from segue.generated import RunSummary


@attrs.frozen(kw_only=True)
class RunGroup:
    """The runs of one conversation on this page, newest first; a lone run is a group of one."""

    rows: list[RunRow]
    #: The oldest turn on this page continues a run that is not on it (an older page, or another tenant's).
    continues_earlier: bool

    @property
    def newest(self) -> RunRow:
        return self.rows[0]


def run_groups(runs: Sequence[RunSummary], cost: CostFn) -> list[RunGroup]:
    """`runs` (newest first) grouped by conversation: two runs are in one group when one continued from the
    other, directly or through runs of this page. Groups come in the order of their newest run."""
    on_page = {r.run_id for r in runs}
    root: dict[str, str] = {}

    def find(run_id: str) -> str:
        while root.get(run_id, run_id) != run_id:
            run_id = root[run_id]
        return run_id

    for r in runs:
        if r.continued_from in on_page:
            a, b = find(r.run_id), find(r.continued_from)
            if a != b:
                root[a] = b
    members: dict[str, list[RunSummary]] = {}
    for r in runs:
        members.setdefault(find(r.run_id), []).append(r)
    return [
        RunGroup(rows=[run_row(r, cost) for r in group], continues_earlier=group[-1].continued_from is not None)
        for group in members.values()
    ]


def empty_hint(tenant: str, tenants: Sequence[tuple[str, int]]) -> str:
    """Why a tenant's unfiltered run list is empty, naming the tenants that have runs (as `segue runs list` does)."""
    found = other_tenants(tenant, tenants)
    if found is None:
        return f"No runs for tenant {tenant!r}: the database holds no runs yet."
    shown, first = found
    return (
        f"No runs for tenant {tenant!r}. The database holds runs of tenant {shown}: start the dashboard "
        f"with --tenant {first} (or --admin for every tenant)."
    )
