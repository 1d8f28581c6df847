"""How one run executes: plan the replay, create the run row, loop over provider calls and tools, record.

`Execution` holds the machinery `Agent` runs on (the public API and argument validation live in segue.agent).
Data flows left to right, once: idempotency -> replay plan (one store query) -> conversation (system + stable
head, replayed runs, history, new input) -> loop (provider call, who served and what they reported (segue.serving),
tools, record each iteration atomically) -> finish. Every step yields RunEvents; `run()` keeps the last result,
`stream()` passes them on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs
from ulid import ULID

from segue.catalog import Catalog
from segue.context import fold_dynamic, render_stable_head
from segue.contracts import REPLAYED_META_KEY, Provider, ProviderRequest, ProviderResponse, ServingPath, StreamDone
from segue.conversation import add_usage, answer_text, tool_calls, user_message
from segue.errors import IdempotencyConflictError, InputError, ProviderError, RunStateError, SegueError
from segue.generated import (
    LlmInteraction,
    Message,
    PendingCalls,
    ReplaySummary,
    RunEvent,
    RunMeta,
    RunResult,
    RunStatus,
    StoredRequest,
    ToolCallBlock,
    ToolCallRecord,
    ToolDefinition,
    ToolResultBlock,
    get_converter,
)
from segue.guardrails import Guardrail
from segue.hashing import canonical_hash
from segue.layout import LayoutMode, LayoutPolicy, RuntimeState, TrailingStateFn
from segue.notes import RunNotes
from segue.prefix_rule import CurrentPrefix, WireView
from segue.providers.base import first_member, serving_path, serving_paths
from segue.replay import plan_replay, run_id_of
from segue.run_state import RunSpec, RunState, make_event
from segue.serving import fit, observe
from segue.store.run_store import IdempotencyKeyTaken, NewRun, RunStore, StoredRun
from segue.stored_run import decisions_for, pending_calls, spec_of, still_sent, summary_at_pause
from segue.tools import Tool

T = TypeVar("T")


class Execution:
    """The run machinery of an Agent; the attributes below are set by Agent.__init__."""

    single_call: bool = False
    provider: Provider
    store: RunStore | None
    tools: list[Tool]
    max_iterations: int
    guardrails: list[Guardrail]
    name: str
    lease_seconds: float
    trailing_state: TrailingStateFn | None
    trailing_state_layout: LayoutMode
    system: str
    config_hash: str
    _catalog: Catalog | None
    _tools_by_name: dict[str, Tool]
    _tool_defs: list[ToolDefinition]
    _tool_hashes: dict[str, str]
    _tools_hash: str

    @property
    def catalog(self) -> Catalog:
        """The catalog the layout policy reads (the packaged one plus SEGUE_CATALOG_PATH), loaded once."""
        if self._catalog is None:
            self._catalog = Catalog.load()
        return self._catalog

    def _layout_policy(self, spec: RunSpec) -> LayoutPolicy | None:
        if self.trailing_state is None:
            return None
        return LayoutPolicy(
            mode=self.trailing_state_layout,
            catalog=self.catalog,
            trailing_state=self.trailing_state,
            requires_stable_reasoning_prefix=first_member(self.provider, spec.vendor).requires_stable_reasoning_prefix,
            declares_native_tools=bool(self.tools),
            model_override=spec.model,
            vendor_override=spec.vendor if spec.model else None,
        )

    def _fingerprint(self, spec: RunSpec) -> str:
        conv = get_converter()
        return canonical_hash(
            {
                "input": spec.input,
                "history": [conv.unstructure(m, Message) for m in spec.history],
                "context": [[b.text, b.placement, b.source] for b in spec.context],
                "runs": spec.knobs.runs if spec.knobs else [],
                "replay_last": spec.replay_last,
                "replay_reasoning": spec.replay_reasoning,
                "replay_budget_tokens": spec.replay_budget_tokens,
                "tenant": spec.tenant_id,
                "model": spec.model,
                "vendor": spec.vendor,
                "agent": self.config_hash,
            }
        )

    # -- plan -------------------------------------------------------------------------------------------------

    def _current_prefix(self, spec: RunSpec, stable_head: str | None) -> CurrentPrefix:
        """What the request puts in front of the replayed runs, on the path it is aimed at (a Failover's first
        member, or with a runtime vendor that vendor's first member)."""
        path = serving_path(self.provider, model=spec.model, vendor=spec.vendor)
        return CurrentPrefix(
            vendor=path.vendor,
            model=path.model,
            system_hash=canonical_hash({"system": self.system, "stable_head": stable_head}),
            tools_hash=self._tools_hash,
            tool_hashes=self._tool_hashes,
            reasoning_vendor=path.reasoning_vendor,
        )

    async def _plan(
        self, spec: RunSpec, planned: CurrentPrefix, view: WireView | None
    ) -> tuple[list[Message], dict[ServingPath, ReplaySummary], str | None]:
        """(replayed + history messages, the replay summary per path it may be served on, continued_from).

        Reads only. The messages carry the reasoning any path keeps; segue.serving fits them per request."""
        if spec.knobs is None:
            return list(spec.history), {}, None
        stored = await self._db(self._store().load_runs, spec.knobs.runs)
        others = serving_paths(self.provider, model=spec.model, vendor=spec.vendor)[1:]
        plan = plan_replay(
            stored,
            spec.knobs,
            spec.tenant_id,
            planned,
            guardrails=bool(self.guardrails),
            view=view,
            alternatives=[
                attrs.evolve(planned, vendor=p.vendor, model=p.model, reasoning_vendor=p.reasoning_vendor)
                for p in others
            ],
        )
        return [*plan.messages, *spec.history], plan.summaries, plan.continued_from

    # -- drive ------------------------------------------------------------------------------------------------

    async def _drive(self, spec: RunSpec, *, streaming: bool) -> AsyncIterator[RunEvent]:
        fingerprint = self._fingerprint(spec)
        if spec.idempotency_key is not None and self.store is not None:
            # Before planning: a repeated request returns its stored result, even if a replayed run is gone since.
            existing = await self._idempotent_result(spec, fingerprint)
            if existing is not None:
                yield _idempotent_event(existing)
                return
        stable_head = render_stable_head(spec.context)
        planned = self._current_prefix(spec, stable_head)
        layout = self._layout_policy(spec)
        prefix, plans, continued_from = await self._plan(spec, planned, layout.on_wire if layout else None)
        summary = plans.get(planned.path)
        state = RunState(
            run_id=str(ULID()),
            spec=spec,
            system=self.system,
            stable_head=stable_head,
            prefix=prefix,
            own=[],
            replay=summary,
            planned=planned,
            plans=plans,
            layout=layout,
        )
        text = fold_dynamic(spec.context, spec.input)
        for g in self.guardrails:
            text = g.protect(text, state.pii)
        first = user_message(text)
        state.own.append(first)
        state.persisted.append(first)
        conv = get_converter()
        # The prefix descriptor is written with the first response, when it is known who served (segue.serving).
        meta = RunMeta(
            segue_tools=self._tool_hashes,
            segue_request=StoredRequest(
                history=list(spec.history),
                context=list(spec.context),
                model=spec.model,
                vendor=spec.vendor,
                replay_last=spec.replay_last,
                replay_reasoning=spec.replay_reasoning,
                replay_budget_tokens=spec.replay_budget_tokens,
            ),
            segue_replay=summary,
        )
        new_run = NewRun(
            run_id=state.run_id,
            tenant_id=spec.tenant_id,
            agent_name=self.name,
            input=spec.input,
            model=planned.model,
            vendor=planned.vendor,
            meta=meta,
            metadata=spec.metadata,
            idempotency_key=spec.idempotency_key,
            fingerprint=fingerprint,
            retry_of=spec.retry_of,
            continued_from=continued_from,
            private={"pii": state.pii} if state.pii else None,
            lease_seconds=self.lease_seconds,
        )
        if self.store is not None:
            try:
                await self._db(self.store.create_run, new_run, [first])
            except IdempotencyKeyTaken:
                # Another request with the same key won the race: answer like the idempotency check would.
                existing = await self._idempotent_result(spec, fingerprint)
                if existing is None:
                    raise
                yield _idempotent_event(existing)
                return
        replay_meta = {"replay": conv.unstructure(summary)} if summary else {}
        yield make_event(
            "RUN_STARTED", state.run_id, 0, meta={"model": planned.model, "vendor": planned.vendor, **replay_meta}
        )
        async for event in self._loop(state, streaming=streaming):
            yield event

    async def _loop(self, state: RunState, *, streaming: bool, resumed: bool = False) -> AsyncIterator[RunEvent]:
        """Iterate until an answer, a pause or a limit. `resumed`: the run was paused; if its first call fails, it
        is paused again (its tool results kept) rather than ended, so the app can resume it once more."""
        try:
            while state.iteration < self.max_iterations:
                state.iteration += 1
                iteration = state.iteration
                request = self._request(state)
                started = time.perf_counter()
                response: ProviderResponse | None = None
                try:
                    if streaming:
                        restorer = _DeltaRestorer(lambda text: self._restore(text, state), hold=bool(self.guardrails))
                        async for item in self.provider.stream(request):
                            if isinstance(item, StreamDone):
                                response = item.response
                            elif item.kind == "text" and (text := restorer.feed(item.text)):
                                yield make_event("TEXT_DELTA", state.run_id, iteration, text=text)
                            elif item.kind == "reasoning":
                                yield make_event("REASONING_DELTA", state.run_id, iteration, text=item.text)
                        if tail := restorer.flush():
                            yield make_event("TEXT_DELTA", state.run_id, iteration, text=tail)
                        if response is None:
                            raise ProviderError(
                                "the stream ended without a final message", vendor=self.provider.vendor, kind="stream"
                            )
                    else:
                        response = await self.provider.complete(request)
                except ProviderError as e:
                    message = f"{e.kind} error from {e.vendor}: {e}"
                    if resumed and iteration == state.resumed_at + 1:
                        async for event in self._pause_again(state, message):
                            yield event
                        return
                    async for event in self._fail(state, message, type(e).__name__):
                        yield event
                    return
                except Exception as e:  # a driver bug or an unparseable answer: the run must not stay "running"
                    message = f"the provider call failed with {type(e).__name__}: {e}"
                    async for event in self._fail(state, message, type(e).__name__):
                        yield event
                    return
                latency = (time.perf_counter() - started) * 1000
                assistant = Message(role="assistant", content=list(response.message.content))
                state.usage = add_usage(state.usage, response.usage)
                served = observe(state, request, response, iteration)
                state.own.append(assistant)
                interaction = LlmInteraction(
                    iteration=iteration,
                    vendor=response.vendor,
                    model=response.model,
                    provider_request=response.request_body,
                    request_headers=response.request_headers or None,
                    provider_response=response.response_body,
                    usage=response.usage,
                    latency_ms=latency,
                )
                calls = tool_calls(assistant)
                if calls and any(self._needs_approval(c) for c in calls):
                    await self._record(state, iteration, interaction, [], served)
                    pending = PendingCalls(iteration=iteration, calls=[c.id for c in calls])
                    await self._finish(state, "waiting_approval", None, None, pending)
                    for c in calls:
                        yield make_event(
                            "TOOL_CALL",
                            state.run_id,
                            iteration,
                            tool_call=c,
                            meta={"requires_approval": self._needs_approval(c)},
                        )
                    yield make_event(
                        "RUN_PAUSED",
                        state.run_id,
                        iteration,
                        result=self._result(state, "waiting_approval"),
                        meta={"pending": pending.calls},
                    )
                    return
                if not calls:
                    await self._record(state, iteration, interaction, [], served)
                    answer = self._restore(answer_text(assistant), state)
                    await self._finish(state, "success", answer, None)
                    yield make_event(
                        "RUN_COMPLETED", state.run_id, iteration, result=self._result(state, "success", answer)
                    )
                    return
                for call in calls:  # before the tools run, so a client can show "calling X..."
                    yield make_event("TOOL_CALL", state.run_id, iteration, tool_call=call)
                events: list[RunEvent] = []
                tool_message, records = await self._run_tools(state, iteration, calls, {}, None, events)
                state.own.append(tool_message)
                for event in events:
                    yield event
                await self._record(state, iteration, interaction, records, served)
            message = f"stopped after max_iterations={self.max_iterations} without a final answer"
            await self._finish(state, "max_iterations", None, message)
            yield make_event(
                "RUN_COMPLETED",
                state.run_id,
                state.iteration,
                result=self._result(state, "max_iterations", error=message),
            )
        except asyncio.CancelledError:
            await asyncio.shield(self._finish(state, "cancelled", None, "the run was cancelled"))
            raise
        except SegueError as e:
            async for event in self._fail(state, str(e), type(e).__name__):
                yield event
        except Exception as e:
            # A bug in segue or in app code it calls (e.g. trailing_state): record it so the run is terminal, and
            # let it surface.
            await asyncio.shield(self._finish(state, "error", None, f"{type(e).__name__}: {e}"))
            raise

    def _request(self, state: RunState) -> ProviderRequest:
        messages = [*state.prefix, *state.own]
        if state.layout is not None:
            runtime = RuntimeState(
                run_id=state.run_id,
                iteration=state.iteration,
                max_iterations=self.max_iterations,
                usage_so_far=state.usage,
                app_state=state.spec.metadata,
            )
            fragment = state.layout.fragment_for(state.iteration, runtime)
            messages = state.layout.lay_out(messages, fragment, state.iteration)
        replayed = [i for i, m in enumerate(messages) if m.meta and m.meta.get(REPLAYED_META_KEY)]
        messages, alternatives = fit(state, messages)
        return ProviderRequest(
            system=state.system,
            stable_head=state.stable_head,
            messages=messages,
            tools=self._tool_defs,
            replay_end=replayed[-1] if replayed else None,
            model=state.spec.model,
            vendor=state.spec.vendor,
            cache_key=state.spec.tenant_id,
            replay_path=state.planned.path if state.plans else None,
            replay_alternatives=alternatives,
        )

    def _needs_approval(self, call: ToolCallBlock) -> bool:
        tool = self._tools_by_name.get(call.name)
        return tool is not None and tool.requires_approval

    async def _run_tools(
        self,
        state: RunState,
        iteration: int,
        calls: Sequence[ToolCallBlock],
        decisions: Mapping[str, bool],
        supplied: Mapping[str, str] | None,
        events: list[RunEvent],
    ) -> tuple[Message, list[ToolCallRecord]]:
        """Execute (or deny) each call; results go through the guardrails before the model sees them."""

        async def one(call: ToolCallBlock) -> tuple[ToolResultBlock, float]:
            if supplied is not None and call.id in supplied:
                return ToolResultBlock(tool_call_id=call.id, content=supplied[call.id]), 0.0
            tool = self._tools_by_name.get(call.name)
            if tool is None:
                known = ", ".join(sorted(self._tools_by_name)) or "none"
                text = f"unknown tool {call.name!r}; the tools available are: {known}"
                return ToolResultBlock(tool_call_id=call.id, content=text, is_error=True), 0.0
            if tool.requires_approval and not decisions.get(call.id, False):
                text = f"the user did not approve calling {call.name}; do not retry it without asking"
                return ToolResultBlock(tool_call_id=call.id, content=text, is_error=True), 0.0
            arguments = _restore_args(call.arguments, self, state)
            outcome = await tool.invoke(call.id, arguments)
            return outcome.result, outcome.duration_ms

        outcomes = await asyncio.gather(*(one(c) for c in calls))
        results: list[ToolResultBlock] = []
        records: list[ToolCallRecord] = []
        for call, (result, duration) in zip(calls, outcomes, strict=True):
            content = result.content
            for g in self.guardrails:
                content = g.protect(content, state.pii)
            result = ToolResultBlock(tool_call_id=call.id, content=content, is_error=result.is_error)
            results.append(result)
            records.append(
                ToolCallRecord(
                    call_id=call.id,
                    iteration=iteration,
                    name=call.name,
                    arguments=call.arguments,
                    result=content,
                    is_error=bool(result.is_error),
                    duration_ms=duration,
                )
            )
            events.append(make_event("TOOL_RESULT", state.run_id, iteration, tool_result=result))
        return Message(role="tool", content=list(results)), records

    # -- resume -----------------------------------------------------------------------------------------------

    async def _resume_events(
        self,
        run_id: str,
        approved: bool | Mapping[str, bool],
        tool_results: Mapping[str, str] | None,
        tenant_id: str,
        *,
        streaming: bool = False,
    ) -> AsyncIterator[RunEvent]:
        # Everything is checked and planned before the run is claimed: a refusal changes nothing.
        stored = await self._load_own_run(run_id, tenant_id, "resume")
        run_id = stored.run_id
        iteration, waiting = pending_calls(stored)
        decisions = decisions_for(waiting, approved, tool_results)
        state = await self._resumed_state(stored, iteration)
        if not await self._db(self._store().claim_paused, run_id, tenant_id, lease_seconds=self.lease_seconds):
            raise RunStateError(
                f"run {run_id} was resumed by another request already", run_id=run_id, reason="already_resumed"
            )
        calls = [c for c in tool_calls(state.own[-1]) if c.id in waiting]
        if calls:
            for call in calls:  # before the tools run, as in the loop
                yield make_event("TOOL_CALL", state.run_id, state.iteration, tool_call=call)
            events: list[RunEvent] = []
            tool_message, records = await self._run_tools(
                state, state.iteration, calls, decisions, tool_results, events
            )
            for event in events:
                yield event
            state.own.append(tool_message)
            await self._record(state, state.iteration, None, records)
        async for event in self._loop(state, streaming=streaming, resumed=True):
            yield event

    async def _resumed_state(self, stored: StoredRun, iteration: int) -> RunState:
        """A paused run's state, re-planned the way its earlier requests were (reads only)."""
        spec = spec_of(stored)
        stable_head = render_stable_head(spec.context)
        planned = self._current_prefix(spec, stable_head)
        layout = self._layout_policy(spec)
        prefix, plans, _ = await self._plan(spec, planned, layout.on_wire if layout else None)
        # The summary as it stood at the pause: reasoning the earlier requests went without stays off.
        summary = summary_at_pause(stored) if plans else None
        own = [t.message for t in stored.traces]
        return RunState(
            run_id=stored.run_id,
            spec=spec,
            system=self.system,
            stable_head=stable_head,
            prefix=prefix,
            own=own,
            replay=summary,
            planned=planned,
            plans=plans,
            bound=still_sent(summary),
            iteration=iteration,
            resumed_at=iteration,
            usage=stored.usage,
            pii=dict((stored.private or {}).get("pii", {})),
            descriptor=stored.meta.segue_prefix,
            notes=RunNotes(stored.meta.segue_notes or []),
            layout=layout,
            persisted=list(own),
        )

    async def _pause_again(self, state: RunState, message: str) -> AsyncIterator[RunEvent]:
        """The first call after a resume failed: the run waits again, with its tool results kept and no call
        pending, so resuming it once more retries the call."""
        state.iteration = state.resumed_at
        pending = PendingCalls(iteration=state.iteration, calls=[])
        await self._finish(state, "waiting_approval", None, message, pending)
        yield make_event(
            "RUN_PAUSED",
            state.run_id,
            state.iteration,
            error=message,
            result=self._result(state, "waiting_approval", error=message),
            meta={"pending": [], "error_type": "ProviderError"},
        )

    # -- record -----------------------------------------------------------------------------------------------

    async def _record(
        self,
        state: RunState,
        iteration: int,
        interaction: LlmInteraction | None,
        records: list[ToolCallRecord],
        meta: RunMeta | None = None,
    ) -> None:
        """Persist what changed in the run's traces since the last write, plus the call and tool records, who
        served (`interaction`) and the run meta that changed with it (`meta`), in one transaction.

        Usually that is the new tail; when the layout restores iteration 1's fragment at its boundary, the
        traces from there on are rewritten (in the same transaction)."""
        stored = state.stored_messages()
        first = next(
            (i for i, (a, b) in enumerate(zip(stored, state.persisted, strict=False)) if a is not b),
            min(len(stored), len(state.persisted)),
        )
        rewrite = first < len(state.persisted)
        state.persisted = stored
        if self.store is None:
            return
        await self._db(
            self.store.record_iteration,
            state.run_id,
            iteration=iteration,
            first_index=first,
            traces=stored[first:],
            rewrite=rewrite,
            interaction=interaction,
            tool_calls=records,
            usage=state.usage,
            lease_seconds=self.lease_seconds,
            meta_updates=meta,
            model=interaction.model if interaction else None,
            vendor=interaction.vendor if interaction else None,
        )

    async def _finish(
        self,
        state: RunState,
        status: RunStatus,
        answer: str | None,
        error: str | None,
        pending: PendingCalls | None = None,
    ) -> None:
        if self.store is None:
            return
        updates = RunMeta(
            segue_pending=pending,
            segue_notes=state.notes.as_list() or None,
            segue_replay=state.replay,
            segue_layout=state.layout.meta() if state.layout is not None else None,
        )
        await self._db(
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

    async def _fail(self, state: RunState, message: str, error_type: str) -> AsyncIterator[RunEvent]:
        await self._finish(state, "error", None, message)
        yield make_event(
            "RUN_ERROR",
            state.run_id,
            state.iteration,
            error=message,
            result=self._result(state, "error", error=message),
            meta={"error_type": error_type},
        )

    def _result(
        self, state: RunState, status: RunStatus, answer: str | None = None, error: str | None = None
    ) -> RunResult:
        return RunResult(
            run_id=state.run_id,
            status=status,
            answer=answer,
            usage=state.usage,
            iterations=state.iteration,
            replay=state.replay,
            error=error,
            notes=state.notes.as_list() or None,
        )

    def _restore(self, text: str, state: RunState) -> str:
        for g in reversed(self.guardrails):
            text = g.restore(text, state.pii)
        return text

    # -- store helpers ----------------------------------------------------------------------------------------

    def _store(self) -> RunStore:
        if self.store is None:
            raise InputError("this needs a store: create the agent with store=RunStore(...)")
        return self.store

    async def _db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Store calls run in a worker thread so the event loop never waits on the database."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def _load_own_run(self, given: Any, tenant_id: str, action: str) -> StoredRun:
        """The run retry / resume act on, refused (RunStateError) unless it is this tenant's and this agent's."""
        run_id = run_id_of(given)
        if run_id is None:
            raise InputError(f"{action} needs a run id (a ULID: 26 characters of Crockford base32), got {given!r:.60}")
        stored = (await self._db(self._store().load_runs, [run_id])).get(run_id)
        if stored is None or stored.tenant_id != tenant_id:
            # Never reveal that another tenant's run exists.
            raise RunStateError(
                f"no run {run_id} for tenant {tenant_id!r}; check the run id and tenant",
                run_id=run_id,
                reason="not_found",
            )
        if stored.agent_name != self.name:
            # Another agent's tools, prompt and model would continue a conversation they never had.
            raise RunStateError(
                f"run {run_id} belongs to agent {stored.agent_name!r}, not {self.name!r}; {action} it with that agent",
                run_id=run_id,
                reason="agent_mismatch",
                agent=stored.agent_name,
            )
        return stored

    async def _idempotent_result(self, spec: RunSpec, fingerprint: str) -> RunResult | None:
        assert spec.idempotency_key is not None
        found = await self._db(self._store().find_idempotent, spec.tenant_id, spec.idempotency_key)
        if found is None:
            return None
        run_id, stored_fingerprint = found
        if stored_fingerprint != fingerprint:
            raise IdempotencyConflictError(spec.idempotency_key)
        detail = await self._db(self._store().get_run, run_id, tenant_id=spec.tenant_id)
        assert detail is not None
        notes = detail.meta.segue_notes if detail.meta is not None else None
        return RunResult(
            run_id=detail.run_id,
            status=detail.status,
            answer=detail.answer,
            usage=detail.usage,
            iterations=len(detail.llm_interactions),
            replay=detail.replay,
            error=detail.error,
            notes=notes or None,
        )


class _DeltaRestorer:
    """Restores guardrail placeholders (e.g. `[EMAIL_1]`) in streamed text, which may split one across deltas:
    text from an unclosed `[` on is held back until the next delta (or the end) completes it."""

    def __init__(self, restore: Callable[[str], str], *, hold: bool) -> None:
        self._restore = restore
        self._hold = hold  # without guardrails there are no placeholders: pass text straight through
        self._held = ""

    def feed(self, text: str) -> str:
        if not self._hold:
            return text
        text = self._held + text
        cut = text.rfind("[")
        if cut != -1 and "]" not in text[cut:] and len(text) - cut <= 32:
            self._held, text = text[cut:], text[:cut]
        else:
            self._held = ""
        return self._restore(text)

    def flush(self) -> str:
        held, self._held = self._held, ""
        return self._restore(held)


def _idempotent_event(existing: RunResult) -> RunEvent:
    """The stored result of an earlier request with the same idempotency key and fingerprint."""
    return make_event(
        "RUN_COMPLETED", existing.run_id, existing.iterations, result=existing, meta={"idempotent_replay": True}
    )


def _restore_args(arguments: dict[str, Any], agent: Execution, state: RunState) -> dict[str, Any]:
    """Placeholders the guardrail put in front of the model become real values again for the tool."""
    if not agent.guardrails or not state.pii:
        return arguments

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return agent._restore(value, state)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    restored: dict[str, Any] = walk(arguments)
    return restored
