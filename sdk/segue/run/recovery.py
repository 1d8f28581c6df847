"""Recovery: a run whose process died continues from its journal, as the same run.

The store holds each model step's response before any of its tools ran and each tool result as it completed
(segue.run.loop), so a run whose lease lapsed is rebuilt from it: its messages, usage, cost, who served and the
layout's decision, as they stood. Finished model calls are read back, never sent again; finished tool calls are not
run again. A call that was in flight runs again only when its tool says that is safe (`@tool(retry_safe=True)`);
otherwise the model gets an error result saying it was interrupted and not repeated. The next request is then the
one the uninterrupted run would have sent, byte for byte: the same prefix and the same stored messages.

Everything is checked before anything is written: the run must be this tenant's and this agent's, running, and its
lease lapsed (on the database's clock); the agent's configuration (prompt, tools, provider) must be the run's.
Then one atomic claim (segue.store.leases) makes this process the run's holder: a second recoverer is refused, and
the process that lost the run (if it was only stalled) can no longer write to it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from functools import partial
from typing import Any, Protocol

from segue.errors import RunStateError
from segue.generated import RunDetail, RunEvent, RunMeta, ToolCallRecord
from segue.run.config import AgentConfig
from segue.run.conversation import tool_calls
from segue.run.events import journaled_count, mark, tool_writes
from segue.run.idempotency import fingerprint_of
from segue.run.loop import Loop
from segue.run.next_step import announcing
from segue.run.request import RunRequest
from segue.run.resume import arguments_of, load_own_run
from segue.run.state import RunState, make_event
from segue.run.steps import StepRef, Steps
from segue.store.leases import owned_by
from segue.store.records import StoredRun
from segue.store.run_store import RunStore
from segue.telemetry import RunTrace, attached


class Pipeline(Protocol):
    """What recovery uses of the run pipeline (segue.run.pipeline.Pipeline): the steps it shares with resume."""

    agent: AgentConfig
    loop: Loop

    def store(self) -> RunStore: ...
    def validate(self, arguments: Mapping[str, Any], *, deps: Any = None) -> RunRequest: ...
    def trace(self, request: RunRequest) -> RunTrace: ...
    async def resumed_state(
        self, stored: StoredRun, request: RunRequest, iteration: int, trace: RunTrace
    ) -> RunState: ...
    async def claim(self, state: RunState, claim: Callable[..., bool], run_id: str, tenant_id: str) -> bool: ...
    def until_stopped(
        self, state: RunState, events: AsyncIterator[RunEvent], *, first: RunEvent | None = None
    ) -> AsyncGenerator[RunEvent, None]: ...


async def recover(
    pipeline: Pipeline, run_id: Any, tenant_id: str, *, streaming: bool, deps: Any = None, steps: Steps | None = None
) -> AsyncIterator[RunEvent]:
    """Continue the run `run_id` whose lease lapsed; RunStateError (nothing written) when it cannot be.

    `steps`: the engine that runs the run's steps (segue.durable.dbos) and decides when a run is continued: its
    lease is taken over from the holder the engine knows is gone, lapsed or not, and the engine is told the steps
    the journal holds before the run continues."""
    agent = pipeline.agent
    store = pipeline.store()
    stored = await load_own_run(store, run_id, tenant_id, agent.name, "recover")
    held = await asyncio.to_thread(store.leases.held, stored.run_id)
    if held is None or held.status != "running":
        status = held.status if held is not None else "gone"
        hint = "resume it" if status == "waiting_approval" else "retry it as a new run"
        raise RunStateError(
            f"run {stored.run_id} is {status}, not running: only a running run whose lease lapsed is recovered; {hint}",
            run_id=stored.run_id,
            reason="not_lapsed",
        )
    if steps is not None and not owned_by(held.owner, steps.engine):
        # Taken over by a recovery outside the engine (Agent.recover, `segue serve` at start) once its lease
        # lapsed, or resumed by another of its executions: that process may be running it now, so it is left.
        raise RunStateError(
            f"run {stored.run_id} is held by a process that recovered or resumed it outside this execution "
            f"({steps.engine}), not by one of its own: it is left to that process",
            run_id=stored.run_id,
            reason="already_recovered",
        )
    if not held.lapsed and steps is None:
        raise RunStateError(
            f"run {stored.run_id} still holds its lease: the process running it may be alive. Recover it once the "
            f"lease lapses (at most Agent(lease_seconds={agent.lease_seconds:g}) after its last write)",
            run_id=stored.run_id,
            reason="not_lapsed",
        )
    detail = await asyncio.to_thread(store.get_run, stored.run_id, tenant_id=tenant_id)
    assert detail is not None  # read above, and runs are never deleted
    # The same run, so its metadata too: the trailing state's app_state on its next request is the first's.
    request = pipeline.validate({**arguments_of(stored), "metadata": detail.metadata}, deps=deps)
    iteration = max((c.iteration for c in detail.llm_interactions), default=0)
    trace = pipeline.trace(request)
    try:
        with attached(trace):
            state = await pipeline.resumed_state(stored, request, iteration, trace)
        _check_configuration(stored, held.fingerprint, request, state, agent.config_hash)
        finished, interrupted = _tool_steps(state, detail)
        # The images those calls returned: their round's tool message carries them, as the first run's would have.
        state.journaled_images = await asyncio.to_thread(
            store.tool_calls.images, stored.run_id, state.iteration, finished
        )
        if detail.llm_interactions:
            last = detail.llm_interactions[-1]
            model = last.model
            state.last_request = ((last.vendor, model), last.provider_request)
        state.resumed_at = 0  # not a paused run: a failing call ends it as usual
        claim = store.leases.claim_lapsed if steps is None else partial(store.leases.take_over, previous=held.owner)
        state.steps = steps  # (its engine names the new lease)
        claimed = await pipeline.claim(state, claim, stored.run_id, tenant_id)
        if not claimed:
            raise RunStateError(
                f"run {stored.run_id} was recovered by another process already (or its holder renewed its lease)",
                run_id=stored.run_id,
                reason="already_recovered",
            )
        if steps is not None:
            await steps.journaled(journaled_steps(state, detail))
        # Its events continue after the last one the journal proves the run yielded; where the stream stands is
        # journaled at once (its RUN_STARTED, and the calls of the round in flight it announces), so a recovery
        # of this recovery continues it too.
        after = journaled_count(stored.meta.segue_events, state.own, state.iteration, detail)
        state.events = after
        tail = state.own[-1] if state.own else None
        now, later = (
            announcing(state, pipeline.loop.tools, tail, finished=finished, interrupted=interrupted)
            if tail is not None and tail.role == "assistant"
            else (0, 0)
        )
        events_mark = mark(after + 1 + now, later, tool_writes(detail, state.iteration))
        await pipeline.loop.recorder.record(state, state.iteration, None, [], RunMeta(segue_events=events_mark))
        meta = {
            "recovered": True,
            "after": after,
            "model": state.plan.path.model,
            "vendor": state.plan.path.vendor,
        }
        first = make_event("RUN_STARTED", state.run_id, state.iteration, meta=meta)
        # A recovered run's reader may stop too: it ends `cancelled`, as a new run's would (segue.run.pipeline).
        events = pipeline.until_stopped(
            state,
            pipeline.loop.recovered(state, streaming=streaming, finished=finished, interrupted=interrupted),
            first=first,
        )
        async with contextlib.aclosing(events):
            async for event in events:
                yield event
    except BaseException as e:
        trace.fail(e)
        raise


def _check_configuration(
    stored: StoredRun, fingerprint: str | None, request: RunRequest, state: RunState, config_hash: str
) -> None:
    """The agent recovering the run must be the one that ran it: the same tools, prompt and provider."""
    if fingerprint is None or fingerprint_of(request, config_hash) == fingerprint:
        return
    had = stored.meta.segue_tools or {}
    has = dict(state.plan.config.tools.hashes)
    differences = [
        *(f"tool {n} is gone" for n in sorted(set(had) - set(has))),
        *(f"tool {n} is new" for n in sorted(set(has) - set(had))),
        *(f"tool {n} changed" for n in sorted(set(had) & set(has)) if had[n] != has[n]),
    ]
    descriptor = stored.meta.segue_prefix
    if descriptor is not None and descriptor.system_hash != state.plan.config.current.system_hash:
        differences.append("the system prompt changed")
    what = "; ".join(differences) or "the agent's prompt, tools, provider, guardrails or max_iterations changed"
    raise RunStateError(
        f"run {stored.run_id} cannot be recovered by this agent: {what}. Recover it with the agent configuration "
        "that started it (its next request would differ from the one the run would have sent)",
        run_id=stored.run_id,
        reason="config_changed",
    )


def _tool_steps(state: RunState, detail: RunDetail) -> tuple[Mapping[str, ToolCallRecord], set[str]]:
    """For a run that died during its tools: the results its journal holds, and the calls in flight that may not
    run again (their tool is not retry_safe)."""
    last = state.own[-1] if state.own else None
    if last is None or last.role != "assistant":
        return {}, set()
    mine = [c for c in detail.tool_calls if c.iteration == state.iteration]
    finished = {c.call_id: c for c in mine if c.result is not None}
    # A call of a tool that is not retry_safe journals its start (a row without a result): one that started and
    # never finished was in flight. A call with no row had not started, and runs now.
    interrupted = {c.call_id for c in mine if c.result is None}
    return finished, interrupted


def journaled_steps(state: RunState, detail: RunDetail) -> list[StepRef]:
    """The steps a recovered run's journal holds, in the order they ran: each model step, then the tool steps of
    its round in the order of the response's calls, for every round that completed. The round in flight is left
    to the recovered run, which takes each of its calls (finished or not) as a step in that order. (An engine
    whose execution began at a pause counts those from there: segue.durable.dbos.)"""
    position = {c.id: i for i, c in enumerate(c for m in state.own if m.role == "assistant" for c in tool_calls(m))}
    in_flight = state.iteration if state.own and state.own[-1].role == "assistant" else None
    rounds: dict[int, list[ToolCallRecord]] = {}
    for record in detail.tool_calls:
        if record.iteration != in_flight and record.result is not None:
            rounds.setdefault(record.iteration, []).append(record)
    refs: list[StepRef] = []
    # One model step per iteration: a failed call that paused a resumed run again is followed, at its iteration,
    # by the call of the next resume (another execution's step).
    for iteration in sorted({c.iteration for c in detail.llm_interactions}):
        refs.append(StepRef(kind="model_call", run_id=state.run_id, iteration=iteration))
        for record in sorted(rounds.get(iteration, []), key=lambda r: position.get(r.call_id, len(position))):
            refs.append(StepRef(kind="tool_call", run_id=state.run_id, iteration=iteration, call_id=record.call_id))
    return refs
