"""Agent and SingleCall: run / stream / retry / resume.

Data flows left to right, once: validate (nothing written) -> idempotency -> replay plan (one store query) ->
conversation (system + stable head, replayed runs, history, new input) -> loop (provider call, tools, record
each iteration atomically) -> finish. `run()` and `stream()` share one generator of RunEvents; `run()` returns
the result of the last event.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import attrs
from ulid import ULID

from segue.catalog import Catalog
from segue.context import ContextBlock, fold_dynamic, render_stable_head
from segue.conversation import ZERO_USAGE, add_usage, answer_text, as_history, tool_calls, user_message
from segue.errors import IdempotencyConflictError, InputError, ProviderError, ReplayRunError, SegueError
from segue.generated import (
    LlmInteraction,
    Message,
    PrefixDescriptor,
    ReplayKnobs,
    ReplaySummary,
    RunEvent,
    RunEventType,
    RunResult,
    RunStatus,
    ToolCallBlock,
    ToolCallRecord,
    ToolResultBlock,
    Usage,
    get_converter,
)
from segue.guardrails import Guardrail
from segue.hashing import canonical_hash
from segue.layout import LayoutMode, LayoutPolicy, RuntimeState, TrailingStateFn
from segue.meta import (
    LAYOUT_META_KEY,
    PENDING_META_KEY,
    PREFIX_META_KEY,
    REPLAY_META_KEY,
    REQUEST_META_KEY,
    TOOLS_META_KEY,
    VENDOR_WARNINGS_META_KEY,
)
from segue.providers.base import REPLAYED_META_KEY, Provider, ProviderRequest, ProviderResponse, StreamDone
from segue.replay import (
    CurrentPrefix,
    is_run_id,
    plan_replay,
    seed_of,
    validate_knobs,
)
from segue.skills import Skill, render_system
from segue.store.run_store import DEFAULT_TENANT, TERMINAL, IdempotencyKeyTaken, NewRun, RunStore, StoredRun
from segue.tools import Tool, as_tools

T = TypeVar("T")
DEFAULT_MAX_INPUT_CHARS = 1_000_000
_VALIDATION_ERRORS = (ReplayRunError, InputError, IdempotencyConflictError)


@attrs.frozen(kw_only=True)
class _Spec:
    """One run's validated arguments (what the fingerprint covers, plus app metadata)."""

    input: str
    history: list[Message]
    context: list[ContextBlock]
    knobs: ReplayKnobs | None
    replay_last: int | Literal["all"]
    replay_reasoning: bool
    replay_budget_tokens: int | None
    tenant_id: str
    metadata: dict[str, Any]
    idempotency_key: str | None
    model: str | None
    retry_of: str | None = None


@attrs.define(kw_only=True)
class _State:
    """Mutable bookkeeping of one run in progress."""

    run_id: str
    spec: _Spec
    system: str
    stable_head: str | None
    prefix: list[Message]  # replayed runs + history: sent, never re-persisted
    own: list[Message]  # this run's messages, persisted as traces
    replay: ReplaySummary | None
    iteration: int = 0
    usage: Usage = ZERO_USAGE
    pii: dict[str, str] = attrs.Factory(dict)
    served_model: str | None = None
    served_vendor: str | None = None
    vendor_warnings: list[str] = attrs.Factory(list)
    layout: LayoutPolicy | None = None
    persisted: list[Message] = attrs.Factory(list)  # this run's traces as stored, in order

    def stored_messages(self) -> list[Message]:
        """This run's messages as they must be stored: with the fragments the layout keeps (appendOnly)."""
        if self.layout is None:
            return list(self.own)
        return self.layout.with_kept_fragments([*self.prefix, *self.own])[len(self.prefix) :]


