"""Recorded prewarms (Agent.prewarm): one provider call each, in their own table.

A prewarm is not a run: it has no user message and no answer, so it must never be listed among a tenant's runs,
replayed by `runs=` or counted in a conversation's chain. Its call is kept whole all the same (the exact body the
vendor received, the answer, the usage), like a run's, so its cost shows up where costs are read. Reads are scoped
by tenant like every run read.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from segue._core.hashing import canonical_json
from segue.generated import LlmInteraction, PrewarmRecord
from segue.store.bodies import Bodies
from segue.store.connection import Units
from segue.store.models import Bound
from segue.store.records import DEFAULT_TENANT, utc_now
from segue.store.repeats import read_lists, stored_list
from segue.store.rows import interaction_columns, interaction_from_row, loads


class Prewarms:
    """The prewarms of one RunStore (`store.prewarms`)."""

    def __init__(self, models: Bound, units: Units, bodies: Bodies) -> None:
        self._rows = models.PrewarmRow
        self._units = units
        self._bodies = bodies

    def record(self, prewarm_id: str, *, agent: str, tenant_id: str, runs: list[str], call: LlmInteraction) -> None:
        """The prewarm and its call, in one row (its body's parts shared with the runs'), stamped now."""
        skeleton, parts = self._bodies.prepare(call.provider_request)
        # A conversation warmed before each turn names one more run each time: its list by reference (repeats).
        stored_runs = canonical_json(stored_list(runs, self._bodies, parts))

        def work() -> None:
            self._bodies.insert(parts)
            self._rows.insert(
                id=prewarm_id,
                tenant_id=tenant_id,
                agent_name=agent,
                runs=stored_runs,
                created_at=utc_now(),
                **interaction_columns(call, skeleton),
            ).execute()

        self._units.write(work, idempotent=False)
        self._bodies.written(parts)

    def get(
        self, prewarm_id: str, *, tenant_id: str = DEFAULT_TENANT, all_tenants: bool = False
    ) -> PrewarmRecord | None:
        """The prewarm, or None if absent or another tenant's (`all_tenants=True`: for operators, as get_run)."""
        row = self._units.read(lambda: self._rows.get_or_none(self._rows.id == prewarm_id))
        if row is None or (not all_tenants and row.tenant_id != tenant_id):
            return None
        return self._records([row])[0]

    def list(self, *, tenant_id: str = DEFAULT_TENANT, limit: int = 50) -> list[PrewarmRecord]:
        """This tenant's prewarms, newest first."""
        rows = self._rows
        query = rows.select().where(rows.tenant_id == tenant_id).order_by(rows.id.desc()).limit(limit)
        return self._records(self._units.read(lambda: list(query)))

    def _records(self, rows: Sequence[Any]) -> builtins.list[PrewarmRecord]:
        def work() -> tuple[builtins.list[dict[str, Any]], builtins.list[Any]]:
            bodies = self._bodies.read([(r.provider_request, f"prewarms {r.id}") for r in rows])
            runs = read_lists([loads(r.runs, f"prewarms {r.id}") for r in rows], self._bodies.parts())
            return bodies, runs

        bodies, runs = self._units.read(work)
        return [
            PrewarmRecord(
                prewarm_id=row.id,
                agent=row.agent_name,
                tenant_id=row.tenant_id,
                runs=list(run_ids),
                created_at=row.created_at,
                interaction=interaction_from_row(row, body, iteration=1, error=None),
            )
            for row, body, run_ids in zip(rows, bodies, runs, strict=True)
        ]
