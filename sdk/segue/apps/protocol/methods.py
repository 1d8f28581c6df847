"""The server's side of each client-to-server method: the same runtime an app would call in Python.

`run` and `resume` drive Agent.stream / Agent.resume_stream and forward every RunEvent as a `run/event`
notification (unless params.events is false) before the response; a validation error that the stream reports as
a RUN_ERROR event without a result becomes the matching error response (ReplayRunError with its reason and run
id, IdempotencyConflict, InputError; a refused retry / resume is an InputError whose data says why). A paused
run answers with the calls it waits for. Every run that started ends with exactly one terminal event: when the
request is cancelled, or the run fails in a way the stream could not report, a RUN_ERROR carrying the run as
stored (status `cancelled` or `error`) is sent before the response.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import attrs

from segue.apps.protocol.auth import ANY_TENANT, TenantNotAllowed
from segue.apps.protocol.config import AgentEntry, ServeApp
from segue.apps.protocol.errors import RpcError
from segue.apps.protocol.params import invalid_params
from segue.apps.protocol.rpc import Handler, RequestContext
from segue.cache.explain import breaks, explain_run
from segue.generated import RunDetail, RunEvent, RunSummary, ToolCallBlock
from segue.generated.protocol import (
    CatalogExplainParams,
    CatalogExplainResult,
    CatalogKey,
    IdempotencyConflictData,
    InputErrorData,
    PendingToolCall,
    PrewarmParams,
    PrewarmResponse,
    RecoverParams,
    ReplayRunErrorData,
    ResumeParams,
    RetryParams,
    RunEventParams,
    RunNotFoundData,
    RunParams,
    RunResponse,
    RunsExplainParams,
    RunsExplainResult,
    RunsGetParams,
    RunsGetResult,
    RunsListParams,
    RunsListResult,
    RunsSweepParams,
    RunsSweepResult,
)
from segue.generated.protocol_methods import ErrorCode
from segue.run.request import run_arguments, run_id_of
from segue.run.state import make_event, stored_result
from segue.store.records import DEFAULT_TENANT


class Methods:
    """Handlers for the method table, over the agents and stores of one ServeApp."""

    def __init__(self, app: ServeApp) -> None:
        self.app = app

    def handlers(self) -> dict[str, Handler]:
        return {
            "run": self.run,
            "retry": self.retry,
            "resume": self.resume,
            "run/recover": self.recover,
            "prewarm": self.prewarm,
            "runs/list": self.runs_list,
            "runs/get": self.runs_get,
            "runs/explain": self.runs_explain,
            "runs/sweep": self.runs_sweep,
            "catalog/explain": self.catalog_explain,
        }

    def entry(self, name: str, ctx: RequestContext) -> AgentEntry:
        """The named agent, as this session's runs use it: a client that answers no tool/call gets the agent whose
        client-side tools pause the run."""
        found = self.app.agent(name)
        ctx.agent = name
        return found if ctx.session.answers_tool_calls else attrs.evolve(found, agent=found.pausing)

    async def run(self, ctx: RequestContext, p: RunParams) -> RunResponse:
        entry = self.entry(p.agent, ctx)
        events = entry.agent.stream(**run_arguments(p))
        return await self._consume(
            ctx, entry, events, emit=p.events is not False, tenant_id=p.tenant_id, idempotency_key=p.idempotency_key
        )

    async def retry(self, ctx: RequestContext, p: RetryParams) -> RunResponse:
        entry = self.entry(p.agent, ctx)
        ctx.run_id = p.run_id
        result = await entry.agent.retry(p.run_id, tenant_id=p.tenant_id or DEFAULT_TENANT)
        ctx.run_id, ctx.run_status = result.run_id, result.status
        pending = await self._stored_pending(entry, result.run_id, result.status, p.tenant_id)
        return RunResponse(result=result, pending=pending or None)

    async def resume(self, ctx: RequestContext, p: ResumeParams) -> RunResponse:
        entry = self.entry(p.agent, ctx)
        if p.approved is not None and p.decisions is not None:
            raise invalid_params("/decisions", "give `approved` (one answer for all) or `decisions`, not both")
        approved: bool | dict[str, bool] = True if p.approved is None else p.approved
        if p.decisions is not None:
            approved = _unique({d.call_id: d.approved for d in p.decisions}, len(p.decisions), "/decisions")
        tool_results = None
        if p.tool_results is not None:
            tool_results = _unique({r.call_id: r.content for r in p.tool_results}, len(p.tool_results), "/tool_results")
        ctx.run_id = p.run_id
        events = entry.agent.resume_stream(
            p.run_id, approved=approved, tool_results=tool_results, tenant_id=p.tenant_id or DEFAULT_TENANT
        )
        return await self._consume(ctx, entry, events, emit=p.events is not False, tenant_id=p.tenant_id)

    async def recover(self, ctx: RequestContext, p: RecoverParams) -> RunResponse:
        entry = self.entry(p.agent, ctx)
        ctx.run_id = p.run_id
        events = entry.agent.recover_stream(p.run_id, tenant_id=p.tenant_id or DEFAULT_TENANT)
        return await self._consume(ctx, entry, events, emit=p.events is not False, tenant_id=p.tenant_id)

    async def prewarm(self, ctx: RequestContext, p: PrewarmParams) -> PrewarmResponse:
        entry = self.entry(p.agent, ctx)
        arguments = {f.name: getattr(p, f.name) for f in attrs.fields(PrewarmParams) if f.name != "agent"}
        # Unset fields take Agent.prewarm's defaults, as unset RunParams fields take Agent.run's.
        result = await entry.agent.prewarm(**{k: v for k, v in arguments.items() if v is not None})
        return PrewarmResponse(result=result)

    async def runs_list(self, ctx: RequestContext, p: RunsListParams) -> RunsListResult:
        limit, offset = p.limit or 50, p.offset or 0

        def read() -> list[RunSummary]:
            found: list[RunSummary] = []
            for store in self.app.stores.values():
                found += store.list_runs(
                    tenant_id=p.tenant_id or DEFAULT_TENANT,
                    status=p.status,
                    agent_name=p.agent_name,
                    limit=limit + offset,
                )
            # Run ids are ULIDs, so their order is their creation order across stores too.
            found.sort(key=lambda r: r.run_id, reverse=True)
            return found[offset : offset + limit]

        return RunsListResult(runs=await asyncio.to_thread(read))

    async def runs_get(self, ctx: RequestContext, p: RunsGetParams) -> RunsGetResult:
        return RunsGetResult(run=await self._run_of(p.run_id, p.tenant_id))

    async def runs_explain(self, ctx: RequestContext, p: RunsExplainParams) -> RunsExplainResult:
        run = await self._run_of(p.run_id, p.tenant_id)
        previous = None
        if run.continued_from is not None:
            try:
                previous = await self._run_of(run.continued_from, p.tenant_id)
            except RpcError:  # deleted, or in a store this server does not have: explain says "missing"
                previous = None
        explanation = explain_run(run, previous)
        return RunsExplainResult(explanation=explanation, breaks=[it.iteration for it in breaks(explanation)])

    async def runs_sweep(self, ctx: RequestContext, p: RunsSweepParams) -> RunsSweepResult:
        principal = ctx.session.principal
        if principal is not None and principal.tenants is not None:
            # A sweep ends abandoned runs of every tenant: only a token that may act for every tenant may ask.
            raise TenantNotAllowed(principal.name, ANY_TENANT, principal.tenants)

        def sweep() -> list[str]:
            return [run_id for store in self.app.stores.values() for run_id in store.sweep()]

        return RunsSweepResult(run_ids=await asyncio.to_thread(sweep))

    async def _run_of(self, run_id: str, tenant_id: str | None) -> RunDetail:
        """The run from whichever store holds it for the tenant, or RunNotFound."""
        tenant = tenant_id or DEFAULT_TENANT
        stored_id = run_id_of(run_id) or run_id  # ULIDs are case-insensitive; stored upper case
        for store in self.app.stores.values():
            run = await asyncio.to_thread(store.get_run, stored_id, tenant_id=tenant)
            if run is not None:
                return run
        raise RpcError(
            ErrorCode.RUN_NOT_FOUND,
            f"no run {run_id!r} for tenant {tenant!r}; check the run id and the tenant",
            RunNotFoundData(run_id=run_id),
        )

    async def catalog_explain(self, ctx: RequestContext, p: CatalogExplainParams) -> CatalogExplainResult:
        resolved = self.app.catalog.resolve(p.model, p.vendor)
        keys = [
            CatalogKey(path=list(k.path), value=k.value, file=k.file, pointer=k.pointer, layer=k.layer)
            for k in resolved.explain()
        ]
        return CatalogExplainResult(
            model=resolved.model,
            vendor=resolved.vendor,
            label=resolved.label,
            layers=list(resolved.layers),
            keys=keys,
            note=resolved.note,
        )

    # -- runs -------------------------------------------------------------------------------------------------

    async def _consume(
        self,
        ctx: RequestContext,
        entry: AgentEntry,
        events: AsyncIterator[RunEvent],
        *,
        emit: bool,
        tenant_id: str | None,
        idempotency_key: str | None = None,
    ) -> RunResponse:
        calls: dict[str, ToolCallBlock] = {}
        pending_ids: list[str] = []
        result = None
        ended = False  # a terminal event was sent
        try:
            async for event in events:
                if event.type == "RUN_STARTED":
                    ctx.run_id = event.run_id
                ended = ended or event.type in _TERMINAL
                if emit and ctx.session.state.wants(event.type):
                    ctx.session.notify("run/event", RunEventParams(request_id=ctx.request_id, event=event))
                if event.tool_call is not None:
                    calls[event.tool_call.id] = event.tool_call
                if event.type == "RUN_ERROR" and event.result is None:
                    raise _validation_error(event, idempotency_key)
                if event.result is not None:
                    result = event.result
                    ctx.run_status = result.status
                if event.type == "RUN_PAUSED":
                    pending_ids = [str(i) for i in event.meta.get("pending", [])]
        except BaseException as e:
            if emit and ctx.run_id and not ended and not isinstance(e, RpcError):
                await self._last_event(ctx, entry, e, tenant_id)
            raise
        finally:
            # Close the agent's generator here, in this task, so an early exit (an error) ends the run cleanly.
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
        if result is None:
            raise RpcError(ErrorCode.INTERNAL_ERROR, "the run ended without a result event")
        pending = [self._pending(entry, calls[i]) for i in pending_ids if i in calls]
        if result.status == "waiting_approval" and not pending:
            # An idempotent replay of a paused run: its calls are in the store, not in this stream.
            pending = await self._stored_pending(entry, result.run_id, result.status, tenant_id)
        return RunResponse(result=result, pending=pending or None)

    async def _last_event(
        self, ctx: RequestContext, entry: AgentEntry, e: BaseException, tenant_id: str | None
    ) -> None:
        """The terminal event of a run the stream could not finish: it was cancelled, or failed unexpectedly. The
        run loop has already recorded how it ended; the event carries the run as stored."""
        assert ctx.run_id is not None
        cancelled = isinstance(e, asyncio.CancelledError)
        error = "the run was cancelled" if cancelled else f"{type(e).__name__}: {e}"
        result = None
        try:
            stored = await asyncio.to_thread(entry.store.get_run, ctx.run_id, tenant_id=tenant_id or DEFAULT_TENANT)
        except (Exception, asyncio.CancelledError):  # cancelled again, or the store is gone: send what is known
            stored = None
        if stored is not None:
            ctx.run_status = stored.status
            result = stored_result(stored, error)
        meta = {"error_type": type(e).__name__, "status": "cancelled" if cancelled else "error"}
        event = make_event(
            "RUN_ERROR", ctx.run_id, result.iterations if result else 0, error=error, result=result, meta=meta
        )
        if ctx.session.state.wants(event.type):
            ctx.session.notify("run/event", RunEventParams(request_id=ctx.request_id, event=event))

    def _pending(self, entry: AgentEntry, call: ToolCallBlock) -> PendingToolCall:
        return PendingToolCall(call=call, client_tool=call.name in entry.client_tools)

    async def _stored_pending(
        self, entry: AgentEntry, run_id: str, status: str, tenant_id: str | None
    ) -> list[PendingToolCall]:
        if status != "waiting_approval":
            return []
        run = await asyncio.to_thread(entry.store.get_run, run_id, tenant_id=tenant_id or DEFAULT_TENANT)
        if run is None or not run.traces:
            return []
        pending = run.meta.segue_pending if run.meta is not None else None
        ids = set(pending.calls if pending is not None else [])
        last = run.traces[-1].message
        return [self._pending(entry, b) for b in last.content if isinstance(b, ToolCallBlock) and b.id in ids]


_TERMINAL = frozenset({"RUN_COMPLETED", "RUN_ERROR", "RUN_PAUSED"})


def _validation_error(event: RunEvent, idempotency_key: str | None) -> RpcError:
    """A RUN_ERROR without a result: the run was refused before anything was written."""
    kind = event.meta.get("error_type")
    message = event.error or "the run was refused"
    if kind == "ReplayRunError":
        run_id = event.meta.get("run_id")
        data = ReplayRunErrorData(reason=event.meta["reason"], run_id=run_id if isinstance(run_id, str) else None)
        return RpcError(ErrorCode.REPLAY_RUN_ERROR, message, data)
    if kind == "IdempotencyConflictError":
        conflict = IdempotencyConflictData(idempotency_key=idempotency_key or "?")
        return RpcError(ErrorCode.IDEMPOTENCY_CONFLICT, message, conflict)
    if kind == "RunStateError":
        refusal = InputErrorData(
            reason=event.meta["reason"], run_id=event.meta["run_id"], agent=event.meta.get("agent")
        )
        return RpcError(ErrorCode.INPUT_ERROR, message, refusal)
    if kind == "InputError":
        return RpcError(ErrorCode.INPUT_ERROR, message)
    return RpcError(ErrorCode.INTERNAL_ERROR, f"{kind}: {message}")


def _unique(mapping: dict[str, Any], count: int, pointer: str) -> dict[str, Any]:
    if len(mapping) != count:
        raise invalid_params(pointer, "each call_id may appear only once")
    return mapping
