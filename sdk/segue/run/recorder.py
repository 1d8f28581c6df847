"""Recording a run in the store: the run row with its first message, then each iteration and the end, each in one
transaction. Without a store nothing is recorded and the run still runs. The end of a run is also where its
trace's `invoke_agent` span ends, with the same outcome (segue.telemetry).

What is recorded only ever grows at the end: an iteration appends the run's new messages (with the fragments its
layout keeps), its provider call, its tool calls and the run meta that changed (RunMeta: only the keys set).
Store calls run in a worker thread so the event loop never waits on the database.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import attrs

from segue._core.contracts import ProviderResponse
from segue.errors import ProviderError, StoreError
from segue.generated import (
    EventMark,
    ImageBlock,
    LlmInteraction,
    Message,
    PendingCalls,
    RunMeta,
    RunStatus,
    StoredRequest,
    ToolCallRecord,
    Usage,
)
from segue.run import unfinished
from segue.run.config import AgentConfig
from segue.run.events import mark
from segue.run.state import RunState
from segue.store.leases import LeaseLost, new_owner
from segue.store.records import NewRun

log = logging.getLogger("segue.run")


def interaction_of(response: ProviderResponse, iteration: int, latency_ms: float) -> LlmInteraction:
    """The record of one provider call: the exact body the vendor received, its answer and usage."""
    return LlmInteraction(
        iteration=iteration,
        vendor=response.vendor,
        model=response.model,
        provider_request=response.request_body,
        request_headers=response.request_headers or None,
        provider_response=response.response_body,
        usage=response.usage,
        latency_ms=latency_ms,
        served_by=response.served_by,
        cache_verdict=response.cache_verdict,
    )


def failed_interaction(error: ProviderError, iteration: int, latency_ms: float) -> LlmInteraction:
    """The record of a call that failed with its evidence (ProviderError.request_body): no usage, the error."""
    return LlmInteraction(
        iteration=iteration,
        vendor=error.vendor,
        model=error.model or "",
        provider_request=error.request_body or {},
        provider_response=error.response_body,
        usage=Usage(input_tokens=0, output_tokens=0),
        latency_ms=latency_ms,
        error=str(error),
        served_by="vendor",
    )


class RunEndNotStored(StoreError):
    """The store could not record how a run ended, so it still holds the run as `running`. The caller is told
    that, never the status the run would have had: a lease-holding run is ended `error` by the next sweep."""

    def __init__(self, run_id: str, status: RunStatus, cause: StoreError) -> None:
        super().__init__(
            f"run {run_id} ended {status}, but the run store could not record it: {cause}. The store still holds "
            "the run as running; once its lease lapses, a sweep (`segue runs sweep`, `segue serve` at start, "
            "RunStore.sweep()) marks it error"
        )
        self.run_id = run_id
        self.status = status
        self.cause = cause


class Recorder:
    def __init__(self, agent: AgentConfig) -> None:
        self.store = agent.store
        self.agent = agent

    async def start(self, state: RunState, fingerprint: str) -> None:
        """The run row and its first traces. Raises IdempotencyKeyTaken when another request took the key first."""
        request, plan = state.request, state.plan
        params = request.params
        meta = RunMeta(
            segue_tools=dict(plan.config.tools.hashes),
            segue_request=StoredRequest(
                history=request.history,
                context=plan.context,
                model=params.model,
                vendor=params.vendor,
                replay_last=request.replay_last,
                replay_reasoning=request.replay_reasoning,
                replay_budget_tokens=params.replay_budget_tokens,
                replay_step=params.replay_step,
                replay_keep=params.replay_keep,
                compaction=params.compaction,
                output_type=params.output_type,
                output_repairs=params.output_repairs,
                model_settings=params.model_settings,
            ),
            segue_replay=state.replay,
            segue_compaction=plan.makes,
        )
        state.persisted = state.stored_messages()
        if self.store is None:
            return
        state.lease_owner = new_owner(state.steps.engine if state.steps is not None else None)
        new_run = NewRun(
            run_id=state.run_id,
            tenant_id=request.tenant_id,
            agent_name=self.agent.name,
            input=params.input,
            model=plan.path.model,
            vendor=plan.path.vendor,
            meta=meta,
            metadata=request.metadata,
            idempotency_key=params.idempotency_key,
            fingerprint=fingerprint,
            retry_of=request.retry_of,
            continued_from=plan.continued_from,
            parent_run_id=request.parent.run_id if request.parent is not None else None,
            parent_call_id=request.parent.call_id if request.parent is not None else None,
            private={"pii": state.pii} if state.pii else None,
            lease_seconds=self.agent.lease_seconds,
            lease_owner=state.lease_owner,
        )
        write = asyncio.ensure_future(asyncio.to_thread(self.store.create_run, new_run, state.persisted))
        try:
            await asyncio.shield(write)
        except asyncio.CancelledError:
            # The worker thread writes the row whatever the caller does: wait for its outcome, so that a row it
            # wrote is known to this process and ended `cancelled` (Pipeline), never left `running`.
            await asyncio.wait([write])
            if not write.cancelled() and write.exception() is None:
                unfinished.opened(self.store, state.run_id, state.usage, state.iteration, state.lease_owner)
            raise
        unfinished.opened(self.store, state.run_id, state.usage, state.iteration, state.lease_owner)

    async def record_response(
        self, state: RunState, interaction: LlmInteraction, meta_updates: RunMeta | None, events: EventMark
    ) -> None:
        """A model step: its response (and the messages before it not yet stored), who served, the run's cost so
        far, where its event stream stands (`events`) and the meta that changed with it, in one transaction,
        before any of its tools runs."""
        layout = state.layout
        # What a recovered run reads back (segue.run.recovery): the cost so far and the layout's decision.
        meta = attrs.evolve(
            meta_updates or RunMeta(),
            segue_cost=state.cost,
            segue_layout=layout.meta() if layout is not None else None,
            segue_events=events,
        )
        await self.record(state, interaction.iteration, interaction, [], meta)

    async def record_tool(
        self, state: RunState, record: ToolCallRecord, message: Message | None, images: Sequence[ImageBlock] = ()
    ) -> None:
        """A tool step: its result, as it completes, renewing the lease. The round's last result brings its tool
        `message`, which joins the run's messages and is stored in the same transaction; an earlier one the `images`
        its tool returned, which recovery reads back to make that message (segue.store.tool_calls)."""
        if message is not None:
            state.own.append(message)
            await self.record(state, record.iteration, None, [record])
            return
        if self.store is None:
            return
        await asyncio.to_thread(
            self.store.record_tool_call,
            state.run_id,
            record,
            lease_seconds=self.agent.lease_seconds,
            owner=state.lease_owner,
            images=images,
        )

    async def record_tool_starts(self, state: RunState, calls: list[ToolCallRecord]) -> None:
        """The calls of tools that are not retry_safe a round is about to make, in one transaction, before they
        are announced and run: recovery never runs them twice (segue.run.recovery)."""
        if self.store is None or not calls:
            return
        await asyncio.to_thread(self.store.record_tool_starts, state.run_id, calls, owner=state.lease_owner)

    async def record(
        self,
        state: RunState,
        iteration: int,
        interaction: LlmInteraction | None,
        records: list[ToolCallRecord],
        meta: RunMeta | None = None,
    ) -> None:
        """The run's messages since the last write, the call and tool records, who served (`interaction`) and the
        run meta that changed with it (`meta`), in one transaction."""
        written, new = self._unwritten(state)
        if self.store is None:
            return
        await asyncio.to_thread(
            self.store.record_iteration,
            state.run_id,
            iteration=iteration,
            first_index=written,
            traces=new,
            interaction=interaction,
            tool_calls=records,
            usage=state.usage,
            lease_seconds=self.agent.lease_seconds,
            meta_updates=meta,
            model=interaction.model if interaction else None,
            vendor=interaction.vendor if interaction else None,
            owner=state.lease_owner,
        )
        unfinished.opened(self.store, state.run_id, state.usage, iteration, state.lease_owner)

    @staticmethod
    def _unwritten(state: RunState) -> tuple[int, list[Message]]:
        """(how many of the run's messages are stored, the ones not yet), marking them stored."""
        stored = state.stored_messages()
        written = state.persisted
        if len(stored) < len(written) or any(a is not b for a, b in zip(stored, written, strict=False)):
            # The layout restores iteration 1's fragment before that iteration is recorded (segue.run.serving):
            # what was written is never rewritten. Reaching this is a bug in segue, not in the app.
            raise RuntimeError(f"run {state.run_id}: recorded messages changed after they were written")
        state.persisted = stored
        return len(written), stored[len(written) :]

    async def finish(
        self,
        state: RunState,
        status: RunStatus,
        answer: str | None,
        error: str | None,
        pending: PendingCalls | None = None,
        error_type: str | None = None,
        events: EventMark | None = None,
    ) -> None:
        """The run's final (or paused) state, with its notes, replay summary and layout decision. `events`: where
        its event stream stands once the end's events are out (by default the one event that follows)."""
        layout = state.layout
        self._end_trace(state, status, error, error_type)
        written, new = self._unwritten(state)  # a tool message the run's end follows, a repair turn
        if self.store is None:
            return
        updates = RunMeta(
            segue_pending=pending,
            segue_notes=state.notes.as_list() or None,
            segue_replay=state.replay,
            segue_cost=state.cost,
            segue_served_by=state.served_by,
            segue_layout=layout.meta() if layout is not None else None,
            segue_stop_reason=state.stop_reason,
            segue_events=events or mark(state.events + 1),
        )
        try:
            await asyncio.to_thread(
                self.store.finish_run,
                state.run_id,
                status=status,
                answer=answer,
                error=error,
                usage=state.usage,
                iterations=state.iteration,
                meta_updates=updates,
                private={"pii": state.pii} if state.pii else None,
                owner=state.lease_owner,
                first_index=written,
                traces=new,
            )
        except LeaseLost:
            unfinished.closed(state.run_id)  # not this process's run any more: nothing to end at exit
            raise
        except StoreError as e:
            raise RunEndNotStored(state.run_id, status, e) from e
        unfinished.closed(state.run_id)

    async def stopped(self, state: RunState, stop: BaseException) -> None:
        """The run's reader stopped it (its task was cancelled, its event stream closed) before it ended: record it
        `cancelled` with the cause, unless its end is recorded already. Never raises, so the stop goes on; a run
        whose end cannot be stored stays with the exit hook (segue.run.unfinished) and the sweep, and is logged."""
        if self.store is None or not unfinished.is_open(state.run_id):
            return
        try:
            await asyncio.shield(self.finish(state, "cancelled", None, stop_cause(stop)))
        except (Exception, asyncio.CancelledError) as e:
            log.warning("run %s was stopped; its end could not be recorded now: %s", state.run_id, e)

    def _end_trace(self, state: RunState, status: RunStatus, error: str | None, error_type: str | None) -> None:
        trace = state.trace
        if not trace.recording:
            return
        layout = state.layout
        # The run's cost is the sum of its calls, each priced once on the path that served it (ModelCall.priced in
        # segue.run.model_call); a twin run cost nothing (its price at the vendor's rates, RunCost.twin_usd, is no
        # cost to report).
        cost = state.cost.usd if state.cost is not None and state.served_by != "twin" else None
        trace.finish(
            status=status,
            usage=state.usage,
            iterations=state.iteration,
            replay=state.replay,
            layout=layout.decision.mode if layout is not None and layout.decision is not None else None,
            cost_usd=cost,
            served_by=state.served_by,
            error_type=error_type or ("RunError" if status == "error" else None),
            error=error,
        )


def stop_cause(stop: BaseException) -> str:
    """The error text of a run its reader stopped: a cancelled task (with the reason it was cancelled with, if any),
    or an event stream closed before the run's last event."""
    if isinstance(stop, GeneratorExit):
        return "the run was cancelled: its event stream was closed before the run ended (the reader stopped reading)"
    reason = stop.args[0] if stop.args and isinstance(stop.args[0], str) else None
    return f"the run was cancelled: {reason}" if reason else "the run was cancelled"
