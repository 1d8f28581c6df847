"""What a run is configured with: the agent's settings (AgentConfig, fixed when the Agent is built) and the
snapshot one run takes of them at its plan step (RunConfig).

Everything a run sends or compares about the agent comes from its RunConfig: the rendered system prompt and
stable head, the run's tools (segue.run.toolbox: read from the agent's tool sources once per run), the serving
paths. A run never re-reads the agent, so a value that may differ per run has one place to go.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from segue._core.contracts import Provider
from segue._core.hashing import canonical_hash
from segue._core.json_types import format_hash
from segue.cache.layout import LayoutMode, LayoutPlan, TrailingStateFn
from segue.catalog import Catalog
from segue.generated import LayoutMeta
from segue.guardrails import Guardrail
from segue.providers.base import first_member, members, serving_paths
from segue.replay.prefix_rule import CurrentPrefix
from segue.run.context import render_stable_head
from segue.run.request import Rules, RunRequest
from segue.run.settings import settings_hash
from segue.run.toolbox import Toolbox, ToolSet
from segue.store.run_store import RunStore
from segue.telemetry import Telemetry


@attrs.frozen(kw_only=True)
class RunConfig:
    """The agent's configuration as one run sees it. `current` is what the request puts in front of the replayed
    runs on the path it is aimed at (compared with each replayed run's descriptor); `alternatives` the same for
    the other paths a Failover may serve it on."""

    system: str
    stable_head: str | None
    tools: ToolSet
    current: CurrentPrefix
    alternatives: list[CurrentPrefix]


@attrs.frozen(kw_only=True)
class AgentConfig:
    """The settings of an Agent, as the run pipeline reads them."""

    name: str
    provider: Provider
    store: RunStore | None
    system: str
    tools: Toolbox
    guardrails: tuple[Guardrail, ...]
    max_iterations: int
    lease_seconds: float
    trailing_state: TrailingStateFn | None
    trailing_state_layout: LayoutMode
    catalog: Callable[[], Catalog]
    rules: Rules
    telemetry: Telemetry = attrs.Factory(Telemetry)
    #: Ask the vendors why a request missed the cache (cache diagnostics) where the catalog says a path offers it.
    cache_diagnostics: bool = True
    #: What the idempotency fingerprint covers of the agent: the same key on another configuration conflicts.
    config_hash: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        config_hash = canonical_hash(
            {
                "name": self.name,
                "system": self.system,
                "tools": self.tools.fingerprint,
                "vendor": self.provider.vendor,
                "model": self.provider.model,
                "max_iterations": self.max_iterations,
                "guardrails": sorted(type(g).__name__ for g in self.guardrails),
                "layout": self.trailing_state_layout if self.trailing_state else None,
            }
        )
        object.__setattr__(self, "config_hash", config_hash)

    def snapshot(self, request: RunRequest, tools: ToolSet | None = None) -> RunConfig:
        """The run's configuration: the agent's, with the request's stable context and model / vendor override,
        and the run's tools (segue.run.toolbox; by default the agent's own, for an agent without tool sources)."""
        tools = tools if tools is not None else self.tools.fixed
        stable_head = render_stable_head(request.context)
        paths = serving_paths(self.provider, model=request.params.model, vendor=request.params.vendor)
        system_hash = canonical_hash({"system": self.system, "stable_head": stable_head})
        output_hash = format_hash(request.output.format) if request.output is not None else None
        in_prefix = {d.vendor: d.prefix_settings for d in members(self.provider)}
        prefixes = [
            CurrentPrefix(
                vendor=p.vendor,
                model=p.model,
                system_hash=system_hash,
                tools_hash=tools.hash,
                tool_hashes=tools.hashes,
                reasoning_vendor=p.reasoning_vendor,
                output_hash=output_hash,
                settings_hash=settings_hash(request.params.model_settings, in_prefix.get(p.vendor, ())),
            )
            for p in paths
        ]
        return RunConfig(
            system=self.system,
            stable_head=stable_head,
            tools=tools,
            current=prefixes[0],
            alternatives=prefixes[1:],
        )

    def layout(
        self,
        request: RunRequest,
        tools: ToolSet,
        *,
        resumed: LayoutMeta | None = None,
        conversation: Sequence[tuple[str, LayoutMeta | None]] = (),
    ) -> LayoutPlan | None:
        """The run's trailing-state layout plan, decided now as far as the configuration, a pause, the override
        and the conversation's earlier runs can decide it (the rest: by the path that serves the first call)."""
        if self.trailing_state is None:
            return None
        model, vendor = request.params.model, request.params.vendor
        return LayoutPlan.make(
            mode=self.trailing_state_layout,
            catalog=self.catalog(),
            trailing_state=self.trailing_state,
            requires_stable_reasoning_prefix=first_member(self.provider, vendor).requires_stable_reasoning_prefix,
            declares_native_tools=bool(tools.tools),
            model_override=model,
            vendor_override=vendor if model else None,
            resumed=resumed,
            conversation=conversation,
        )
