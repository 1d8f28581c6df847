"""The run pipeline: one order for every run, each step a collaborator with one job.

    validate (request.py: every argument, no I/O)
      -> idempotency (idempotency.py: a repeated request returns its stored result)
      -> plan (plan.py: configuration snapshot, layout decided as far as it can be, one store read for the replay)
      -> a compaction the plan says is due, made by a run of its own before this one (compaction.py)
      -> record the run row (recorder.py)
      -> loop (loop.py: model steps laid out, sent and priced (model_call.py), who served (serving.py), each
         response recorded, tool steps (tool_calls.py), the end recorded once; under an engine each step one of
         the engine's (steps.py))

retry builds its request from the run's RunMeta and goes through the same steps; a prewarm (prewarm.py) validates
and plans like the run it warms for, lays out its prefix and sends only that; resume re-plans a paused run the
same way, claims it, runs the calls it waited on, and continues the loop; recover (recovery.py) rebuilds a running
run whose lease lapsed from its journal, claims it and continues the loop at the step it died in. Nothing is written
before the request is validated and planned: a refusal changes nothing.

Each run is traced (segue.telemetry) when the app set a tracer provider: the pipeline opens the run's
`invoke_agent` span before the plan (so reading an MCP server's tools nests in it), the loop opens a `chat` span
per request and the tool runner an `execute_tool` span per call, and the recorder ends the run's span with its
outcome, as it records it. A refusal before the run row exists ends the span with the error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Mapping
from typing import Any

import attrs
from ulid import ULID

from segue.cache.notes import RunNotes
from segue.errors import InputError, RunStateError
from segue.generated import RunDetail, RunEvent, RunMeta, RunResult, ToolCallRecord, get_converter
from segue.providers.base import serving_path
from segue.replay.paths import still_sent
from segue.run import unfinished
from segue.run.compaction import Compactor
from segue.run.config import AgentConfig
from segue.run.context import fold_dynamic
from segue.run.conversation import tool_calls, user_message
from segue.run.events import mark, stamped, tool_writes
from segue.run.guard import Guard
from segue.run.idempotency import Idempotency, fingerprint_of, replayed_event
from segue.run.loop import Loop
from segue.run.next_step import round_announcements
from segue.run.plan import Planner
from segue.run.prewarm import Prewarmer
from segue.run.recorder import Recorder
from segue.run.recovery import recover
from segue.run.request import RunRequest, validate, validate_prewarm
from segue.run.resume import arguments_of, decisions_for, load_own_run, pending_calls
from segue.run.state import RunState, make_event
from segue.run.steps import Steps
from segue.run.tool_calls import ToolRunner
from segue.store.leases import new_owner
from segue.store.records import TERMINAL, IdempotencyKeyTaken, StoredRun
from segue.store.run_store import RunStore
from segue.telemetry import RunTrace, attached


@attrs.frozen(kw_only=True)
class Resumption:
    """A resume checked before anything is written (Pipeline.resumption): the paused run, its request rebuilt,
    the iteration it paused at, the calls it waits on, the decision for each, and the client's own results."""

    stored: StoredRun
    detail: RunDetail
    request: RunRequest
    iteration: int
    waiting: list[str]
    decisions: dict[str, bool]
    tool_results: Mapping[str, str] | None

    @property
    def pause(self) -> int:
        """Which pause of the run this resumes: the seq of its RUN_PAUSED event (each pause has its own; 0 for a
        run stored without event marks)."""
        events = self.stored.meta.segue_events
        return events.count if events is not None else 0


