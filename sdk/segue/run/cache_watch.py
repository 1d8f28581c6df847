"""What a run watches of the prompt cache after every call: the vendor's verdict goes with the call's record, the
response becomes the one the next request names for diagnostics, and a collapse (segue.cache.collapse) is said
once per run. The loop calls `watch` once per response, between observing who served and recording."""

from __future__ import annotations

import logging

import attrs

from segue._core.contracts import ProviderResponse
from segue.cache.collapse import collapse_of, response_ref
from segue.generated import RunEvent, RunMeta
from segue.run.state import RunState, make_event
from segue.telemetry import response_id

__all__ = ["watch"]

log = logging.getLogger("segue.cache")


def watch(
    state: RunState, response: ProviderResponse, meta_updates: RunMeta | None
) -> tuple[RunMeta | None, list[RunEvent]]:
    """The run meta to record with this call (`meta_updates`, what serving changed, plus the latest response and a
    collapse), and the CACHE_COLLAPSE event when this call is the run's first collapse."""
    model = response.served_model or response.model
    verdict = response.cache_verdict
    if state.verdict is None and verdict is not None and verdict.status != "unchanged":
        state.verdict = verdict
    events: list[RunEvent] = []
    collapse = None
    if not state.collapsed:
        collapse = collapse_of(
            state.previous_response,
            vendor=response.vendor,
            model=model,
            usage=response.usage,
            verdict=response.cache_verdict,
            iteration=state.iteration,
        )
    if collapse is not None:
        state.collapsed = True
        log.warning("run %s: %s", state.run_id, collapse.message)
        state.trace.cache_collapse(collapse)
        events.append(make_event("CACHE_COLLAPSE", state.run_id, state.iteration, cache_collapse=collapse))
    latest = response_ref(response_id(response.response_body), response.vendor, model, response.usage)
    if latest is None and collapse is None:
        return meta_updates, events
    if latest is not None:
        state.last_response = latest
    meta = meta_updates if meta_updates is not None else RunMeta()
    return attrs.evolve(meta, segue_last_response=latest, segue_cache_collapse=collapse), events