class Agent:
    """A tool-using agent whose runs are recorded in a RunStore and can be replayed into later runs."""

    single_call = False

    def __init__(
        self,
        provider: Provider,
        prompt: str = "",
        tools: Sequence[Tool | Callable[..., Any]] = (),
        store: RunStore | None = None,
        *,
        max_iterations: int = 10,
        skills: Sequence[Skill] = (),
        guardrails: Sequence[Guardrail] = (),
        name: str = "agent",
        trailing_state: TrailingStateFn | None = None,
        trailing_state_layout: LayoutMode = "auto",
        catalog: Catalog | None = None,
        lease_seconds: float = 300.0,
        max_input_chars: int = DEFAULT_MAX_INPUT_CHARS,
    ) -> None:
        if not isinstance(provider, Provider):
            raise TypeError(f"provider must implement segue.providers.Provider, got {type(provider).__name__}")
        if not _positive_int(max_iterations):
            raise ValueError(f"max_iterations must be an int >= 1, got {max_iterations!r}")
        self.provider = provider
        self.prompt = prompt
        self.tools = as_tools(tools)
        self.store = store
        self.max_iterations = max_iterations
        self.skills = list(skills)
        self.guardrails = list(guardrails)
        self.name = name
        self.lease_seconds = lease_seconds
        self.max_input_chars = max_input_chars
        if trailing_state_layout not in ("auto", "appendOnly", "replace"):
            raise ValueError(
                f"trailing_state_layout must be 'auto', 'appendOnly' or 'replace', got {trailing_state_layout!r}"
            )
        if trailing_state is not None and not callable(trailing_state):
            raise TypeError(f"trailing_state must be a function of RuntimeState, got {type(trailing_state).__name__}")
        self.trailing_state = trailing_state
        self.trailing_state_layout: LayoutMode = trailing_state_layout
        self._catalog = catalog
        self.system = render_system(prompt, self.skills)
        self._tools_by_name = {t.name: t for t in self.tools}
        self._tool_defs = [t.definition for t in self.tools]
        conv = get_converter()
        self._tool_hashes = {t.name: canonical_hash(conv.unstructure(t.definition)) for t in self.tools}
        self._tools_hash = canonical_hash([conv.unstructure(d) for d in self._tool_defs])
        self.config_hash = canonical_hash(
            {
                "name": name,
                "system": self.system,
                "tools": self._tools_hash,
                "vendor": provider.vendor,
                "model": provider.model,
                "max_iterations": max_iterations,
                "guardrails": sorted(type(g).__name__ for g in self.guardrails),
                "layout": trailing_state_layout if trailing_state else None,
            }
        )

    # -- public API -------------------------------------------------------------------------------------------

    async def run(
        self,
        user_input: str,
        *,
        history: Sequence[Message | dict[str, Any]] | None = None,
        context: Sequence[ContextBlock] | None = None,
        runs: Sequence[str] | None = None,
        replay_last: int | Literal["all"] = 0,
        replay_reasoning: bool = True,
        replay_budget_tokens: int | None = None,
        tenant_id: str = DEFAULT_TENANT,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        model: str | None = None,
    ) -> RunResult:
        """Run to completion (or pause). Bad input raises before anything is written."""
        spec = self._validate(
            user_input,
            history,
            context,
            runs,
            replay_last,
            replay_reasoning,
            replay_budget_tokens,
            tenant_id,
            metadata,
            idempotency_key,
            model,
        )
        return await _last_result(self._drive(spec, streaming=False))

    async def stream(
        self,
        user_input: str,
        *,
        history: Sequence[Message | dict[str, Any]] | None = None,
        context: Sequence[ContextBlock] | None = None,
        runs: Sequence[str] | None = None,
        replay_last: int | Literal["all"] = 0,
        replay_reasoning: bool = True,
        replay_budget_tokens: int | None = None,
        tenant_id: str = DEFAULT_TENANT,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        model: str | None = None,
    ) -> AsyncIterator[RunEvent]:
        """The same run as events. Bad input arrives as one RUN_ERROR event and no row is created."""
        try:
            spec = self._validate(
                user_input,
                history,
                context,
                runs,
                replay_last,
                replay_reasoning,
                replay_budget_tokens,
                tenant_id,
                metadata,
                idempotency_key,
                model,
            )
            async for event in self._drive(spec, streaming=True):
                yield event
        except _VALIDATION_ERRORS as e:
            yield _validation_event(e)

    async def retry(self, run_id: str, *, tenant_id: str = DEFAULT_TENANT) -> RunResult:
        """Run a finished run again as a new run (retry_of=run_id), with the same input, history, context,
        replayed runs and knobs, through the same replay planner."""
        stored = await self._load_own_run(run_id, tenant_id, "retry")
        if stored.status not in TERMINAL:
            raise InputError(f"run {run_id} is {stored.status}; retry a finished run (resume a paused one)")
        spec = attrs.evolve(self._spec_from_meta(stored), idempotency_key=None, retry_of=run_id)
        return await _last_result(self._drive(spec, streaming=False))

    async def resume(
        self,
        run_id: str,
        *,
        approved: bool | Mapping[str, bool] = True,
        tool_results: Mapping[str, str] | None = None,
        tenant_id: str = DEFAULT_TENANT,
    ) -> RunResult:
        """Continue a run paused in `waiting_approval`. `approved` is one answer for every pending call or a
        per-call-id mapping; denied calls return an error result the model sees. `tool_results` supplies
        results for calls the client ran itself (client-side tools)."""
        return await _last_result(self._resume_events(run_id, approved, tool_results, tenant_id))

    async def resume_stream(
        self,
        run_id: str,
        *,
        approved: bool | Mapping[str, bool] = True,
        tool_results: Mapping[str, str] | None = None,
        tenant_id: str = DEFAULT_TENANT,
    ) -> AsyncIterator[RunEvent]:
        try:
            async for event in self._resume_events(run_id, approved, tool_results, tenant_id):
                yield event
        except _VALIDATION_ERRORS as e:
            yield _validation_event(e)

    @property
    def catalog(self) -> Catalog:
        """The catalog the layout policy reads (the packaged one plus SEGUE_CATALOG_PATH), loaded once."""
        if self._catalog is None:
            self._catalog = Catalog.load()
        return self._catalog

    def _layout_policy(self, spec: _Spec) -> LayoutPolicy | None:
        if self.trailing_state is None:
            return None
        return LayoutPolicy(
            mode=self.trailing_state_layout,
            catalog=self.catalog,
            trailing_state=self.trailing_state,
            requires_stable_reasoning_prefix=self.provider.requires_stable_reasoning_prefix,
            declares_native_tools=bool(self.tools),
            model_override=spec.model,
        )

    # -- validate ---------------------------------------------------------------------------------------------

    def _validate(
        self,
        user_input: Any,
        history: Any,
        context: Any,
        runs: Any,
        replay_last: Any,
        replay_reasoning: Any,
        replay_budget_tokens: Any,
        tenant_id: Any,
        metadata: Any,
        idempotency_key: Any,
        model: Any,
    ) -> _Spec:
        if not isinstance(user_input, str) or not user_input.strip():
            raise InputError(f"user_input must be a non-empty string, got {user_input!r:.80}")
        if len(user_input) > self.max_input_chars:
            raise InputError(
                f"user_input has {len(user_input):,} characters, over the limit of {self.max_input_chars:,}; "
                "send large documents as files or tool results, or raise Agent(max_input_chars=...)"
            )
        if not isinstance(tenant_id, str) or not tenant_id:
            raise InputError(f"tenant_id must be a non-empty string, got {tenant_id!r}")
        if idempotency_key is not None and (not isinstance(idempotency_key, str) or not idempotency_key):
            raise InputError(f"idempotency_key must be a non-empty string or None, got {idempotency_key!r}")
        if model is not None and (not isinstance(model, str) or not model):
            raise InputError(f"model must be a model name or None, got {model!r}")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InputError(f"metadata must be a dict, got {type(metadata).__name__}")
        try:
            canonical_hash(dict(metadata or {}))
        except (TypeError, ValueError) as e:
            raise InputError(f"metadata must be plain JSON (str, numbers, bools, None, lists, dicts): {e}") from None
        blocks = list(context or [])
        for b in blocks:
            if not isinstance(b, ContextBlock):
                raise InputError(f"context must hold ContextBlock objects, got {type(b).__name__}")
        knobs = validate_knobs(runs, replay_last, replay_reasoning, replay_budget_tokens, single_call=self.single_call)
        if knobs is not None:
            if self.store is None:
                raise ReplayRunError(
                    "runs= needs a store: create the agent with store=RunStore(...)", run_id=None, reason="invalid"
                )
            stable = [b for b in blocks if b.placement == "stable"]
            if stable:
                raise ReplayRunError(
                    "a placement='stable' context block cannot be combined with runs=: it would change the prefix "
                    "the replayed runs were produced under; fold it into the prompt or make it dynamic",
                    run_id=None,
                    reason="invalid",
                )
        return _Spec(
            input=user_input,
            history=as_history(history),
            context=blocks,
            knobs=knobs,
            replay_last=replay_last,
            replay_reasoning=replay_reasoning,
            replay_budget_tokens=replay_budget_tokens,
            tenant_id=tenant_id,
            metadata=dict(metadata or {}),
            idempotency_key=idempotency_key,
            model=model,
        )

    def _fingerprint(self, spec: _Spec) -> str:
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
                "agent": self.config_hash,
            }
        )

    # -- plan -------------------------------------------------------------------------------------------------

    def _current_prefix(self, model: str | None, stable_head: str | None) -> CurrentPrefix:
        return CurrentPrefix(
            vendor=self.provider.vendor,
            model=model or self.provider.model,
            system_hash=canonical_hash({"system": self.system, "stable_head": stable_head}),
            tools_hash=self._tools_hash,
            tool_hashes=self._tool_hashes,
        )

    async def _plan(self, spec: _Spec) -> tuple[list[Message], ReplaySummary | None, str | None, str | None]:
        """(replayed + history messages, replay summary, continued_from, stable head)."""
        stable_head = render_stable_head(spec.context)
        if spec.knobs is None:
            return list(spec.history), None, None, stable_head
        stored = await self._db(self._store().load_runs, spec.knobs.runs)
        plan = plan_replay(
            stored,
            spec.knobs,
            spec.tenant_id,
            self._current_prefix(spec.model, stable_head),
            guardrails=bool(self.guardrails),
        )
        return [*plan.messages, *spec.history], plan.summary, plan.continued_from, stable_head

    # -- drive ------------------------------------------------------------------------------------------------

    async def _drive(self, spec: _Spec, *, streaming: bool) -> AsyncIterator[RunEvent]:
        prefix, summary, continued_from, stable_head = await self._plan(spec)
        fingerprint = self._fingerprint(spec)
        if spec.idempotency_key is not None and self.store is not None:
            existing = await self._idempotent_result(spec, fingerprint)
            if existing is not None:
                yield _event(
                    "RUN_COMPLETED",
                    existing.run_id,
                    existing.iterations,
                    result=existing,
                    meta={"idempotent_replay": True},
                )
                return
        state = _State(
            run_id=str(ULID()),
            spec=spec,
            system=self.system,
            stable_head=stable_head,
            prefix=prefix,
            own=[],
            replay=summary,
            layout=self._layout_policy(spec),
        )
        text = fold_dynamic(spec.context, spec.input)
        for g in self.guardrails:
            text = g.protect(text, state.pii)
        first = user_message(text)
        state.own.append(first)
        state.persisted.append(first)
        model = spec.model or self.provider.model
        descriptor = PrefixDescriptor(
            schema_version=1,
            vendor=self.provider.vendor,
            model=model,
            system_hash=self._current_prefix(spec.model, stable_head).system_hash,
            tools_hash=self._tools_hash,
            seed=seed_of(prefix),
        )
        conv = get_converter()
        meta: dict[str, Any] = {
            PREFIX_META_KEY: conv.unstructure(descriptor),
            TOOLS_META_KEY: self._tool_hashes,
            REQUEST_META_KEY: {
                "history": [conv.unstructure(m, Message) for m in spec.history],
                "context": [{"text": b.text, "placement": b.placement, "source": b.source} for b in spec.context],
                "model": spec.model,
                "replay_last": spec.replay_last,
                "replay_reasoning": spec.replay_reasoning,
                "replay_budget_tokens": spec.replay_budget_tokens,
            },
        }
        if summary is not None:
            meta[REPLAY_META_KEY] = conv.unstructure(summary)
        new_run = NewRun(
            run_id=state.run_id,
            tenant_id=spec.tenant_id,
            agent_name=self.name,
            input=spec.input,
            model=model,
            vendor=self.provider.vendor,
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
                yield _event(
                    "RUN_COMPLETED",
                    existing.run_id,
                    existing.iterations,
                    result=existing,
                    meta={"idempotent_replay": True},
                )
                return
        replay_meta = {"replay": conv.unstructure(summary)} if summary else {}
        yield _event(
            "RUN_STARTED", state.run_id, 0, meta={"model": model, "vendor": self.provider.vendor, **replay_meta}
        )
        async for event in self._loop(state, streaming=streaming):
            yield event

    async def _loop(self, state: _State, *, streaming: bool) -> AsyncIterator[RunEvent]:
        try:
            while state.iteration < self.max_iterations:
                state.iteration += 1
                iteration = state.iteration
                request = self._request(state)
                started = time.perf_counter()
                response: ProviderResponse | None = None
                try:
                    if streaming:
                        async for item in self.provider.stream(request):
                            if isinstance(item, StreamDone):
                                response = item.response
                            elif item.kind in ("text", "reasoning"):
                                kind: RunEventType = "TEXT_DELTA" if item.kind == "text" else "REASONING_DELTA"
                                yield _event(kind, state.run_id, iteration, text=item.text)
                        if response is None:
                            raise ProviderError(
                                "the stream ended without a final message", vendor=self.provider.vendor, kind="stream"
                            )
                    else:
                        response = await self.provider.complete(request)
                except ProviderError as e:
                    async for event in self._fail(state, f"{e.kind} error from {e.vendor}: {e}", type(e).__name__):
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
                state.served_model, state.served_vendor = response.model, response.vendor
                state.vendor_warnings.extend(response.warnings)
                if state.layout is not None:
                    state.layout.observe_served(iteration, response.vendor, response.model)
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
                    await self._record(state, iteration, interaction, [])
                    pending = {"iteration": iteration, "calls": [c.id for c in calls]}
                    await self._finish(state, "waiting_approval", None, None, {PENDING_META_KEY: pending})
                    for c in calls:
                        yield _event(
                            "TOOL_CALL",
                            state.run_id,
                            iteration,
                            tool_call=c,
                            meta={"requires_approval": self._needs_approval(c)},
                        )
                    yield _event(
                        "RUN_PAUSED",
                        state.run_id,
                        iteration,
                        result=self._result(state, "waiting_approval"),
                        meta={"pending": pending["calls"]},
                    )
                    return
                if not calls:
                    await self._record(state, iteration, interaction, [])
                    answer = self._restore(answer_text(assistant), state)
                    await self._finish(state, "success", answer, None, {})
                    yield _event(
                        "RUN_COMPLETED", state.run_id, iteration, result=self._result(state, "success", answer)
                    )
                    return
                events: list[RunEvent] = []
                tool_message, records = await self._run_tools(state, iteration, calls, {}, None, events)
                state.own.append(tool_message)
                for event in events:
                    yield event
                await self._record(state, iteration, interaction, records)
            message = f"stopped after max_iterations={self.max_iterations} without a final answer"
            await self._finish(state, "max_iterations", None, message, {})
            yield _event(
                "RUN_COMPLETED",
                state.run_id,
                state.iteration,
                result=self._result(state, "max_iterations", error=message),
            )
        except asyncio.CancelledError:
            await asyncio.shield(self._finish(state, "cancelled", None, "the run was cancelled", {}))
            raise
        except SegueError as e:
            async for event in self._fail(state, str(e), type(e).__name__):
                yield event
        except Exception as e:
            # A bug in segue or in app code it calls (e.g. trailing_state): record it so the run is terminal, and
            # let it surface.
            await asyncio.shield(self._finish(state, "error", None, f"{type(e).__name__}: {e}", {}))
            raise

    def _request(self, state: _State) -> ProviderRequest:
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
        return ProviderRequest(
            system=state.system,
            stable_head=state.stable_head,
            messages=messages,
            tools=self._tool_defs,
            replay_end=replayed[-1] if replayed else None,
            model=state.spec.model,
            cache_key=state.spec.tenant_id,
        )

    def _needs_approval(self, call: ToolCallBlock) -> bool:
        tool = self._tools_by_name.get(call.name)
        return tool is not None and tool.requires_approval

    async def _run_tools(
        self,
        state: _State,
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

        for call in calls:
            events.append(_event("TOOL_CALL", state.run_id, iteration, tool_call=call))
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
            events.append(_event("TOOL_RESULT", state.run_id, iteration, tool_result=result))
        return Message(role="tool", content=list(results)), records

    # -- resume -----------------------------------------------------------------------------------------------

    async def _resume_events(
        self,
        run_id: str,
        approved: bool | Mapping[str, bool],
        tool_results: Mapping[str, str] | None,
        tenant_id: str,
    ) -> AsyncIterator[RunEvent]:
        stored = await self._load_own_run(run_id, tenant_id, "resume")
        pending = stored.meta.get(PENDING_META_KEY)
        if stored.status != "waiting_approval" or not pending:
            raise InputError(f"run {run_id} is {stored.status}, not waiting_approval; only paused runs resume")
        if isinstance(approved, bool):
            decisions = dict.fromkeys(pending["calls"], approved)
        elif isinstance(approved, Mapping):
            unknown = sorted(set(approved) - set(pending["calls"]))
            if unknown:
                raise InputError(f"approved names calls {unknown} that are not pending; pending: {pending['calls']}")
            decisions = {c: bool(approved.get(c, False)) for c in pending["calls"]}
        else:
            raise InputError(f"approved must be a bool or a {{call_id: bool}} mapping, got {approved!r}")
        if tool_results is not None:
            unknown = sorted(set(tool_results) - set(pending["calls"]))
            if unknown:
                raise InputError(f"tool_results names calls {unknown} that are not pending: {pending['calls']}")
        if not await self._db(self._store().claim_paused, run_id, tenant_id, lease_seconds=self.lease_seconds):
            raise InputError(f"run {run_id} was resumed by another request already")
        spec = self._spec_from_meta(stored)
        prefix, summary, _, stable_head = await self._plan(spec)
        own = [t.message for t in stored.traces]
        state = _State(
            run_id=run_id,
            spec=spec,
            system=self.system,
            stable_head=stable_head,
            prefix=prefix,
            own=own,
            replay=summary,
            iteration=int(pending["iteration"]),
            usage=stored.usage,
            pii=dict((stored.private or {}).get("pii", {})),
            layout=self._layout_policy(spec),
            persisted=list(own),
        )
        calls = tool_calls(own[-1])
        events: list[RunEvent] = []
        tool_message, records = await self._run_tools(state, state.iteration, calls, decisions, tool_results, events)
        for event in events:
            yield event
        state.own.append(tool_message)
        await self._record(state, state.iteration, None, records)
        async for event in self._loop(state, streaming=False):
            yield event

    # -- record -----------------------------------------------------------------------------------------------

    async def _record(
        self, state: _State, iteration: int, interaction: LlmInteraction | None, records: list[ToolCallRecord]
    ) -> None:
        """Persist what changed in the run's traces since the last write, plus the call and tool records.

        Usually that is the new tail; when the layout restores iteration 1's fragment at its boundary, the
        traces from there on are rewritten (in the same transaction)."""
        stored = state.stored_messages()
        first = next(
            (i for i, (a, b) in enumerate(zip(stored, state.persisted, strict=False)) if a is not b),
            min(len(stored), len(state.persisted)),
        )
        state.persisted = stored
        if self.store is None:
            return
        await self._db(
            self.store.record_iteration,
            state.run_id,
            iteration=iteration,
            first_index=first,
            traces=stored[first:],
            interaction=interaction,
            tool_calls=records,
            usage=state.usage,
            lease_seconds=self.lease_seconds,
        )

    async def _finish(
        self, state: _State, status: RunStatus, answer: str | None, error: str | None, meta: dict[str, Any]
    ) -> None:
        if self.store is None:
            return
        updates = dict(meta)
        if state.vendor_warnings:
            updates[VENDOR_WARNINGS_META_KEY] = state.vendor_warnings
        if state.layout is not None:
            updates[LAYOUT_META_KEY] = state.layout.meta()
        await self._db(
            self.store.finish_run,
            state.run_id,
            status=status,
            answer=answer,
            error=error,
            usage=state.usage,
            iterations=state.iteration,
            meta_updates=updates,
            model=state.served_model,
            vendor=state.served_vendor,
            private={"pii": state.pii} if state.pii else None,
        )

    async def _fail(self, state: _State, message: str, error_type: str) -> AsyncIterator[RunEvent]:
        await self._finish(state, "error", None, message, {})
        yield _event(
            "RUN_ERROR",
            state.run_id,
            state.iteration,
            error=message,
            result=self._result(state, "error", error=message),
            meta={"error_type": error_type},
        )

    def _result(
        self, state: _State, status: RunStatus, answer: str | None = None, error: str | None = None
    ) -> RunResult:
        return RunResult(
            run_id=state.run_id,
            status=status,
            answer=answer,
            usage=state.usage,
            iterations=state.iteration,
            replay=state.replay,
            error=error,
        )

    def _restore(self, text: str, state: _State) -> str:
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

    async def _load_own_run(self, run_id: Any, tenant_id: str, action: str) -> StoredRun:
        if not is_run_id(run_id):
            raise InputError(f"{action} needs a run id (a ULID: 26 characters of Crockford base32), got {run_id!r:.60}")
        stored = (await self._db(self._store().load_runs, [run_id])).get(run_id)
        if stored is None or stored.tenant_id != tenant_id:
            # Never reveal that another tenant's run exists.
            raise InputError(f"no run {run_id} for tenant {tenant_id!r}; check the run id and tenant")
        return stored

    def _spec_from_meta(self, stored: StoredRun) -> _Spec:
        request = stored.meta.get(REQUEST_META_KEY, {})
        replay = stored.meta.get(REPLAY_META_KEY)
        knobs = get_converter().structure(replay["knobs"], ReplayKnobs) if replay and "knobs" in replay else None
        return _Spec(
            input=stored.input,
            history=as_history(request.get("history", [])),
            context=[ContextBlock(c["text"], c["placement"], c.get("source")) for c in request.get("context", [])],
            knobs=knobs,
            replay_last=request.get("replay_last", 0),
            replay_reasoning=request.get("replay_reasoning", True),
            replay_budget_tokens=request.get("replay_budget_tokens"),
            tenant_id=stored.tenant_id,
            metadata={},
            idempotency_key=None,
            model=request.get("model"),
        )

    async def _idempotent_result(self, spec: _Spec, fingerprint: str) -> RunResult | None:
        assert spec.idempotency_key is not None
        found = await self._db(self._store().find_idempotent, spec.tenant_id, spec.idempotency_key)
        if found is None:
            return None
        run_id, stored_fingerprint = found
        if stored_fingerprint != fingerprint:
            raise IdempotencyConflictError(spec.idempotency_key)
        detail = await self._db(self._store().get_run, run_id, tenant_id=spec.tenant_id)
        assert detail is not None
        return RunResult(
            run_id=detail.run_id,
            status=detail.status,
            answer=detail.answer,
            usage=detail.usage,
            iterations=len(detail.llm_interactions),
            replay=detail.replay,
            error=detail.error,
        )


class SingleCall(Agent):
    """One LLM call, no tools. Replays earlier runs only as question + answer (replay_last=0)."""

    single_call = True

    def __init__(
        self,
        provider: Provider,
        prompt: str = "",
        store: RunStore | None = None,
        *,
        skills: Sequence[Skill] = (),
        guardrails: Sequence[Guardrail] = (),
        name: str = "single_call",
    ) -> None:
        super().__init__(provider, prompt, (), store, max_iterations=1, skills=skills, guardrails=guardrails, name=name)


def _event(
    type: RunEventType,
    run_id: str,
    iteration: int,
    *,
    text: str | None = None,
    tool_call: ToolCallBlock | None = None,
    tool_result: ToolResultBlock | None = None,
    result: RunResult | None = None,
    error: str | None = None,
    meta: dict[str, Any] | None = None,
) -> RunEvent:
    return RunEvent(
        type=type,
        run_id=run_id,
        iteration=iteration,
        text=text,
        tool_call=tool_call,
        tool_result=tool_result,
        result=result,
        error=error,
        meta=meta or {},
    )


def _validation_event(e: Exception) -> RunEvent:
    meta: dict[str, Any] = {"error_type": type(e).__name__}
    if isinstance(e, ReplayRunError):
        meta.update(reason=e.reason, run_id=e.run_id)
    return _event("RUN_ERROR", "", 0, error=str(e), meta=meta)


async def _last_result(events: AsyncIterator[RunEvent]) -> RunResult:
    result: RunResult | None = None
    async for event in events:
        if event.result is not None:
            result = event.result
    if result is None:
        raise RuntimeError("the run ended without a result event")  # a bug in segue, not in the caller's input
    return result


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _restore_args(arguments: dict[str, Any], agent: Agent, state: _State) -> dict[str, Any]:
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


__all__ = ["Agent", "SingleCall"]
