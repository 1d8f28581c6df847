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

import peewee as pw

from segue.errors import StoreError


def new_owner() -> str:
    """A lease holder's token: unique per claim (a run's creation, resume or recovery)."""
    return secrets.token_hex(16)


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
