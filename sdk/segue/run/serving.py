"""Who served each request, and what that means for the run: the loop fits each request here and hands every
response back.

A run's replay is planned once per path it may be served on (the path it is aimed at, and the other members of
a Failover): the plans differ only in whose replayed reasoning they keep. A request carries the messages fitted
to each path; the response says which path served. Everything that describes the run then follows that path:

- the replay summary is the serving path's plan; a run whose reasoning a later request leaves out (another
  member served) moves to reasoning_dropped with one warning, and no later request of the run sends it again; a
  run whose reasoning the vendor reports dropping moves too (cause vendor-dropped), but stays on the wire, since
  the vendor drops it the same way each time and the cached prefix holds it;
- the prefix descriptor is written with the first response, naming the vendor and model that served it, its seed
  hashing the replayed prefix as that request carried it; a later iteration served on another path is added as
  `also_served`;
- the run's notes (everything else the call reported), once per distinct note;
- the layout decision, made on the path that served; once it is appendOnly, iteration 1's fragment is restored
  right away, before the iteration is recorded, so a run's stored traces only ever grow at the end.
"""

from __future__ import annotations

import logging

import attrs

from segue._core.contracts import (
    REPLAYED_META_KEY,
    ProviderNote,
    ProviderRequest,
    ProviderResponse,
    ServingPath,
    without_replayed_reasoning,
)
from segue.cache.notes import ONCE_PER_RUN
from segue.generated import Message, PrefixDescriptor, ReplaySummary, ReplayWarning, RunMeta, ServedBy, ServedPath
from segue.replay.prefix_rule import drop_kept, log, path_cause
from segue.run.state import RunState

cache_log = logging.getLogger("segue.cache")
run_log = logging.getLogger("segue.run")
#: Notes said as a warning line too, as they are seen: an answer that is not what it looks like.
_SAID: frozenset[str] = frozenset({"twin-note", "tool-failed"})

#: Warning causes that say why a run's reasoning was dropped (the others are about tools and the budget).
_DROP_CAUSES = frozenset(
    {"model", "system", "tools", "seed", "cross-vendor", "predates-metadata", "follows", "guardrails", "reasoning-off"}
    | {"layout", "vendor-dropped", "output-schema", "settings"}
)


def fit(state: RunState, messages: list[Message]) -> tuple[list[Message], dict[ServingPath, list[Message]]]:
    """The request's messages fitted to the path the run is aimed at, and to every other planned path."""
    if not state.plan.summaries:
        return messages, {}
    own = state.plan.path
    keep = _keep(state)
    return _fitted(state, own, keep[own], messages), {
        path: _fitted(state, path, runs, messages) for path, runs in keep.items() if path != own
    }


def _fitted(state: RunState, path: ServingPath, keep: frozenset[str], messages: list[Message]) -> list[Message]:
    """without_replayed_reasoning(messages, keep), each replayed message fitted once per run (the same objects
    every request, for whatever caches what was sent before)."""
    memo = state.fitted.setdefault((path, keep), {})
    out = []
    for m in messages:
        if not (m.meta and m.meta.get(REPLAYED_META_KEY)):
            out.append(m)
            continue
        found = memo.get(id(m))
        if found is None or found[0] is not m:
            found = memo[id(m)] = (m, without_replayed_reasoning([m], keep)[0])
        out.append(found[1])
    return out


