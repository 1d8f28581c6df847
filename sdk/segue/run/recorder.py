"""Recording a run in the store: the run row with its first message, then each iteration and the end, each in one
transaction. Without a store nothing is recorded and the run still runs. The end of a run is also where its
trace's `invoke_agent` span ends, with the same outcome (segue.telemetry).

What is recorded only ever grows at the end: an iteration appends the run's new messages (with the fragments its
layout keeps), its provider call, its tool calls and the run meta that changed (RunMeta: only the keys set).
Store calls run in a worker thread so the event loop never waits on the database.
"""

from __future__ import annotations

import asyncio

from segue._core.contracts import ProviderResponse
from segue.catalog import CatalogError
from segue.errors import ProviderError, StoreError
from segue.generated import (
    LlmInteraction,
    PendingCalls,
    RunMeta,
    RunStatus,
    StoredRequest,
    ToolCallRecord,
    Usage,
)
from segue.run import unfinished
from segue.run.config import AgentConfig
from segue.run.state import RunState
from segue.store.records import NewRun


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
                output_type=params.output_type,
                output_repairs=params.output_repairs,
                model_settings=params.model_settings,
            ),
            segue_replay=state.replay,
        )
        state.persisted = state.stored_messages()
        if self.store is None:
            return
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
            private={"pii": state.pii} if state.pii else None,
            lease_seconds=self.agent.lease_seconds,
        )
        await asyncio.to_thread(self.store.create_run, new_run, state.persisted)
        unfinished.opened(self.store, state.run_id, state.usage, state.iteration)

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
        stored = state.stored_messages()
        written = state.persisted
        if len(stored) < len(written) or any(a is not b for a, b in zip(stored, written, strict=False)):
            # The layout restores iteration 1's fragment before that iteration is recorded (segue.run.serving):
            # what was written is never rewritten. Reaching this is a bug in segue, not in the app.
            raise RuntimeError(f"run {state.run_id}: recorded messages changed after they were written")
        state.persisted = stored
        if self.store is None:
            return
        await asyncio.to_thread(
            self.store.record_iteration,
            state.run_id,
            iteration=iteration,
            first_index=len(written),
            traces=stored[len(written) :],
            interaction=interaction,
            tool_calls=records,
            usage=state.usage,
            lease_seconds=self.agent.lease_seconds,
            meta_updates=meta,
            model=interaction.model if interaction else None,
            vendor=interaction.vendor if interaction else None,
        )
        unfinished.opened(self.store, state.run_id, state.usage, iteration)

    async def finish(
        self,
        state: RunState,
        status: RunStatus,
        answer: str | None,
        error: str | None,
        pending: PendingCalls | None = None,
        error_type: str | None = None,
    ) -> None:
        """The run's final (or paused) state, with its notes, replay summary and layout decision."""
        layout = state.plan.layout
        self._end_trace(state, status, error, error_type)
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
            )
        except StoreError as e:
            raise RunEndNotStored(state.run_id, status, e) from e
        unfinished.closed(state.run_id)

    def _end_trace(self, state: RunState, status: RunStatus, error: str | None, error_type: str | None) -> None:
        trace = state.trace
        if not trace.recording:
            return
        layout = state.plan.layout
        cost = None
        # A twin run cost nothing: its price at the vendor's rates (RunCost.twin_usd) is no cost to report.
        if trace.response_model is not None and state.served_by != "twin":
            try:
                cost = self.agent.catalog().cost(state.usage, trace.response_model, trace.response_vendor)
            except (CatalogError, ValueError):
                cost = None  # the catalog has no price for this path: no cost attribute rather than a wrong one
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
