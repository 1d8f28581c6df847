"""What retry and resume read back from a stored run: its request, its pause, and what its requests carried.

Pure functions over a StoredRun (no I/O): the run's RunSpec rebuilt from its meta, the decisions a resume gives
for the calls it waits on (checked against them), and which replayed reasoning a paused run's requests sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segue.conversation import as_history
from segue.errors import InputError, RunStateError
from segue.generated import ReplaySummary, StoredRequest
from segue.run_state import RunSpec
from segue.store.run_store import StoredRun


def spec_of(stored: StoredRun) -> RunSpec:
    """The run's request as it was made: input, history, context, replay knobs and the model / vendor override."""
    request = stored.meta.segue_request or StoredRequest()
    replay = stored.meta.segue_replay
    return RunSpec(
        input=stored.input,
        history=as_history(request.history or []),
        context=list(request.context or []),
        knobs=replay.knobs if replay is not None else None,
        replay_last=request.replay_last if request.replay_last is not None else 0,
        replay_reasoning=request.replay_reasoning if request.replay_reasoning is not None else True,
        replay_budget_tokens=request.replay_budget_tokens,
        tenant_id=stored.tenant_id,
        metadata={},
        idempotency_key=None,
        model=request.model,
        vendor=request.vendor,
    )


def pending_calls(stored: StoredRun) -> tuple[int, list[str]]:
    """(the iteration it paused at, the call ids it waits on) of a paused run; RunStateError for any other."""
    pending = stored.meta.segue_pending
    if stored.status != "waiting_approval" or pending is None:
        raise RunStateError(
            f"run {stored.run_id} is {stored.status}, not waiting_approval; only paused runs resume",
            run_id=stored.run_id,
            reason="not_paused",
        )
    return pending.iteration, list(pending.calls)


def decisions_for(waiting: list[str], approved: Any, tool_results: Mapping[str, str] | None) -> dict[str, bool]:
    """One approval per waiting call from `approved` (one answer for all, or per call id; calls left out are
    denied), after checking that `approved` and `tool_results` name only waiting calls."""
    if isinstance(approved, bool):
        decisions = dict.fromkeys(waiting, approved)
    elif isinstance(approved, Mapping):
        unknown = sorted(set(approved) - set(waiting))
        if unknown:
            raise InputError(f"approved names calls {unknown} that are not pending; pending: {waiting}")
        decisions = {c: bool(approved.get(c, False)) for c in waiting}
    else:
        raise InputError(f"approved must be a bool or a {{call_id: bool}} mapping, got {approved!r}")
    if tool_results is not None:
        unknown = sorted(set(tool_results) - set(waiting))
        if unknown:
            raise InputError(f"tool_results names calls {unknown} that are not pending: {waiting}")
    return decisions


def summary_at_pause(stored: StoredRun) -> ReplaySummary | None:
    return stored.meta.segue_replay


def still_sent(summary: ReplaySummary | None) -> frozenset[str] | None:
    """The replayed runs whose reasoning a paused run's requests carried: the kept ones, and those the vendor
    dropped (they stay on the wire, see segue.serving)."""
    if summary is None:
        return None
    dropped_by_vendor = {w.run_id for w in summary.warnings if w.cause == "vendor-dropped"}
    return frozenset(summary.reasoning_kept) | dropped_by_vendor