def observe(state: RunState, request: ProviderRequest, response: ProviderResponse, iteration: int) -> RunMeta | None:
    """Fold one response into `state`; returns the run meta to write in the same transaction as this iteration."""
    replay, notes_before = state.replay, state.notes.as_list()
    served = response.replay_path or request.replay_path
    sent = _keep(state).get(served, frozenset()) if served is not None else frozenset()
    if served is not None and state.replay is not None:
        _follow(state, served, response)
        # Reasoning the vendor drops below stays on the wire: the vendor drops it the same way every time, and
        # leaving it off would change the prefix the cache holds.
        state.bound = frozenset(state.replay.reasoning_kept)
    for note in response.notes:
        run_id = _replayed_run(note, request)
        if run_id is not None and state.replay is not None:
            warning = ReplayWarning(run_id=run_id, cause="vendor-dropped", message=f"reasoning dropped: {note.message}")
            state.replay = drop_kept(state.replay, {run_id: warning})
        elif state.notes.add(note, iteration) and note.kind in ONCE_PER_RUN:
            cache_log.warning("run %s: %s", state.run_id, note.message)  # a cache note: once per run
        elif note.kind in _SAID:
            run_log.warning("run %s: %s", state.run_id, note.message)
    layout = state.plan.layout
    if layout is not None:
        layout.observe_served(
            iteration,
            response.vendor,
            response.model,
            requires_stable_reasoning_prefix=response.requires_stable_reasoning_prefix,
        )
        layout.settle([*state.plan.prefix, *state.own])
    descriptor = _describe(state, response, served, sent)
    # Once the twin answered, the run is the twin's: a later vendor answer does not make it a vendor's.
    server: ServedBy = "twin" if "twin" in (state.served_by, response.served_by) else "vendor"
    updates = RunMeta(
        segue_prefix=descriptor if descriptor != state.descriptor else None,
        segue_replay=state.replay if state.replay is not replay else None,
        segue_notes=state.notes.as_list() if state.notes.as_list() != notes_before else None,
        segue_served_by=server if server != state.served_by else None,
        segue_served_model=response.served_model if response.served_model != state.served_model else None,
    )
    state.descriptor = descriptor
    state.served_by = server
    state.served_model = response.served_model or state.served_model
    return None if updates == RunMeta() else updates


def _keep(state: RunState) -> dict[ServingPath, frozenset[str]]:
    """Per planned path, the replayed runs whose reasoning a request of this run carries there: what the path's
    plan keeps, less what an earlier request of the run already went without."""
    return {
        path: frozenset(plan.reasoning_kept) & state.bound
        if state.bound is not None
        else frozenset(plan.reasoning_kept)
        for path, plan in state.plan.summaries.items()
    }


def _follow(state: RunState, served: ServingPath, response: ProviderResponse) -> None:
    """Make the replay summary the serving path's."""
    assert state.replay is not None
    plan = state.plan.summaries.get(served)
    if plan is None:  # a member segue planned no path for: it got none of the replayed reasoning
        message = (
            f"reasoning dropped: {response.vendor}/{response.model} served, a Failover member the replay was not "
            "planned for, so no replayed reasoning was sent"
        )
        cause = path_cause(state.plan.path, response.vendor, response.model)
        drops = {r: ReplayWarning(run_id=r, cause=cause, message=message) for r in state.replay.reasoning_kept}
        state.replay = drop_kept(state.replay, drops)
    elif state.bound is None:  # the first response: the run's replay is that path's plan
        state.replay = plan
        for w in plan.warnings:
            log.warning("replay: run %s: %s", w.run_id, w.message)
    else:
        drops = {r: _drop_warning(plan, r) for r in state.replay.reasoning_kept if r not in plan.reasoning_kept}
        state.replay = drop_kept(state.replay, drops)


def _drop_warning(plan: ReplaySummary, run_id: str) -> ReplayWarning:
    found = next((w for w in plan.warnings if w.run_id == run_id and w.cause in _DROP_CAUSES), None)
    return found or ReplayWarning(run_id=run_id, cause="follows", message="reasoning dropped on the path that served")


def _replayed_run(note: ProviderNote, request: ProviderRequest) -> str | None:
    """The replayed run a vendor-dropped note points at, if it points at a replayed message."""
    if note.kind != "vendor-dropped" or note.message_index is None:
        return None
    if not 0 <= note.message_index < len(request.messages):
        return None
    run_id = (request.messages[note.message_index].meta or {}).get(REPLAYED_META_KEY)
    return run_id if isinstance(run_id, str) else None


def _describe(
    state: RunState, response: ProviderResponse, served_path: ServingPath | None, sent: frozenset[str]
) -> PrefixDescriptor:
    """The descriptor after this response: written with the first, then only a new serving path is added."""
    d = state.descriptor
    if d is None:
        current = state.plan.config.current
        return PrefixDescriptor(
            schema_version=1,
            vendor=response.vendor,
            model=response.model,
            system_hash=current.system_hash,
            tools_hash=current.tools_hash,
            seed=state.plan.seed(served_path, sent),
            output_hash=current.output_hash,
            settings_hash=current.settings_hash,
        )
    served = ServedPath(vendor=response.vendor, model=response.model)
    if (d.vendor, d.model) == (served.vendor, served.model) or served in (d.also_served or []):
        return d
    return attrs.evolve(d, also_served=[*(d.also_served or []), served])
