"""What a client can learn before it sends work: `agents/list`, `agents/get` and `catalog/list`.

An app in another language reads the agents, their tools (JSON Schemas, where each runs) and the catalog's view of
their serving path from the server, instead of from the server's config file. Everything here reads the agents
the server built at start-up and the catalog; nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence

from segue.apps.protocol.config import AgentEntry, ServeApp
from segue.apps.protocol.rpc import Handler, RequestContext
from segue.apps.protocol.tools import tool_kind
from segue.cache.layout import LayoutPlan, LayoutPolicy
from segue.catalog import Catalog, CatalogError
from segue.catalog.cascade import Resolved
from segue.generated import ConfigBag, get_converter
from segue.generated.protocol import (
    AgentInfo,
    AgentsGetParams,
    AgentsGetResult,
    AgentsListParams,
    AgentsListResult,
    AgentSummary,
    CatalogListParams,
    CatalogListResult,
    CatalogPath,
    LayoutInfo,
    ProviderInfo,
    ToolInfo,
)
from segue.tools import Tool, ToolSource


class Discovery:
    """Handlers for the discovery methods, over the agents and catalog of one ServeApp."""

    def __init__(self, app: ServeApp) -> None:
        self.app = app
        #: agents/get answers, by agent: agents and the catalog never change while the server runs, and working
        #: one out may log (a provider the catalog cannot resolve), which a client asking again must not repeat.
        self._described: dict[str, AgentInfo] = {}

    def handlers(self) -> dict[str, Handler]:
        return {"agents/list": self.agents_list, "agents/get": self.agents_get, "catalog/list": self.catalog_list}

    async def agents_list(self, ctx: RequestContext, p: AgentsListParams) -> AgentsListResult:
        return AgentsListResult(
            agents=[
                AgentSummary(name=name, provider=_provider(entry), tools=[t.name for t in _own(entry.agent.tools)])
                for name, entry in self.app.agents.items()
            ]
        )

    async def agents_get(self, ctx: RequestContext, p: AgentsGetParams) -> AgentsGetResult:
        entry = self.app.agent(p.agent)
        if p.agent not in self._described:
            self._described[p.agent] = self._describe(p.agent, entry)
        return AgentsGetResult(agent=self._described[p.agent])

    def _describe(self, name: str, entry: AgentEntry) -> AgentInfo:
        agent, provider = entry.agent, entry.agent.provider
        tools = [
            ToolInfo(
                name=built.name,
                description=built.description,
                parameters=built.parameters,
                kind=tool_kind(cfg),
                client_tool=built.name in entry.client_tools,
                # A client-side tool pauses the run where the client cannot be asked; that is not an approval.
                requires_approval=bool(cfg.requires_approval)
                if built.name in entry.client_tools
                else built.requires_approval,
                timeout_seconds=built.timeout,
            )
            for cfg, built in zip(entry.config.tools or [], _own(agent.tools), strict=True)
        ]
        catalog: Catalog | None = None
        catalog_path, note = None, None
        try:
            catalog = self.app.catalog
            catalog_path = _path(catalog.resolve(provider.model, provider.vendor))
        except CatalogError as e:
            note = f"the catalog cannot resolve {provider.model}@{provider.vendor}: {e}"
        policy = LayoutPolicy(
            LayoutPlan.make(
                mode=agent.trailing_state_layout,
                catalog=catalog,
                requires_stable_reasoning_prefix=provider.requires_stable_reasoning_prefix,
                declares_native_tools=bool(agent.tools),
            )
        )
        # What an `auto` layout decides once the provider's own serving path answered the first request.
        decision = policy.decision or policy.observe_served(1, provider.vendor, provider.model)
        return AgentInfo(
            name=name,
            provider=_provider(entry),
            max_iterations=agent.max_iterations,
            tools=tools,
            catalog=catalog_path,
            catalog_note=note,
            layout=LayoutInfo(configured=agent.trailing_state_layout, mode=decision.mode, reason=decision.reason),
        )

    async def catalog_list(self, ctx: RequestContext, p: CatalogListParams) -> CatalogListResult:
        catalog = self.app.catalog
        model = catalog.model_for(p.model) if p.model is not None else None  # an unknown name names close ones
        if p.vendor is not None:
            catalog.vendor(p.vendor)  # an unknown vendor is a CatalogLookupError naming the known ones
        paths = [
            _path(catalog.resolve(m, v))
            for m, v in catalog.serving_paths()
            if (model is None or m == model) and (p.vendor is None or v == p.vendor)
        ]
        return CatalogListResult(paths=paths)


def _provider(entry: AgentEntry) -> ProviderInfo:
    provider = entry.config.provider
    return ProviderInfo(kind=provider.kind, model=provider.model, vendor=entry.agent.provider.vendor)


def _path(resolved: Resolved) -> CatalogPath:
    return CatalogPath(
        model=resolved.model,
        vendor=resolved.vendor,
        label=resolved.label,
        api_name=resolved.api_name,
        wire=resolved.wire,
        priority=resolved.priority,
        layers=list(resolved.layers),
        note=resolved.note,
        config=get_converter().structure(resolved.config, ConfigBag),
    )


def _own(tools: Sequence[Tool | ToolSource]) -> list[Tool]:
    """The tools the config file defines; an MCP server's (a ToolSource's) are listed by the server, per run."""
    return [t for t in tools if isinstance(t, Tool)]
