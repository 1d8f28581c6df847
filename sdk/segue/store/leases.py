"""Run leases: who may write a running run, and when it counts as abandoned.

A running run is held by one process: its lease names the holder (a token chosen when the run was created,
resumed or recovered) and a deadline, renewed with every write. Every write of a running run is a compare-and-set
on the holder and the status, so a process that lost its run (a sweep ended it, another process recovered it)
cannot write over what happened since: its write fails with LeaseLost, naming what the store holds.

Deadlines are set and compared on one clock, the database's (PostgreSQL's server clock; SQLite's is the host's,
shared by every process that can open the file), never the writing or sweeping process's own: a process whose clock
is wrong neither ends a live run early nor keeps a dead one. A sweep also ends only the lease it read: a run that
renewed between the sweep's read and its write keeps running.
"""

from __future__ import annotations

import secrets
from typing import Any

import attrs
import peewee as pw

from segue.errors import StoreError
from segue.store.connection import Units
from segue.store.models import Bound
from segue.store.records import utc_now

#: The width of agent_runs.lease_owner.
OWNER_CHARS = 32


def new_owner(engine: str | None = None) -> str:
    """A lease holder's token: unique per claim (a run's creation, resume or recovery). `engine`: the durable
    execution engine that runs the run's steps (segue.run.steps), named first (`dbos:...`), so its recovery can
    tell its own dead holder from a process that recovered the run without it."""
    token = secrets.token_hex(16)
    # agent_runs.lease_owner holds 32 characters: an engine's name takes the place of some of the token's (the
    # rest, 26 hex digits for "dbos", keep tokens unique).
    return f"{engine}:{token}"[:OWNER_CHARS] if engine else token


def owned_by(owner: str | None, engine: str) -> bool:
    """Whether the lease token `owner` is one `new_owner(engine)` made."""
    return (owner or "").startswith(f"{engine}:")


def db_now(db: pw.Database) -> pw.SQL:
    """The database's clock in epoch seconds, as an SQL expression."""
    if isinstance(db, pw.PostgresqlDatabase):
        return pw.SQL("CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)")
    return pw.SQL("((julianday('now') - 2440587.5) * 86400.0)")


class LeaseLost(StoreError):
    """A write of a running run found the run no longer held by this process: a sweep ended it (its lease lapsed
    while the process was stalled), or another process recovered it. Nothing was written."""

    def __init__(self, run_id: str, status: str | None, error: str | None) -> None:
        if status is None:
            held = "it no longer exists"
        elif status == "running":
            held = "another process recovered it and holds it now"
        else:
            held = f"the store holds it {status}" + (f" ({error})" if error else "")
        super().__init__(
            f"run {run_id} is no longer held by this process ({held}); its lease lapsed before this write, and "
            "nothing was written: renew the lease more often than Agent(lease_seconds=...) by keeping the run "
            "moving, or raise lease_seconds"
        )
        self.run_id = run_id
        self.status = status


@attrs.frozen(kw_only=True)
class Held:
    """Who holds a run, as recovery checks it."""

    status: str
    tenant_id: str
    fingerprint: str | None
    lapsed: bool
    owner: str | None = None  # the holder's token


