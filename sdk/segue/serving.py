"""Who served each request, and what that means for the run: the loop hands every response here.

A Failover may answer from another member than the one the run was planned for, and a vendor may drop replayed
reasoning. The response says so; this module makes everything that describes the run follow:

- the prefix descriptor is written with the first response, naming the vendor and model that served it (the
  seed hashes the replayed prefix as that request carried it); a later iteration served by another path is added
  as `also_served`;
- the replay summary: replayed reasoning the serving member left off (it serves another path), or the vendor
  reported dropping, moves from reasoning_kept to reasoning_dropped with one warning per run, and later requests
  of the run leave it off too;
- the run's notes (everything else the call reported), once per distinct note;
- the layout decision, made on the path that served.
"""

from __future__ import annotations

from typing import Any

import attrs

from segue.generated import PrefixDescriptor, ServedPath, get_converter
from segue.meta import NOTES_META_KEY, PREFIX_META_KEY, REPLAY_META_KEY
from segue.providers.base import (
    REPLAYED_META_KEY,
    ProviderNote,
    ProviderRequest,
    ProviderResponse,
    ServingPath,
    without_replayed_reasoning,
)
from segue.replay import drop_kept, path_cause, seed_of
from segue.run_state import RunState


def replay_path(state: RunState) -> ServingPath | None:
    """The path the replayed reasoning of `state` was kept for (None when none was kept)."""
    if state.replay is None or not state.replay.reasoning_kept:
        return None
    p = state.planned
    return ServingPath(vendor=p.vendor, model=p.model, reasoning_vendor=p.reasoning_vendor)


def observe(state: RunState, request: ProviderRequest, response: ProviderResponse, iteration: int) -> dict[str, Any]:
    """Fold one response into `state`; returns the run meta to write in the same transaction as this iteration."""
    replay, notes_before = state.replay, state.notes.as_list()
    if response.replayed_reasoning_removed:
        _served_elsewhere(state, response)
    for note in response.notes:
        run_id = _replayed_run(note, request)
        if run_id is not None and state.replay is not None:
            state.replay = drop_kept(state.replay, [run_id], "vendor-dropped", f"reasoning dropped: {note.message}")
        else:
            state.notes.add(note, iteration)
    if state.layout is not None:
        state.layout.observe_served(
            iteration,
            response.vendor,
            response.model,
            requires_stable_reasoning_prefix=response.requires_stable_reasoning_prefix,
        )
    conv = get_converter()
    updates: dict[str, Any] = {}
    descriptor = _describe(state, response)
    if descriptor != state.descriptor:
        state.descriptor = descriptor
        updates[PREFIX_META_KEY] = conv.unstructure(descriptor)
    if state.replay is not replay and state.replay is not None:
        updates[REPLAY_META_KEY] = conv.unstructure(state.replay)
    if state.notes.as_list() != notes_before:
        updates[NOTES_META_KEY] = state.notes.meta()
    return updates


def _served_elsewhere(state: RunState, response: ProviderResponse) -> None:
    planned = state.planned
    if state.replay is not None and state.replay.reasoning_kept:
        cause = path_cause(planned, response.vendor, response.model)
        message = (
            f"reasoning dropped: {response.vendor}/{response.model} served after a failover, not "
            f"{planned.vendor}/{planned.model} the replay was planned for, so the reasoning was left off"
        )
        state.replay = drop_kept(state.replay, state.replay.reasoning_kept, cause, message)
    state.prefix = without_replayed_reasoning(state.prefix)


def _replayed_run(note: ProviderNote, request: ProviderRequest) -> str | None:
    """The replayed run a vendor-dropped note points at, if it points at a replayed message."""
    if note.kind != "vendor-dropped" or note.message_index is None:
        return None
    if not 0 <= note.message_index < len(request.messages):
        return None
    run_id = (request.messages[note.message_index].meta or {}).get(REPLAYED_META_KEY)
    return run_id if isinstance(run_id, str) else None


def _describe(state: RunState, response: ProviderResponse) -> PrefixDescriptor:
    d = state.descriptor
    if d is None:
        return PrefixDescriptor(
            schema_version=1,
            vendor=response.vendor,
            model=response.model,
            system_hash=state.planned.system_hash,
            tools_hash=state.planned.tools_hash,
            seed=seed_of(state.prefix, state.view),
        )
    served = ServedPath(vendor=response.vendor, model=response.model)
    if (d.vendor, d.model) == (served.vendor, served.model) or served in (d.also_served or []):
        return d
    return attrs.evolve(d, also_served=[*(d.also_served or []), served])
