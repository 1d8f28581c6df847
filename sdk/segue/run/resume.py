"""What retry and resume read back from a stored run: which run they may act on, its request, its pause, and
what its requests carried.

Retry and resume rebuild a run's request from its typed RunMeta (the StoredRequest, and the knobs in its replay
summary) and validate it again like any request, so a run the agent can no longer make is refused before
anything changes. The rest are pure functions over a StoredRun: the decisions a resume gives for the calls it
waits on (checked against them), and which replayed reasoning a paused run's requests sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from segue.errors import InputError, RunStateError
from segue.generated import StoredRequest
from segue.run.request import run_id_of
from segue.store.records import StoredRun
from segue.store.run_store import RunStore


async def load_own_run(store: RunStore, given: Any, tenant_id: str, agent_name: str, action: str) -> StoredRun:
    """The run retry / resume act on, refused (RunStateError) unless it is this tenant's and this agent's."""
    run_id = run_id_of(given)
    if run_id is None:
        raise InputError(f"{action} needs a run id (a ULID: 26 characters of Crockford base32), got {given!r:.60}")
    stored = (await asyncio.to_thread(store.load_runs, [run_id])).get(run_id)
    if stored is None or stored.tenant_id != tenant_id:
        # Never reveal that another tenant's run exists.
        raise RunStateError(
            f"no run {run_id} for tenant {tenant_id!r}; check the run id and tenant",
            run_id=run_id,
            reason="not_found",
        )
    if stored.agent_name != agent_name:
        # Another agent's tools, prompt and model would continue a conversation they never had.
        raise RunStateError(
            f"run {run_id} belongs to agent {stored.agent_name!r}, not {agent_name!r}; {action} it with that agent",
            run_id=run_id,
            reason="agent_mismatch",
            agent=stored.agent_name,
        )
    return stored


def arguments_of(stored: StoredRun) -> dict[str, Any]:
    """The run's request as it was made, as Agent.run arguments: input, history, context, the replayed runs and
    knobs, the model / vendor override, the model settings. The app's metadata and idempotency key are not carried
    over (resume and recovery, which continue the same run, pass its metadata themselves)."""
    request = stored.meta.segue_request or StoredRequest()
    replay = stored.meta.segue_replay
    knobs = replay.knobs if replay is not None else None
    return {
        "user_input": stored.input,
        "history": request.history,
        "context": request.context,
        "runs": knobs.runs if knobs is not None else None,
        # Every segue wrote both; a row without them falls back to Agent.run's defaults.
        "replay_last": request.replay_last if request.replay_last is not None else 0,
        "replay_reasoning": request.replay_reasoning is not False,
        "replay_budget_tokens": request.replay_budget_tokens,
        "replay_step": request.replay_step,
        "replay_keep": request.replay_keep,
        "compaction": request.compaction,
        "tenant_id": stored.tenant_id,
        "metadata": None,
        "idempotency_key": None,
        "model": request.model,
        "vendor": request.vendor,
        "output_type": request.output_type,
        "output_repairs": request.output_repairs,
        "model_settings": request.model_settings,
    }


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
