"""Step 2 of a run: idempotency. A request with an idempotency key the tenant used before returns that run's
stored result when it is the same request (same fingerprint), and is an IdempotencyConflictError otherwise.

It runs before the plan: a repeated request returns its stored result even if a run it replayed is gone since.
The fingerprint covers the input, history, context, replayed runs, the three replay knobs, the tenant, the model
and vendor override, the model settings (the agent's merged with the run's), and the agent's configuration
(AgentConfig.config_hash); not the app's metadata.
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs

from segue._core.hashing import canonical_hash
from segue.errors import IdempotencyConflictError
from segue.generated import Message, RunEvent, RunResult, get_converter
from segue.run.request import RunRequest
from segue.run.state import make_event, stored_result
from segue.store.run_store import RunStore
from segue.wire.settings import given


def fingerprint_of(request: RunRequest, config_hash: str) -> str:
    conv = get_converter()
    params = request.params
    return canonical_hash(
        {
            "input": params.input,
            "history": [conv.unstructure(m, Message) for m in request.history],
            "context": [[b.text, b.placement, b.source] for b in request.context],
            "runs": request.knobs.runs if request.knobs else [],
            "replay_last": request.replay_last,
            "replay_reasoning": request.replay_reasoning,
            "replay_budget_tokens": params.replay_budget_tokens,
            "tenant": request.tenant_id,
            "model": params.model,
            "vendor": params.vendor,
            "agent": config_hash,
            # Only when set, so the fingerprints of requests without structured output stay what they were.
            **({"output": request.output.hash, "output_repairs": request.repairs} if request.output else {}),
            **({"model_settings": given(params.model_settings)} if params.model_settings is not None else {}),
            # Likewise the window's step: only when it moves by more than one run.
            **({"replay_step": request.replay_step} if request.replay_step != 1 else {}),
            # And the bound on the runs replayed at all, only when set.
            **({"replay_keep": params.replay_keep} if params.replay_keep is not None else {}),
            **({"compaction": conv.unstructure(params.compaction)} if params.compaction is not None else {}),
        }
    )


class Idempotency:
    def __init__(self, store: RunStore | None) -> None:
        self.store = store

    async def lookup(self, request: RunRequest, fingerprint: str) -> RunResult | None:
        """The stored result of the run holding the request's key, if any (None without a key or a store)."""
        key = request.params.idempotency_key
        if key is None or self.store is None:
            return None
        found = await asyncio.to_thread(self.store.find_idempotent, request.tenant_id, key)
        if found is None:
            return None
        run_id, stored_fingerprint = found
        if stored_fingerprint != fingerprint:
            raise IdempotencyConflictError(key)
        detail = await asyncio.to_thread(self.store.get_run, run_id, tenant_id=request.tenant_id)
        assert detail is not None
        return attrs.evolve(stored_result(detail), output=_output(request, detail.status, detail.answer))


def _output(request: RunRequest, status: str, answer: str | None) -> Any:
    """A structured run's value, read again from its stored answer (the value itself is the app's type)."""
    if request.output is None or status != "success" or answer is None:
        return None
    return request.output.read(answer)[0]


def replayed_event(existing: RunResult) -> RunEvent:
    """The stored result of an earlier request with the same idempotency key and fingerprint."""
    return make_event(
        "RUN_COMPLETED", existing.run_id, existing.iterations, result=existing, meta={"idempotent_replay": True}
    )
