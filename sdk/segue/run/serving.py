"""Who served each request, and what that means for the run: the loop fits each request here and hands every
response back.

A run's replay is planned once per path it may be served on (segue.replay.paths: the path it is aimed at, and
the other members of a Failover). A request carries the messages fitted to each path, as that plan says; the
response says which path served, and the plan says what changes (the run's replay summary, which reasoning
later requests still carry): this module only executes it. Then, from the same response:

- the prefix descriptor is written with the first response, naming the vendor and model that served it, its seed
  hashing the replayed prefix as that request carried it; a later iteration served on another path is added as
  `also_served`;
- the run's notes (everything else the call reported), once per distinct note;
- the layout decision of an undecided run, made on the path that served (segue.cache.layout_decision); once it
  is appendOnly, iteration 1's fragment is restored right away, before the iteration is recorded, so a run's
  stored traces only ever grow at the end.
"""

from __future__ import annotations

import logging

import attrs

from segue._core.contracts import (
    REPLAYED_META_KEY,
    ProviderRequest,
    ProviderResponse,
    ServingPath,
    without_replayed_reasoning,
)
from segue.cache.notes import ONCE_PER_RUN
from segue.generated import Message, PrefixDescriptor, RunMeta, ServedBy, ServedPath
from segue.replay.paths import replayed_run, vendor_dropped
from segue.run.state import RunState

cache_log = logging.getLogger("segue.cache")
run_log = logging.getLogger("segue.run")
#: Notes said as a warning line too, as they are seen: an answer that is not what it looks like.
_SAID: frozenset[str] = frozenset({"twin-note", "tool-failed"})


def fit(state: RunState, messages: list[Message]) -> tuple[list[Message], dict[ServingPath, list[Message]]]:
    """The request's messages fitted to the path the run is aimed at, and to every other planned path."""
    if not state.plan.summaries:
        return messages, {}
    own = state.plan.path
    keep = state.plan.paths.sent(state.bound)
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
    paths = state.plan.paths
    sent = paths.sent(state.bound).get(served, frozenset()) if served is not None else frozenset()
    if served is not None and state.replay is not None:
        # Reasoning the vendor drops below stays on the wire (the bound is set first): the vendor drops it the
        # same way every time, and leaving it off would change the prefix the cache holds.
        state.replay, state.bound = paths.served(state.replay, state.bound, served, response.vendor, response.model)
    for note in response.notes:
        run_id = replayed_run(note, request.messages)
        if run_id is not None and state.replay is not None:
            state.replay = vendor_dropped(state.replay, run_id, note)
        elif state.notes.add(note, iteration) and note.kind in ONCE_PER_RUN:
            cache_log.warning("run %s: %s", state.run_id, note.message)  # a cache note: once per run
        elif note.kind in _SAID:
            run_log.warning("run %s: %s", state.run_id, note.message)
    layout = state.layout
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
