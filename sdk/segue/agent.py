"""Agent and SingleCall: the public API (run / stream / retry / resume / prewarm).

An Agent holds its settings (segue.run.config.AgentConfig) and the run pipeline built on them
(segue.run.pipeline): every call validates its arguments first, so bad input raises (or, on a stream, arrives as
one RUN_ERROR event) before anything is written.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from segue._core.contracts import Provider, require_provider
from segue._core.json_types import OutputType, output_spec
from segue._core.schema_work import validating
from segue.cache.layout import LAYOUT_MODES, LayoutMode, TrailingStateFn
from segue.catalog import Catalog, CatalogError
from segue.errors import (
    IdempotencyConflictError,
    InputError,
    ReplayRunError,
    RunStateError,
    ToolSourceError,
    UnknownModelWarning,
)
from segue.generated import Compaction, ContextBlock, ModelSettings, PrewarmResult, RunEvent, RunResult
from segue.guardrails import Guardrail
from segue.providers.base import members, settings_checks
from segue.replay import compaction as compactions
from segue.run.config import AgentConfig
from segue.run.lineage import DEFAULT_MAX_DEPTH
from segue.run.pipeline import Pipeline, last_result
from segue.run.request import DEFAULT_MAX_INPUT_CHARS, PYTHON_ONLY, Rules, RunRequest, compaction_of
from segue.run.settings import check_paths, settings_of
from segue.run.state import validation_event
from segue.run.subrun import agent_tool
from segue.run.toolbox import Toolbox
from segue.skills import Skill, render_system
from segue.store.records import DEFAULT_TENANT
from segue.store.run_store import RunStore
from segue.telemetry import Telemetry
from segue.tools import Tool, ToolSource, as_tools
from segue.wire.history import HistoryItem

#: Refusals before a run row exists: on stream() they arrive as one RUN_ERROR event.
_VALIDATION_ERRORS = (ReplayRunError, InputError, IdempotencyConflictError, ToolSourceError)
_P = ParamSpec("_P")
_R = TypeVar("_R")
_A = TypeVar("_A", bound="Agent")
_runners = threading.local()


def _blocking(method: Callable[Concatenate[_A, _P], Coroutine[Any, Any, _R]]) -> Callable[Concatenate[_A, _P], _R]:
    """The blocking twin of an async method, for scripts and notebooks without an event loop of their own.

    Calls in one thread share one event loop (an asyncio.Runner kept per thread), so the SDK clients a provider
    holds keep their connections between calls, as they would under one `asyncio.run`."""

    @functools.wraps(method)
    def call(self: _A, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        name = f"{method.__name__}_sync"
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                f"Agent.{name}() cannot run inside a running event loop (a notebook cell, an async function); "
                f"use `await agent.{method.__name__}(...)` there instead"
            )
        runner = getattr(_runners, "runner", None)
        if runner is None:
            runner = _runners.runner = asyncio.Runner()
            atexit.register(runner.close)
        return runner.run(method(self, *args, **kwargs))

    call.__name__ = call.__qualname__ = f"{method.__name__}_sync"
    call.__doc__ = f"`{method.__name__}` for code without an event loop: the same arguments, blocking until done."
    return call


class Agent:
    """A tool-using agent whose runs are recorded in a RunStore and can be replayed into later runs.

    `tools` takes `@tool` functions and tool sources such as MCP servers (`segue.mcp.MCPTools`), whose tools are
    read once per run. An agent with tool sources holds their connections: close it with `await agent.aclose()`
    or `async with Agent(...) as agent:`. `telemetry` traces runs with OpenTelemetry (segue.telemetry).
    """

    single_call = False

    def __init__(
        self,
        provider: Provider,
        prompt: str = "",
        tools: Sequence[Tool | ToolSource | Callable[..., Any]] = (),
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
        telemetry: Telemetry | None = None,
        output_type: OutputType | None = None,
        output_repairs: int = 1,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
        cache_diagnostics: bool = True,
        compaction: Compaction | Mapping[str, Any] | None = None,
    ) -> None:
        """`output_type` (an attrs class, dataclass, TypedDict, pydantic model or JSON Schema dict) asks every run
        for a structured answer: `result.output` is the validated value, `result.answer` its text; a run may pass
        its own. `output_repairs` is how many times an answer that does not match gets the error back to answer
        again. `model_settings` (a segue.ModelSettings or a dict of its fields: max_tokens, temperature, ...)
        applies to every run; a run's own model_settings override it key by key. A setting the provider's wire
        cannot take (seed on Anthropic) raises InputError here. `cache_diagnostics` (on by default) asks the
        vendor, on every request that continues an earlier response, why it could not reuse that response's
        cached prefix, where the serving path's catalog row says `llm.cache_diagnostics`; False sends nothing of
        it (docs/replay.md, "Why a request missed the cache")."""
        self.compaction = compaction_of(compaction)  # every run's, unless it passes its own (docs/replay.md)
        if not isinstance(cache_diagnostics, bool):
            raise TypeError(f"cache_diagnostics must be True or False, got {cache_diagnostics!r}")
        require_provider(provider, "provider")
        if not _positive_int(max_iterations):
            raise ValueError(f"max_iterations must be an int >= 1, got {max_iterations!r}")
        if not name:  # the store's agent_name, and RunParams.agent
            raise ValueError(f"name must be a non-empty string (runs are recorded under it), got {name!r}")
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
        if trailing_state_layout not in LAYOUT_MODES:
            raise ValueError(
                f"trailing_state_layout must be one of {', '.join(LAYOUT_MODES)} (docs/layout.md), "
                f"got {trailing_state_layout!r}"
            )
        if telemetry is not None and not isinstance(telemetry, Telemetry):
            raise TypeError(f"telemetry must be a segue.telemetry.Telemetry, got {type(telemetry).__name__}")
        self.telemetry = telemetry or Telemetry()
        if trailing_state is not None and not callable(trailing_state):
            raise TypeError(f"trailing_state must be a function of RuntimeState, got {type(trailing_state).__name__}")
        self.trailing_state = trailing_state
        self.trailing_state_layout: LayoutMode = trailing_state_layout
        self._catalog = catalog
        self.system = render_system(prompt, self.skills)
        if type(output_repairs) is not int or output_repairs < 0:
            raise ValueError(f"output_repairs must be a whole number >= 0, got {output_repairs!r}")
        self.output_type = output_type
        self.output_repairs = output_repairs
        output = output_spec(output_type) if output_type is not None else None
        checks = settings_checks(provider)
        self.model_settings = settings_of(model_settings, "Agent(model_settings=...)")
        check_paths(self.model_settings, checks)
        compactions.with_vendor(self.compaction, None, lambda s: check_paths(s, checks), "Agent(compaction=...)")
        self._config = AgentConfig(
            name=name,
            provider=provider,
            store=store,
            system=self.system,
            tools=Toolbox(self.tools),
            guardrails=tuple(self.guardrails),
            max_iterations=max_iterations,
            lease_seconds=lease_seconds,
            trailing_state=trailing_state,
            trailing_state_layout=trailing_state_layout,
            catalog=lambda: self.catalog,
            cache_diagnostics=cache_diagnostics,
            rules=Rules(
                single_call=self.single_call,
                has_store=store is not None,
                vendors=tuple(sorted({d.vendor for d in members(provider)})),
                max_input_chars=max_input_chars,
                output=output,
                output_repairs=output_repairs,
                model_settings=self.model_settings,
                settings_checks=checks,
                compaction=self.compaction,
            ),
            telemetry=self.telemetry,
        )
        #: What the idempotency fingerprint covers of the agent.
        self.config_hash = self._config.config_hash
        self._pipeline = Pipeline(self._config)
        self._warn_unknown_models()

    def _warn_unknown_models(self) -> None:
        """A driver's model id the catalog does not list but finds close to one it does is likely a typo: say so
        now, with the catalog's "did you mean", not only in each run's cost.missing."""
        try:
            catalog = self.catalog
        except CatalogError:  # a broken catalog layer is the first run's error, as before
            return
        for driver in members(self.provider):
            try:
                resolved = catalog.resolve(driver.model, driver.vendor)
            except CatalogError:  # a vendor the catalog does not list (a test double, an app's own driver)
                continue
            if resolved.note is not None and "did you mean" in resolved.note:
                warnings.warn(
                    f"model {driver.model!r} at {driver.vendor}: {resolved.note.rstrip('.')}"
                    f"{'' if resolved.note.endswith('?') else '.'} The agent runs it from the "
                    "vendor's defaults, with no price; fix the id, or add the model to a catalog layer if it is new",
                    UnknownModelWarning,
                    stacklevel=3,
                )

    @property
    def catalog(self) -> Catalog:
        """The catalog the layout policy reads (the packaged one plus SEGUE_CATALOG_PATH), loaded once."""
        if self._catalog is None:
            self._catalog = Catalog.load()
        return self._catalog

    # -- public API -------------------------------------------------------------------------------------------

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        input_type: Any = None,
        remember: bool = True,
        max_depth: int = DEFAULT_MAX_DEPTH,
        tenant_id: str | None = None,
        requires_approval: bool = False,
    ) -> Tool:
        """This agent as a tool another agent may call (`tools=[specialist.as_tool()]`): the model passes a `task`
        (or an `input_type` object, given as JSON); the result is this agent's answer (its output as JSON with an
        output_type). Each call is a run of this agent linked to the calling run and tool call, in its tenant with
        its deps, listed in its `RunResult.children` (`total_cost` includes them). `remember`: replay this agent's
        earlier runs in the caller's conversation. `max_depth` bounds nesting; `tenant_id` binds the tool to one
        tenant. Name and description default to the agent's name and prompt's first line (docs/subagents.md)."""
        return agent_tool(
            self._pipeline,
            name=name or self.name,
            description=description or _first_line(self.prompt) or f"Ask the {self.name} agent to do a task.",
            input_type=input_type,
            remember=remember,
            max_depth=max_depth,
            tenant_id=tenant_id,
            requires_approval=requires_approval,
        )

    async def aclose(self) -> None:
        """Stop what the agent's tool sources hold (MCP server processes and sessions). They start again lazily
        if the agent runs once more."""
        await self._config.tools.aclose()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def run(
        self,
        user_input: str,
        *,
        history: Sequence[HistoryItem] | None = None,
        context: Sequence[ContextBlock] | None = None,
        runs: Sequence[str] | None = None,
        replay_last: int | Literal["all"] | None = None,
        replay_reasoning: bool = True,
        replay_budget_tokens: int | None = None,
        replay_step: int | None = None,
        replay_keep: int | None = None,
        compaction: Compaction | Mapping[str, Any] | None = None,
        tenant_id: str = DEFAULT_TENANT,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        model: str | None = None,
        vendor: str | None = None,
        output_type: OutputType | None = None,
        output_repairs: int | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
        deps: Any = None,
    ) -> RunResult:
        """Run to completion (or pause). Bad input raises before anything is written.

        `model` overrides the provider's model for this run; `vendor` names the catalog vendor that serves it (one
        of the provider's: with Failover, that vendor's first member is tried first), so the trailing-state layout
        is decided from the catalog before the first call. `output_type` / `output_repairs` override the agent's
        for this run (structured output: `result.output`); `model_settings` overrides the agent's key by key
        (`result.stop_reason` says why the model stopped). `replay_step=S` with an int `replay_last=N` moves the
        window S runs at a time (N to N+S-1 runs in full), so the replayed prefix stays put between moves;
        `replay_keep=M` replays at most the latest M runs (M to M+S-1 with the step) and leaves older ones out. `deps`
        is handed to the tools that take a RunContext (`ctx.deps`); it is never stored, so retry and resume take it
        again."""
        request = await self._validate(_arguments(locals()), deps)
        return await last_result(self._pipeline.run(request, streaming=False))

    run_sync = _blocking(run)

    async def stream(
        self,
        user_input: str,
        *,
        history: Sequence[HistoryItem] | None = None,
        context: Sequence[ContextBlock] | None = None,
        runs: Sequence[str] | None = None,
        replay_last: int | Literal["all"] | None = None,
        replay_reasoning: bool = True,
        replay_budget_tokens: int | None = None,
        replay_step: int | None = None,
        replay_keep: int | None = None,
        compaction: Compaction | Mapping[str, Any] | None = None,
        tenant_id: str = DEFAULT_TENANT,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        model: str | None = None,
        vendor: str | None = None,
        output_type: OutputType | None = None,
        output_repairs: int | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
        deps: Any = None,
    ) -> AsyncIterator[RunEvent]:
        """The same run as events. Bad input arrives as one RUN_ERROR event and no row is created."""
        arguments = _arguments(locals())
        try:
            request = await self._validate(arguments, deps)
            # Closing this stream closes the run's (which records the run `cancelled` if it has not ended).
            async with contextlib.aclosing(self._pipeline.run(request, streaming=True)) as events:
                async for event in events:
                    yield event
        except _VALIDATION_ERRORS as e:
            yield validation_event(e)

    async def _validate(self, arguments: Mapping[str, Any], deps: Any) -> RunRequest:
        """The run's arguments checked, on the validation threads when they carry a schema: checking a large
        `output_type` against its meta-schema is pure Python and may take seconds, which must not stall the
        event loop (the other runs) nor the store's calls (the default executor's threads)."""
        if arguments.get("output_type") is None:
            return self._pipeline.validate(arguments, deps=deps)
        return await validating(self._pipeline.validate, arguments, deps=deps)

    async def prewarm(
        self,
        *,
        history: Sequence[HistoryItem] | None = None,
        context: Sequence[ContextBlock] | None = None,
        runs: Sequence[str] | None = None,
        replay_last: int | Literal["all"] | None = None,
        replay_reasoning: bool = True,
        replay_budget_tokens: int | None = None,
        replay_step: int | None = None,
        replay_keep: int | None = None,
        compaction: Compaction | Mapping[str, Any] | None = None,
        tenant_id: str = DEFAULT_TENANT,
        model: str | None = None,
        vendor: str | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
    ) -> PrewarmResult:
        """Warm the vendor's prompt cache for the next turn: send exactly what `run(text, ...)` with the same
        arguments will send before its user message (when its compaction policy finds one due, what it sends first:
        the summary request's prefix), asking the vendor to cache it and generate nothing, so that run reads it from
        the cache. Recorded as a prewarm (`store.prewarms`), never as a run.

        Bad input, unknown or unfinished runs and another tenant's runs raise as `run` would, before anything is
        sent; a serving path whose catalog row does not say `llm.cache_prewarm` raises InputError naming it; a
        vendor failure raises ProviderError. Nothing is recorded unless the vendor answered."""
        request = self._pipeline.validate_prewarm(_arguments(locals()))
        return await self._pipeline.prewarmer.prewarm(request)

    async def retry(self, run_id: str, *, tenant_id: str = DEFAULT_TENANT, deps: Any = None) -> RunResult:
        """Run a finished run again as a new run (retry_of=run_id), with the same input, history, context,
        replayed runs and knobs, through the same replay planner (`deps` is not stored: pass it again)."""
        request = await self._pipeline.retry_request(run_id, tenant_id, deps)
        return await last_result(self._pipeline.run(request, streaming=False))

    async def resume(
        self,
        run_id: str,
        *,
        approved: bool | Mapping[str, bool] = True,
        tool_results: Mapping[str, str] | None = None,
        tenant_id: str = DEFAULT_TENANT,
        deps: Any = None,
    ) -> RunResult:
        """Continue a run paused in `waiting_approval`. `approved` is one answer for every pending call or a
        per-call-id mapping; denied calls return an error result the model sees. `tool_results` supplies
        results for calls the client ran itself (client-side tools). `deps`: the tools' RunContext.deps, as
        `run` took it (it is not stored)."""
        resumed = self._pipeline.resume(run_id, approved, tool_results, tenant_id, streaming=False, deps=deps)
        return await last_result(resumed)

    async def resume_stream(
        self,
        run_id: str,
        *,
        approved: bool | Mapping[str, bool] = True,
        tool_results: Mapping[str, str] | None = None,
        tenant_id: str = DEFAULT_TENANT,
        deps: Any = None,
    ) -> AsyncIterator[RunEvent]:
        try:
            resumed = self._pipeline.resume(run_id, approved, tool_results, tenant_id, streaming=True, deps=deps)
            async with contextlib.aclosing(resumed):
                async for event in resumed:
                    yield event
        except _VALIDATION_ERRORS as e:
            yield validation_event(e)

    async def recover(self, run_id: str, *, tenant_id: str = DEFAULT_TENANT, deps: Any = None) -> RunResult:
        """Continue a run whose process died (its lease lapsed), as the same run, from what the store journaled:
        finished model calls are not sent again and finished tool calls not run again; a call in flight runs again
        only if its tool is `retry_safe` (docs/durability.md). RunStateError, with nothing written, for a run that
        is not lapsed (still leased, finished, paused), unknown, another tenant's or agent's, another
        configuration's, or recovered by another process first. `deps`: the tools' RunContext.deps."""
        return await last_result(self._pipeline.recover(run_id, tenant_id, streaming=False, deps=deps))

    async def recover_stream(
        self, run_id: str, *, tenant_id: str = DEFAULT_TENANT, deps: Any = None
    ) -> AsyncIterator[RunEvent]:
        """`recover`, as events."""
        try:
            async for event in self._pipeline.recover(run_id, tenant_id, streaming=True, deps=deps):
                yield event
        except _VALIDATION_ERRORS as e:
            yield validation_event(e)

    async def recover_lapsed(self, *, tenant_id: str | None = None, deps: Any = None) -> list[RunResult]:
        """Recover every run of this agent whose lease lapsed (of `tenant_id`, or of every tenant), one after
        another; a run another process recovers first is left to it. What `segue serve` does at start."""
        store = self._pipeline.store()
        results = []
        for run_id, tenant in await asyncio.to_thread(store.leases.lapsed, self.name, tenant_id):
            try:
                results.append(await self.recover(run_id, tenant_id=tenant, deps=deps))
            except RunStateError as e:
                if e.reason not in ("already_recovered", "not_lapsed"):
                    raise
        return results


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
        output_type: OutputType | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            provider,
            prompt,
            (),
            store,
            max_iterations=1,
            skills=skills,
            guardrails=guardrails,
            name=name,
            output_type=output_type,
            output_repairs=0,
            model_settings=model_settings,
        )


def _arguments(call_locals: dict[str, Any]) -> dict[str, Any]:
    """run / stream pass their own keyword arguments (locals() before anything else is assigned): they are the
    RunParams fields by name, which tests/run/test_run_params.py holds to the schema, so no list of them is kept
    here; the Python-only ones (`deps`) go their own way."""
    return {k: v for k, v in call_locals.items() if k != "self" and k not in PYTHON_ONLY}


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:1024]


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


__all__ = ["Agent", "SingleCall"]
