"""Sub-runs in the store (`RunStore.lineage`): the runs whose parent is a given run (segue.run.subrun), read
through the indexed `agent_runs.parent_run_id` (store schema 8)."""

from __future__ import annotations

from collections.abc import Sequence

from segue.generated import RunSummary
from segue.store.connection import Units
from segue.store.models import Bound
from segue.store.records import DEFAULT_TENANT
from segue.store.repeats import Metas
from segue.store.rows import summary_from_row


class Lineage:
    def __init__(self, models: Bound, units: Units, metas: Metas) -> None:
        self.models = models
        self.units = units
        self.metas = metas

    def children(
        self, parent_run_ids: Sequence[str], *, tenant_id: str = DEFAULT_TENANT, all_tenants: bool = False
    ) -> list[RunSummary]:
        """The sub-runs whose parent is one of `parent_run_ids`, this tenant's only (every tenant's for operators),
        oldest first: a run's children, or a sub-agent's earlier runs in a conversation."""
        if not parent_run_ids:
            return []
        run = self.models.AgentRun
        where = run.parent_run_id.in_(list(dict.fromkeys(parent_run_ids)))
        if not all_tenants:
            where = where & (run.tenant_id == tenant_id)
        query = run.select().where(where).order_by(run.id)

        def work() -> list[RunSummary]:
            rows = list(query)
            metas = self.metas.read([(r.meta, f"agent_runs.meta of run {r.id}") for r in rows])
            return [summary_from_row(r, m) for r, m in zip(rows, metas, strict=True)]

        return self.units.read(work)

    def tree(
        self, run_id: str, *, tenant_id: str = DEFAULT_TENANT, all_tenants: bool = False, depth: int = 8
    ) -> list[tuple[int, RunSummary]]:
        """A run's descendants, depth first (each child right after its parent), with their depth below the run
        (1: its children); `depth` bounds the walk."""
        out: list[tuple[int, RunSummary]] = []

        def walk(parent: str, level: int) -> None:
            if level > depth:
                return
            for child in self.children([parent], tenant_id=tenant_id, all_tenants=all_tenants):
                out.append((level, child))
                walk(child.run_id, level + 1)

        walk(run_id, 1)
        return out