class Leases:
    """The leases of one RunStore's runs (`store.leases`): claims and sweeps."""

    def __init__(self, db: pw.Database, models: Bound, units: Units) -> None:
        self.db = db
        self._runs = models.AgentRun
        self._units = units

    def deadline(self, lease_seconds: float | None) -> Any:
        """A lease deadline `lease_seconds` from now on the database's clock, as an SQL expression."""
        return db_now(self.db) + float(lease_seconds) if lease_seconds else None

    def held(self, run_id: str) -> Held | None:
        """The run's status, tenant, fingerprint and whether its lease lapsed (on the database's clock)."""
        runs = self._runs
        lapsed = runs.lease_expires_at.is_null(False) & (runs.lease_expires_at < db_now(self.db))
        query = runs.select(
            runs.status, runs.tenant_id, runs.fingerprint, pw.Case(None, [(lapsed, 1)], 0), runs.lease_owner
        )

        def work() -> Any:
            return query.where(runs.id == run_id).tuples().first()

        row = self._units.read(work)
        if row is None:
            return None
        return Held(status=row[0], tenant_id=row[1], fingerprint=row[2], lapsed=bool(row[3]), owner=row[4])

    def claim_lapsed(self, run_id: str, tenant_id: str, *, owner: str, lease_seconds: float | None) -> bool:
        """Take over a running run whose lease lapsed, as `owner` (recovery): one claimer wins; False for the
        others (the lease is no longer lapsed once claimed), and for a run that is not running and lapsed."""
        runs = self._runs

        def work() -> int:
            return int(
                runs.update(lease_owner=owner, lease_expires_at=self.deadline(lease_seconds or 300.0))
                .where(
                    (runs.id == run_id)
                    & (runs.tenant_id == tenant_id)
                    & (runs.status == "running")
                    & runs.lease_expires_at.is_null(False)
                    & (runs.lease_expires_at < db_now(self.db))
                )
                .execute()
            )

        return bool(self._units.write(work, idempotent=False))

    def take_over(
        self, run_id: str, tenant_id: str, *, previous: str | None, owner: str, lease_seconds: float | None
    ) -> bool:
        """Take over a running run from its holder `previous` whether or not its lease lapsed, as `owner`: for an
        engine that knows the holder is gone (segue.durable.dbos: DBOS recovers a workflow once its executor is).
        One claimer wins (the holder changes with the claim); the old holder's writes fail with LeaseLost."""
        runs = self._runs
        held = runs.lease_owner.is_null() if previous is None else (runs.lease_owner == previous)

        def work() -> int:
            return int(
                runs.update(lease_owner=owner, lease_expires_at=self.deadline(lease_seconds or 300.0))
                .where((runs.id == run_id) & (runs.tenant_id == tenant_id) & (runs.status == "running") & held)
                .execute()
            )

        return bool(self._units.write(work, idempotent=False))

    def lapsed(self, agent_name: str, tenant_id: str | None) -> list[tuple[str, str]]:
        """(run id, tenant) of the agent's running runs whose lease lapsed, oldest first."""
        runs = self._runs
        query = runs.select(runs.id, runs.tenant_id).where(
            (runs.agent_name == agent_name)
            & (runs.status == "running")
            & runs.lease_expires_at.is_null(False)
            & (runs.lease_expires_at < db_now(self.db))
        )
        if tenant_id is not None:
            query = query.where(runs.tenant_id == tenant_id)
        return self._units.read(lambda: [(r[0], r[1]) for r in query.order_by(runs.id).tuples()])

    def claim_paused(
        self, run_id: str, tenant_id: str, *, lease_seconds: float | None = None, owner: str | None = None
    ) -> bool:
        """Move a waiting_approval run back to running, held by `owner`; False when it was not waiting (e.g.
        resumed twice)."""

        def work() -> int:
            return int(
                self._runs.update(
                    status="running",
                    lease_expires_at=self.deadline(lease_seconds),
                    lease_owner=owner,
                )
                .where(
                    (self._runs.id == run_id)
                    & (self._runs.tenant_id == tenant_id)
                    & (self._runs.status == "waiting_approval")
                )
                .execute()
            )

        return bool(self._units.write(work, idempotent=False))

    def sweep(
        self,
        *,
        now: float | None = None,
        grace: float = 0.0,
        reason: str = "abandoned: the run's lease expired",
    ) -> list[str]:
        """Mark running runs whose lease lapsed more than `grace` seconds ago as `error`; their traces stay
        readable and replayable.

        Lapsed is judged on the database's clock (segue.store.leases), not this process's; `now` (epoch seconds)
        replaces that clock for a caller that means a moment of its own (tests, tools). Each run is ended only if
        its lease is still the one the sweep read: a run that renewed it meanwhile is left running."""
        runs = self._runs
        moment: Any = db_now(self.db) if now is None else now

        def work() -> list[str]:
            stale = list(
                runs.select(runs.id, runs.lease_expires_at)
                .where(
                    (runs.status == "running")
                    & runs.lease_expires_at.is_null(False)
                    & (runs.lease_expires_at < moment - float(grace))
                )
                .tuples()
            )
            ended = []
            for run_id, deadline in stale:
                changed = (
                    runs.update(status="error", error=reason, finished_at=utc_now(), lease_expires_at=None)
                    .where((runs.id == run_id) & (runs.status == "running") & (runs.lease_expires_at == deadline))
                    .execute()
                )
                if changed:
                    ended.append(run_id)
            return ended

        return self._units.write(work, idempotent=True)