class Pipeline:
    """The run machinery of one agent."""

    def __init__(self, agent: AgentConfig) -> None:
        self.agent = agent
        guard = Guard(agent.guardrails)
        self.guard = guard
        self.idempotency = Idempotency(agent.store)
        self.planner = Planner(agent)
        self.recorder = Recorder(agent)
        self.tools = ToolRunner(guard, pipeline=self, agent=agent.name)
        self.loop = Loop(agent, self.recorder, self.tools, guard)
        self.prewarmer = Prewarmer(agent, self.planner)

    def validate(self, arguments: Mapping[str, Any], *, deps: Any = None) -> RunRequest:
        request = validate(arguments, self.agent.rules, agent=self.agent.name)
        return attrs.evolve(request, deps=deps) if deps is not None else request

    def validate_prewarm(self, arguments: Mapping[str, Any]) -> RunRequest:
        return validate_prewarm(arguments, self.agent.rules, agent=self.agent.name)

    async def run(
        self, request: RunRequest, *, streaming: bool, run_id: str | None = None, steps: Steps | None = None
    ) -> AsyncGenerator[RunEvent, None]:
        """A new run for a validated request, as events. `run_id`: the id it is to have (a ULID an engine chose for
        it; default: a new one); `steps`: the engine that runs its steps (segue.run.steps)."""
        fingerprint = fingerprint_of(request, self.agent.config_hash)
        existing = await self.idempotency.lookup(request, fingerprint)
        if existing is not None:
            yield replayed_event(existing)
            return
        trace = self.trace(request)
        try:
            running = self._run(request, fingerprint, trace, streaming=streaming, run_id=run_id, steps=steps)
            async with contextlib.aclosing(running) as events:
                async for event in events:
                    yield event
        except BaseException as e:
            trace.fail(e)  # ended before it had an outcome (e.g. a tool source that cannot start); else a no-op
            raise

    async def _run(
        self,
        request: RunRequest,
        fingerprint: str,
        trace: RunTrace,
        *,
        streaming: bool,
        run_id: str | None,
        steps: Steps | None,
    ) -> AsyncGenerator[RunEvent, None]:
        with attached(trace):  # a tool source's listing (an MCP tools/list) is part of the run
            plan = await self.planner.plan(request)
        if plan.compaction_due:  # a run of its own, recorded before this one (segue.run.compaction)
            plan = await Compactor(self).before(request, plan)
        state = RunState(
            run_id=run_id or str(ULID()),
            request=request,
            plan=plan,
            own=[],
            replay=plan.summary,
            trace=trace,
            steps=steps,
        )
        text = fold_dynamic(request.context, request.params.input)
        state.own.append(user_message(self.guard.protect(text, state.pii)))
        try:
            # The prefix descriptor is written with the first response, when it is known who served.
            await self.recorder.start(state, fingerprint)
        except IdempotencyKeyTaken as taken:
            # Another request with the same key won the race: answer like the idempotency check would.
            existing = await self.idempotency.lookup(request, fingerprint)
            if existing is None:
                raise
            trace.fail(taken)  # this run never started: its span ends here
            yield replayed_event(existing)
            return
        except asyncio.CancelledError as stop:  # cancelled while its row was written: end the row it wrote
            await self.recorder.stopped(state, stop)
            raise
        self.started(state)
        started: dict[str, Any] = {"model": plan.path.model, "vendor": plan.path.vendor}
        if state.replay is not None:
            started["replay"] = get_converter().unstructure(state.replay)
        first = make_event("RUN_STARTED", state.run_id, 0, meta=started)
        events = self.until_stopped(state, self.loop.run(state, streaming=streaming), first=first)
        async with contextlib.aclosing(events):
            async for event in events:
                yield event

    async def retry_request(self, run_id: Any, tenant_id: str, deps: Any = None) -> RunRequest:
        """The request of a finished run, to run again as a new run (retry_of = its id)."""
        stored = await load_own_run(self.store(), run_id, tenant_id, self.agent.name, "retry")
        if stored.status not in TERMINAL:
            raise RunStateError(
                f"run {stored.run_id} is {stored.status}; retry a finished run (resume a paused one)",
                run_id=stored.run_id,
                reason="not_terminal",
            )
        return attrs.evolve(self.validate(arguments_of(stored), deps=deps), retry_of=stored.run_id)

    async def resume(
        self,
        run_id: Any,
        approved: bool | Mapping[str, bool],
        tool_results: Mapping[str, str] | None,
        tenant_id: str,
        *,
        streaming: bool,
        deps: Any = None,
        steps: Steps | None = None,
    ) -> AsyncGenerator[RunEvent, None]:
        """Continue a paused run. Everything is checked and planned before the run is claimed: a refusal changes
        nothing. `steps`: the engine that runs its steps (segue.run.steps)."""
        resumption = await self.resumption(run_id, approved, tool_results, tenant_id, deps=deps)
        async for event in self.resumed(resumption, streaming=streaming, steps=steps):
            yield event

    async def resumption(
        self,
        run_id: Any,
        approved: bool | Mapping[str, bool],
        tool_results: Mapping[str, str] | None,
        tenant_id: str,
        *,
        deps: Any = None,
    ) -> Resumption:
        """A resume checked (reads only): the paused run, its request, the calls it waits on and the decisions for
        them. RunStateError / InputError for a run that cannot be resumed so, before anything is written."""
        store = self.store()
        stored = await load_own_run(store, run_id, tenant_id, self.agent.name, "resume")
        iteration, waiting = pending_calls(stored)
        decisions = decisions_for(waiting, approved, tool_results)
        detail = await asyncio.to_thread(store.get_run, stored.run_id, tenant_id=tenant_id)
        assert detail is not None  # read above, and runs are never deleted
        # The same run, so its metadata too: the trailing state's app_state after the pause is the one before it.
        request = self.validate({**arguments_of(stored), "metadata": detail.metadata}, deps=deps)
        return Resumption(
            stored=stored,
            detail=detail,
            request=request,
            iteration=iteration,
            waiting=waiting,
            decisions=decisions,
            tool_results=tool_results,
        )

    async def resumed(
        self, resumption: Resumption, *, streaming: bool, steps: Steps | None = None
    ) -> AsyncGenerator[RunEvent, None]:
        """A checked resume (`resumption`) carried out: the run claimed, the calls it waited on, then the loop."""
        trace = self.trace(resumption.request)
        resumed = self._resume(resumption, trace, streaming, steps)
        try:
            async with contextlib.aclosing(resumed):
                async for event in resumed:
                    yield event
        except BaseException as e:
            trace.fail(e)
            raise

    async def _resume(
        self, resumption: Resumption, trace: RunTrace, streaming: bool, steps: Steps | None
    ) -> AsyncGenerator[RunEvent, None]:
        store, stored = self.store(), resumption.stored
        with attached(trace):
            state = await self.resumed_state(stored, resumption.request, resumption.iteration, trace)
        state.steps = steps  # (its engine names the new lease)
        claimed = await self.claim(state, store.claim_paused, stored.run_id, stored.tenant_id)
        if not claimed:
            raise RunStateError(
                f"run {stored.run_id} was resumed by another request already",
                run_id=stored.run_id,
                reason="already_resumed",
            )
        events = self.until_stopped(
            state,
            self._resumed_events(
                state, resumption.detail, resumption.waiting, resumption.decisions, resumption.tool_results, streaming
            ),
        )
        async with contextlib.aclosing(events):
            async for event in events:
                yield event

    async def _resumed_events(
        self,
        state: RunState,
        detail: RunDetail,
        waiting: Collection[str],
        decisions: Mapping[str, bool],
        tool_results: Mapping[str, str] | None,
        streaming: bool,
    ) -> AsyncGenerator[RunEvent, None]:
        """A claimed run: the calls it waited on, then the loop. A round that paused with some of its calls done has
        their results in the journal: the calls that ran beside a sub-run that paused for approval, or those a
        recovery found finished when it paused an approved call that was in flight (segue.run.loop). They are read
        back, not run again."""
        asked = tool_calls(state.own[-1])
        journaled = [c for c in detail.tool_calls if c.iteration == state.iteration]
        finished: dict[str, ToolCallRecord] = {}
        if waiting and len(waiting) < len(asked):  # a normal pause waits on every call of the response
            finished = {c.call_id: c for c in journaled if c.result is not None and c.call_id not in waiting}
            state.journaled_images = await asyncio.to_thread(
                self.store().tool_calls.images, state.run_id, state.iteration, finished
            )
        calls = [c for c in asked if c.id in waiting or c.id in finished]
        # Its events continue the paused run's; where they stand is journaled before its calls are announced.
        now, later = round_announcements(
            state, self.loop.tools, calls, finished=finished, skip=finished, decisions=decisions, supplied=tool_results
        )
        events = mark(state.events + now, later, tool_writes(detail, state.iteration))
        await self.recorder.record(state, state.iteration, None, [], RunMeta(segue_events=events))
        if calls:
            async for event in self.loop.tool_round(state, calls, decisions, tool_results, finished):
                yield event
        if not state.ended:
            async for event in self.loop.run(state, streaming=streaming, resumed=True):
                yield event

    async def claim(self, state: RunState, claim: Callable[..., bool], run_id: str, tenant_id: str) -> bool:
        """Take the run for this process (`claim`: the store's claim of a paused or a lapsed run) under a new lease
        holder; claimed, it is this process's open run. The worker thread claims whatever the caller does, so a
        caller cancelled meanwhile still learns the outcome and ends a run it claimed `cancelled`."""
        state.lease_owner = new_owner(state.steps.engine if state.steps is not None else None)
        lease = self.agent.lease_seconds
        taken = asyncio.ensure_future(
            asyncio.to_thread(claim, run_id, tenant_id, lease_seconds=lease, owner=state.lease_owner)
        )
        try:
            claimed = await asyncio.shield(taken)
        except asyncio.CancelledError as stop:
            await asyncio.wait([taken])
            if not taken.cancelled() and taken.exception() is None and taken.result():
                unfinished.opened(self.store(), state.run_id, state.usage, state.iteration, state.lease_owner)
                await self.recorder.stopped(state, stop)
            raise
        if claimed:
            unfinished.opened(self.store(), state.run_id, state.usage, state.iteration, state.lease_owner)
            self.started(state)
        return bool(claimed)

    async def until_stopped(
        self, state: RunState, events: AsyncIterator[RunEvent], *, first: RunEvent | None = None
    ) -> AsyncGenerator[RunEvent, None]:
        """The events of a run whose row exists, ended `cancelled` however its reader stops before its last event:
        its task cancelled (Ctrl-C, a timeout, a client gone) or its event stream closed (`aclose()`, a `break` out
        of `async for` once the generator is collected, a web client gone). The end is recorded before the stop
        goes on, so the run's next turn can replay it at once."""
        try:
            if first is not None:
                state.events += 1
                yield stamped(state.events, first)
            async with contextlib.aclosing(events):  # type: ignore[type-var]
                async for event in events:
                    state.events += 1  # numbered as it leaves the run: the sequence its journal marks count
                    yield stamped(state.events, event)
        except (asyncio.CancelledError, GeneratorExit) as stop:
            await self.recorder.stopped(state, stop)
            raise

    async def resumed_state(self, stored: StoredRun, request: RunRequest, iteration: int, trace: RunTrace) -> RunState:
        """A paused run's state, re-planned the way its earlier requests were (reads only)."""
        # The layout was decided once for the run: it resumes with that decision, not a new one.
        plan = await self.planner.plan(request, resumed_layout=stored.meta.segue_layout)
        # The summary as it stood at the pause: reasoning the earlier requests went without stays off.
        summary = stored.meta.segue_replay if plan.summaries else None
        own = [t.message for t in stored.traces]
        return RunState(
            run_id=stored.run_id,
            request=request,
            plan=plan,
            own=own,
            replay=summary,
            bound=still_sent(summary),
            iteration=iteration,
            resumed_at=iteration,
            usage=stored.usage,
            pii=dict((stored.private or {}).get("pii", {})),
            descriptor=stored.meta.segue_prefix,
            notes=RunNotes(stored.meta.segue_notes or []),
            cost=stored.meta.segue_cost,
            served_by=stored.meta.segue_served_by,
            persisted=list(own),
            trace=trace,
            # Cache diagnostics continue from the paused run's last response; its collapse was said already.
            last_response=stored.meta.segue_last_response,
            collapsed=stored.meta.segue_cache_collapse is not None,
            # A resumed run's events continue the paused run's sequence (a run stored without a mark: from 1).
            events=stored.meta.segue_events.count if stored.meta.segue_events is not None else 0,
        )

    async def recover(
        self, run_id: Any, tenant_id: str, *, streaming: bool, deps: Any = None, steps: Steps | None = None
    ) -> AsyncIterator[RunEvent]:
        """Continue a run whose lease lapsed (or, with `steps`, the run its engine continues), from its journal
        (segue.run.recovery)."""
        async for event in recover(self, run_id, tenant_id, streaming=streaming, deps=deps, steps=steps):
            yield event

    def trace(self, request: RunRequest) -> RunTrace:
        """The run's invoke_agent span, on the path the run is aimed at (a no-op trace when tracing is off)."""
        path = serving_path(self.agent.provider, model=request.params.model, vendor=request.params.vendor)
        return self.agent.telemetry.run(agent=self.agent.name, vendor=path.vendor, model=path.model)

    @staticmethod
    def started(state: RunState) -> None:
        """The run row exists (or was claimed): who the run is, its conversation (the first replayed run) and replay."""
        request = state.request
        state.trace.started(
            run_id=state.run_id,
            conversation_id=request.knobs.runs[0] if request.knobs is not None else state.run_id,
            tenant_id=request.tenant_id,
            replay=state.replay,
            continued_from=state.plan.continued_from,
        )

    def store(self) -> RunStore:
        if self.agent.store is None:
            raise InputError("this needs a store: create the agent with store=RunStore(...)")
        return self.agent.store


async def last_result(events: AsyncIterator[RunEvent]) -> RunResult:
    """The result a run's events end with (run, resume and recover return it; a sub-run hands it to its parent)."""
    result: RunResult | None = None
    async with contextlib.aclosing(events):  # type: ignore[type-var]
        async for event in events:
            if event.result is not None:
                result = event.result
    if result is None:
        raise RuntimeError("the run ended without a result event")  # a bug in segue, not in the caller's input
    return result
