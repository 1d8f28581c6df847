"""Agent and SingleCall: the public API (run / stream / retry / resume) and argument validation.

Validation happens here, before anything is written; execution (replay plan, loop, recording) is in
segue.execution.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from segue.catalog import Catalog
from segue.contracts import Provider
from segue.conversation import as_history
from segue.errors import IdempotencyConflictError, InputError, ReplayRunError, RunStateError
from segue.execution import Execution
from segue.generated import (
    ContextBlock,
    Message,
    RunEvent,
    RunResult,
    get_converter,
)
from segue.guardrails import Guardrail
from segue.hashing import canonical_hash, canonical_json
from segue.layout import LayoutMode, TrailingStateFn
from segue.providers.base import members
from segue.replay import (
    validate_knobs,
)
from segue.run_state import RunSpec, make_event
from segue.skills import Skill, render_system
from segue.store.run_store import DEFAULT_TENANT, TERMINAL, RunStore
from segue.stored_run import spec_of
from segue.tools import Tool, as_tools

DEFAULT_MAX_INPUT_CHARS = 1_000_000
#: The app's metadata is stored twice (the run row and one tag per key): its canonical JSON is capped.
MAX_METADATA_CHARS = 65_536
#: Identifiers (tenant_id, idempotency_key, model, metadata keys) fit the store's 200-character columns.
MAX_ID_CHARS = 200
_SURROGATE = re.compile("[\ud800-\udfff]")
_VALIDATION_ERRORS = (ReplayRunError, InputError, IdempotencyConflictError)


class Agent(Execution):
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
        vendor: str | None = None,
    ) -> RunResult:
        """Run to completion (or pause). Bad input raises before anything is written.

        `model` overrides the provider's model for this run; `vendor` names the catalog vendor that serves it (one
        of the provider's: with Failover, that vendor's first member is tried first), so the trailing-state layout
        is decided from the catalog before the first call."""
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
            vendor,
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
        vendor: str | None = None,
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
                vendor,
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
            raise RunStateError(
                f"run {stored.run_id} is {stored.status}; retry a finished run (resume a paused one)",
                run_id=stored.run_id,
                reason="not_terminal",
            )
        spec = attrs.evolve(spec_of(stored), idempotency_key=None, retry_of=stored.run_id)
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
            async for event in self._resume_events(run_id, approved, tool_results, tenant_id, streaming=True):
                yield event
        except _VALIDATION_ERRORS as e:
            yield _validation_event(e)

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
        vendor: Any,
    ) -> RunSpec:
        if not isinstance(user_input, str) or not user_input.strip():
            raise InputError(f"user_input must be a non-empty string, got {user_input!r:.80}")
        if len(user_input) > self.max_input_chars:
            raise InputError(
                f"user_input has {len(user_input):,} characters, over the limit of {self.max_input_chars:,}; "
                "send large documents as files or tool results, or raise Agent(max_input_chars=...)"
            )
        _check_text("user_input", user_input)
        if not isinstance(tenant_id, str) or not tenant_id:
            raise InputError(f"tenant_id must be a non-empty string, got {tenant_id!r}")
        _check_id("tenant_id", tenant_id)
        if idempotency_key is not None and (not isinstance(idempotency_key, str) or not idempotency_key):
            raise InputError(f"idempotency_key must be a non-empty string or None, got {idempotency_key!r}")
        if idempotency_key is not None:
            _check_id("idempotency_key", idempotency_key)
        if model is not None and (not isinstance(model, str) or not model):
            raise InputError(f"model must be a model name or None, got {model!r}")
        if model is not None:
            _check_id("model", model)
        vendors = sorted({d.vendor for d in members(self.provider)})
        if vendor is not None and vendor not in vendors:
            raise InputError(
                f"vendor must name one of this agent's provider vendors ({', '.join(vendors)}) or be None, "
                f"got {vendor!r:.60}"
            )
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InputError(f"metadata must be a dict, got {type(metadata).__name__}")
        _check_metadata(dict(metadata or {}))
        blocks = []
        for i, b in enumerate(context or []):
            if not isinstance(b, ContextBlock):
                raise InputError(f"context must hold ContextBlock objects, got {type(b).__name__}")
            text: object = b.text  # generated classes do not check types when constructed
            if not isinstance(text, str) or b.placement not in (None, "dynamic", "stable"):
                raise InputError(f"context[{i}] needs text (a str) and placement 'dynamic' or 'stable', got {b!r:.80}")
            _check_text(f"context[{i}].text", b.text)
            blocks.append(attrs.evolve(b, placement=b.placement or "dynamic"))
        messages = as_history(history)
        _check_text("history", get_converter().unstructure(messages, list[Message]))
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
        return RunSpec(
            input=user_input,
            history=messages,
            context=blocks,
            knobs=knobs,
            replay_last=replay_last,
            replay_reasoning=replay_reasoning,
            replay_budget_tokens=replay_budget_tokens,
            tenant_id=tenant_id,
            metadata=dict(metadata or {}),
            idempotency_key=idempotency_key,
            model=model,
            vendor=vendor,
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


def _validation_event(e: Exception) -> RunEvent:
    meta: dict[str, Any] = {"error_type": type(e).__name__}
    if isinstance(e, ReplayRunError):
        meta.update(reason=e.reason, run_id=e.run_id)
    elif isinstance(e, RunStateError):
        meta.update(reason=e.reason, run_id=e.run_id, agent=e.agent)
    return make_event("RUN_ERROR", "", 0, error=str(e), meta=meta)


async def _last_result(events: AsyncIterator[RunEvent]) -> RunResult:
    result: RunResult | None = None
    async for event in events:
        if event.result is not None:
            result = event.result
    if result is None:
        raise RuntimeError("the run ended without a result event")  # a bug in segue, not in the caller's input
    return result


def _check_text(name: str, value: Any) -> None:
    """Refuse a lone surrogate (what a JSON `\\ud800` escape decodes to): no vendor API and no database driver can
    encode it, so it would fail later, after rows were written."""
    if isinstance(value, str):
        found = None if value.isascii() else _SURROGATE.search(value)
        if found is not None:
            raise InputError(
                f"{name} has a lone surrogate (U+{ord(found.group()):04X}) at index {found.start()}, which is not "
                "valid Unicode text; decode the bytes as UTF-8 (errors='replace' if they may be broken)"
            )
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_text(f"{name}[{key!r}]", key)
            _check_text(f"{name}[{key!r}]", item)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_text(f"{name}[{i}]", item)


def _check_id(name: str, value: str) -> None:
    _check_text(name, value)
    if len(value) > MAX_ID_CHARS or "\x00" in value:
        raise InputError(
            f"{name} must be at most {MAX_ID_CHARS} characters without NUL, got {len(value):,} characters: "
            f"{value[:40]!r}..."
        )


def _check_metadata(metadata: dict[Any, Any]) -> None:
    _check_text("metadata", metadata)
    try:
        size = len(canonical_json(metadata))
    except (TypeError, ValueError) as e:
        raise InputError(f"metadata must be plain JSON (str, numbers, bools, None, lists, dicts): {e}") from None
    if size > MAX_METADATA_CHARS:
        raise InputError(
            f"metadata is {size:,} characters of JSON, over the limit of {MAX_METADATA_CHARS:,}; keep tags and "
            "small state there, and large data in your own storage (store its id in metadata)"
        )
    for key in metadata:
        if not isinstance(key, str) or len(key) > MAX_ID_CHARS:
            raise InputError(f"metadata keys must be strings of at most {MAX_ID_CHARS} characters, got {key!r:.60}")


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


__all__ = ["Agent", "SingleCall"]
