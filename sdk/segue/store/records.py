"""The records the store writes and reads back for the run pipeline, and the run states it knows."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import attrs

from segue.generated import RunMeta, Trace, Usage

DEFAULT_TENANT = "default"
TERMINAL: frozenset[str] = frozenset({"success", "error", "cancelled", "max_iterations"})
#: How long after a run's lease lapsed `segue runs sweep` and `segue serve` wait before ending it `error`: a
#: restarted server (or another replica starting) recovers its agents' lapsed runs at start (Agent.recover_lapsed),
#: and this leaves it two default leases (2 x 300 s) to do so first; a run nobody recovers is still ended within
#: about 15 minutes of its process's death (its lease, then this).
SWEEP_GRACE_SECONDS = 600.0
#: list_runs pages no further than this (SQLite's and PostgreSQL's LIMIT / OFFSET are 64-bit).
MAX_OFFSET = 1_000_000_000


def utc_now() -> str:
    """A row's timestamp: ISO 8601 UTC with microseconds, so that text order is time order."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@attrs.frozen(kw_only=True)
class NewRun:
    """The run row written (with its first traces) in one transaction once validation has passed."""

    run_id: str
    tenant_id: str
    agent_name: str
    input: str
    model: str
    vendor: str
    meta: RunMeta
    metadata: dict[str, Any]
    idempotency_key: str | None = None
    fingerprint: str | None = None
    retry_of: str | None = None
    continued_from: str | None = None
    #: A sub-run's parent run and the parent's tool call that made it (segue.subagents).
    parent_run_id: str | None = None
    parent_call_id: str | None = None
    private: dict[str, Any] | None = None
    lease_seconds: float | None = None
    #: The lease holder's token (segue.store.leases); every later write of the running run names it.
    lease_owner: str | None = None


@attrs.frozen(kw_only=True)
class StoredRun:
    """What replay, retry and resume read back: the row and its canonical traces."""

    run_id: str
    tenant_id: str
    status: str
    input: str
    answer: str | None
    meta: RunMeta
    traces: list[Trace]
    usage: Usage
    agent_name: str = ""
    private: dict[str, Any] | None = None
    #: When the run was created and when it ended (utc_now text; None: not ended, or not read).
    created_at: str | None = None
    finished_at: str | None = None
    #: canonical JSON of each trace's role + content (segue._core.hashing.message_json), computed on first use and
    #: remembered with the cached message.
    hash_items: Sequence[str] = ()


class IdempotencyKeyTaken(Exception):
    """Another run of this tenant already holds the key (raised by create_run on the unique index)."""
