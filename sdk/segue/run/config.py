"""What a run is configured with: the agent's settings (AgentConfig, fixed when the Agent is built) and the
snapshot one run takes of them at its plan step (RunConfig).

Everything a run sends or compares about the agent comes from its RunConfig: the rendered system prompt and
stable head, the tool definitions and their hashes, the serving paths. A run never re-reads the agent, so a value
that may differ per run (tools read from a server, a per-run output type) has one place to go.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from segue.catalog import Catalog
from segue.context import render_stable_head
from segue.contracts import Provider
from segue.generated import ToolDefinition, get_converter
from segue.guardrails import Guardrail
from segue.hashing import canonical_hash
from segue.json_types import format_hash
from segue.layout import LayoutMode, LayoutPolicy, TrailingStateFn
from segue.prefix_rule import CurrentPrefix
from segue.providers.base import first_member, serving_paths
from segue.run.request import Rules, RunRequest
from segue.store.run_store import RunStore
from segue.tools import Tool


@attrs.frozen(kw_only=True)
class RunConfig:
    """The agent's configuration as one run sees it. `current` is what the request puts in front of the replayed
    runs on the path it is aimed at (compared with each replayed run's descriptor); `alternatives` the same for
    the other paths a Failover may serve it on."""

    system: str
    stable_head: str | None
    tools: Mapping[str, Tool]
    definitions: list[ToolDefinition]
    tool_hashes: Mapping[str, str]
    current: CurrentPrefix
    alternatives: list[CurrentPrefix]


@attrs.frozen(kw_only=True)
class AgentConfig:
    """The settings of an Agent, as the run pipeline reads them."""

    name: str
    provider: Provider
    store: RunStore | None
    system: str
    tools: tuple[Tool, ...]
    guardrails: tuple[Guardrail, ...]
    max_iterations: int
    lease_seconds: float
    trailing_state: TrailingStateFn | None
    trailing_state_layout: LayoutMode
    catalog: Callable[[], Catalog]
    rules: Rules
    tool_hashes: Mapping[str, str] = attrs.field(init=False)
    tools_hash: str = attrs.field(init=False)
    #: What the idempotency fingerprint covers of the agent: the same key on another configuration conflicts.
    config_hash: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        conv = get_converter()
        definitions = [conv.unstructure(t.definition) for t in self.tools]
        tools_hash = canonical_hash(definitions)
        config_hash = canonical_hash(
            {
                "name": self.name,
                "system": self.system,
                "tools": tools_hash,
                "vendor": self.provider.vendor,
                "model": self.provider.model,
                "max_iterations": self.max_iterations,
                "guardrails": sorted(type(g).__name__ for g in self.guardrails),
                "layout": self.trailing_state_layout if self.trailing_state else None,
            }
        )
        object.__setattr__(
            self, "tool_hashes", {t.name: canonical_hash(d) for t, d in zip(self.tools, definitions, strict=True)}
        )
        object.__setattr__(self, "tools_hash", tools_hash)
        object.__setattr__(self, "config_hash", config_hash)

    def snapshot(self, request: RunRequest) -> RunConfig:
        """The run's configuration: the agent's, with the request's stable context and model / vendor override."""
        stable_head = render_stable_head(request.context)
        paths = serving_paths(self.provider, model=request.params.model, vendor=request.params.vendor)
        system_hash = canonical_hash({"system": self.system, "stable_head": stable_head})
        output_hash = format_hash(request.output.format) if request.output is not None else None
        prefixes = [
            CurrentPrefix(
                vendor=p.vendor,
                model=p.model,
                system_hash=system_hash,
                tools_hash=self.tools_hash,
                tool_hashes=self.tool_hashes,
                reasoning_vendor=p.reasoning_vendor,
                output_hash=output_hash,
            )
            for p in paths
        ]
        return RunConfig(
            system=self.system,
            stable_head=stable_head,
            tools={t.name: t for t in self.tools},
            definitions=[t.definition for t in self.tools],
            tool_hashes=self.tool_hashes,
            current=prefixes[0],
            alternatives=prefixes[1:],
        )

    def layout(self, request: RunRequest) -> LayoutPolicy | None:
        """The run's trailing-state layout policy, decided now as far as the configuration and the override can
        decide it (the rest is decided by the path that serves the first call)."""
        if self.trailing_state is None:
            return None
        model, vendor = request.params.model, request.params.vendor
        return LayoutPolicy(
            mode=self.trailing_state_layout,
            catalog=self.catalog(),
            trailing_state=self.trailing_state,
            requires_stable_reasoning_prefix=first_member(self.provider, vendor).requires_stable_reasoning_prefix,
            declares_native_tools=bool(self.tools),
            model_override=model,
            vendor_override=vendor if model else None,
        )
