"""Agent.prewarm: send the next run's prefix ahead of the user's message, so that run reads it from the cache.

A prewarm goes through the run's own steps up to the call: the same validation (segue.run.request), the same plan
(the replayed runs read, checked and rebuilt; one store read), the same layout of the prefix and the same fitting
to each serving path (segue.run.loop.provider_request). So what it sends is, byte for byte, what the next
`agent.run(text, runs=..., ...)` with the same arguments sends before its user message. The driver then asks the
vendor only to cache it (`ProviderRequest.prewarm`: Anthropic `max_tokens: 0`, OpenAI breakpoint caches'
`prompt_cache_options.prewarm`).

Whether a serving path can be warmed is catalog data (`llm.cache_prewarm`): a path whose catalog row does not say
so is refused before anything is sent, naming the path, rather than answered with a call that warms nothing.
A prewarm is recorded as one provider call of its own (segue.store.prewarms), never as a run.

When the run's compaction policy finds a compaction due, the next turn first sends the compaction's summary
request (segue.run.compaction), then its own request with a summary that does not exist yet: a prewarm then warms
the summary request's prefix, byte for byte what that request sends before its instruction.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from ulid import ULID

from segue.catalog import CatalogError
from segue.catalog.costs import add_call
from segue.errors import InputError, WireError
from segue.generated import LlmInteraction, PrewarmResult
from segue.run.compaction import summary_of
from segue.run.config import AgentConfig
from segue.run.model_call import provider_request
from segue.run.plan import Planner, RunPlan
from segue.run.recorder import interaction_of
from segue.run.request import RunRequest
from segue.run.state import RunState

_ABSENT = object()


class Prewarmer:
    """Prewarms for one agent."""

    def __init__(self, agent: AgentConfig, planner: Planner) -> None:
        self.agent = agent
        self.planner = planner

    async def prewarm(self, request: RunRequest) -> PrewarmResult:
        """Plan like a run, check the catalog, send the prefix with `prewarm=True`, record the call. Everything is
        checked before the call and nothing is recorded when it fails."""
        plan = await self.planner.plan(request)
        if plan.compaction_due:
            # The next turn's first request is the compaction's summary request (segue.run.compaction), and the
            # turn's own prefix holds a summary that does not exist yet: warm the summary request's prefix.
            request, plan = await summary_of(self.planner, request, plan)
        self._check_supported(plan)
        state = RunState(run_id=str(ULID()), request=request, plan=plan, own=[], replay=plan.summary)
        # The prefix laid out as iteration 1 lays it out, without the user message and the fragment that follow it.
        prefix = state.layout.lay_out(plan.prefix, None, 1) if state.layout is not None else list(plan.prefix)
        config = plan.config
        if not (config.system or config.stable_head or config.tools.definitions or prefix):
            raise InputError(
                "prewarm: the next run sends nothing before its user message (no prompt, tools, stable context, "
                "history or runs=), so there is nothing to warm"
            )
        call = provider_request(state, prefix, prewarm=True)
        started = time.perf_counter()
        try:
            response = await self.agent.provider.complete(call)
        except WireError as e:  # the driver's wire has no documented way, though the catalog row says there is
            raise InputError(f"prewarm on {plan.path.label()}: {e}") from e
        interaction = interaction_of(response, 1, (time.perf_counter() - started) * 1000)
        runs = list(request.knobs.runs) if request.knobs is not None else []
        store = self.agent.store
        if store is not None:
            await asyncio.to_thread(
                store.prewarms.record,
                state.run_id,
                agent=self.agent.name,
                tenant_id=request.tenant_id,
                runs=runs,
                call=interaction,
            )
        return PrewarmResult(
            prewarm_id=state.run_id,
            agent=self.agent.name,
            tenant_id=request.tenant_id,
            runs=runs,
            vendor=response.vendor,
            model=response.model,
            usage=response.usage,
            latency_ms=interaction.latency_ms,
            served_by=response.served_by,
            **self._cost(interaction),
        )

    def _check_supported(self, plan: RunPlan) -> None:
        path = plan.path
        why = "the catalog has no entry for it"
        try:
            resolved = self.agent.catalog().resolve(path.model, path.vendor)
        except CatalogError as e:
            why = f"the catalog cannot resolve it ({e})"
        else:
            if resolved.cache_prewarm:
                return
            source = resolved.source("llm", "cache_prewarm")
            value = resolved.get("llm", "cache_prewarm", default=_ABSENT)
            shown = "absent" if value is _ABSENT else json.dumps(value)
            why = f"its catalog row says llm.cache_prewarm={shown}" + (f" ({source})" if source else "")
        raise InputError(
            f"prewarm: {path.label()} has no documented way to warm its prompt cache without generating: {why}. "
            "Send the next run without a prewarm (it writes the cache itself), or run on a path whose catalog row "
            "says llm.cache_prewarm: true (`segue catalog explain MODEL --vendor VENDOR`); if your vendor documents "
            "pre-warming, set it in a catalog layer"
        )

    def _cost(self, interaction: LlmInteraction) -> dict[str, Any]:
        """The call's cost as a run's reads (`cost`: usd, on the twin 0 with the vendor's price as twin_usd, or
        `missing` when the catalog has no price: no cost is better than a wrong one), and the same figures in the
        deprecated `cost_usd` / `twin_usd` that protocol 1.x clients read."""
        twin = interaction.served_by == "twin"
        catalog = self.agent.catalog()
        cost = add_call(None, catalog, interaction.model, interaction.vendor, interaction.usage, twin=twin)
        if cost.usd is None:
            return {"cost": cost}
        if twin:
            return {"cost": cost, "cost_usd": 0.0, "twin_usd": cost.twin_usd}
        return {"cost": cost, "cost_usd": cost.usd}
