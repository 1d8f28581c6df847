"""The agents file of `segue serve --config FILE`, validated by schemas/serve.schema.json, and the agents it builds.

Every problem names the file, the JSON pointer and what to do, before the server reads its first message.
Credentials never live in the file: `api_key_env` names the environment variable that holds a key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

import attrs
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from segue._core.contracts import Provider
from segue.agent import Agent
from segue.apps.protocol.params import invalid_params
from segue.apps.protocol.tools import Mode, ToolConfigError, build_tool
from segue.catalog import Catalog
from segue.generated import get_converter
from segue.generated.serve import AgentConfig, McpServerConfig, ProviderConfig, ServeConfig
from segue.providers.registry import BY_KIND, KINDS, OPTIONS, kinds_taking
from segue.run.lineage import DEFAULT_MAX_DEPTH
from segue.run.subrun import fork_tool
from segue.store.connection import redact
from segue.store.run_store import RunStore
from segue.tools import Tool, ToolSource

_SCHEMA = Path(__file__).resolve().parents[2] / "generated" / "schemas" / "serve.schema.json"
DB_ENV = "SEGUE_DB"
DEFAULT_STORE = "sqlite:///segue.db"
#: Which provider kinds each option applies to, from the one table of kinds (segue.providers.registry).
_ONLY_FOR: dict[str, tuple[str, ...]] = {option: kinds_taking(option) for option in OPTIONS}

#: A vendor kind's key variables, and the kind that asks for the twin (segue.providers.registry). The drivers refuse
#: without a key too (segue.providers._keys); checking here first names the config entry and the twin kind to use.
_KEY_VARIABLES: dict[str, tuple[tuple[str, ...], str]] = {
    k.kind: (k.key_variables, k.twin_kind) for k in KINDS if k.key_variables and k.twin_kind is not None
}


class ServeError(Exception):
    """`segue serve` cannot start (bad config, port taken): one line for the user, exit code 2."""


class ConfigError(ServeError, ValueError):
    """The config file is missing, not JSON, fails the schema, or names something that cannot be built."""

    def __init__(self, file: str, pointer: str, message: str) -> None:
        super().__init__(f"{file}#{pointer or '/'}: {message}")
        self.file = file
        self.pointer = pointer


@attrs.frozen(kw_only=True)
class AgentEntry:
    config: AgentConfig
    #: The agent as the transport serves it: on stdio its client-side tools are tool/call requests to the client.
    agent: Agent
    #: The same agent with its client-side tools pausing the run for the client's result (HTTP always; a stdio
    #: client that said in initialize it answers no tool/call). The same object when that changes nothing.
    pausing: Agent
    store: RunStore
    client_tools: frozenset[str]


class ServeApp:
    """The configured agents, their run stores (one per URL) and, when a twin provider is used, the one Twin."""

    def __init__(self, agents: dict[str, AgentEntry], stores: dict[str, RunStore], twin: Any = None) -> None:
        self.agents = agents
        self.stores = stores
        self.twin = twin
        self._catalog: Catalog | None = None

    def agent(self, name: str) -> AgentEntry:
        """The configured agent `name`, or InvalidParams naming the agents there are."""
        found = self.agents.get(name)
        if found is None:
            known = ", ".join(sorted(self.agents))
            raise invalid_params("/agent", f"no agent {name!r} in the server's config; configured: {known}")
        return found

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog.load()
        return self._catalog

    def close(self) -> None:
        for store in self.stores.values():
            store.close()

    async def stop_tools(self) -> None:
        """Stop the agents' MCP servers (their processes and sessions), in the event loop that started them."""
        for entry in self.agents.values():
            await entry.agent.aclose()


def load_config(path: Path) -> ServeConfig:
    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(shown, "", f"cannot read the config file: {e.strerror or e}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(shown, "", f"not JSON: {e}") from None
    schema = json.loads(_SCHEMA.read_text(encoding="utf-8"))
    registry: Registry[Any] = Registry().with_resource(schema["$id"], Resource.from_contents(schema))
    validator = Draft202012Validator({"$ref": f"{schema['$id']}#/$defs/ServeConfig"}, registry=registry)
    errors = sorted(validator.iter_errors(raw), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        raise ConfigError(shown, _pointer(first.absolute_path), f"{first.message}{more}; see schemas/serve.schema.json")
    config: ServeConfig = get_converter().structure(raw, ServeConfig)
    seen: dict[str, int] = {}
    for i, agent in enumerate(config.agents):
        if agent.name in seen:
            raise ConfigError(
                shown, f"/agents/{i}/name", f"agent {agent.name!r} is already defined at /agents/{seen[agent.name]}"
            )
        seen[agent.name] = i
        names: dict[str, int] = {}
        for j, t in enumerate(agent.tools or []):
            if t.name in names:
                raise ConfigError(
                    shown, f"/agents/{i}/tools/{j}/name", f"tool {t.name!r} is already defined in this agent"
                )
            names[t.name] = j
        servers: dict[str, int] = {}
        for j, server in enumerate(agent.mcp_servers or []):
            where = f"/agents/{i}/mcp_servers/{j}"
            if server.name in servers:
                raise ConfigError(
                    shown, f"{where}/name", f"MCP server {server.name!r} is already defined in this agent"
                )
            servers[server.name] = j
            problem = _mcp_shape(server)
            if problem is not None:
                raise ConfigError(shown, where, problem)
        for j, sub in enumerate(agent.sub_agents or []):
            if sub.agent not in {a.name for a in config.agents}:
                raise ConfigError(
                    shown, f"/agents/{i}/sub_agents/{j}/agent", f"no agent named {sub.agent!r} in this file to offer"
                )
        for key, kinds in _ONLY_FOR.items():
            if getattr(agent.provider, key) is not None and agent.provider.kind not in kinds:
                raise ConfigError(
                    shown,
                    f"/agents/{i}/provider/{key}",
                    f"{key} applies to provider kinds {', '.join(kinds)}, not {agent.provider.kind!r}; remove it",
                )
    _build_order(config, shown)  # a cycle of agents offering each other is refused here
    return config


def _build_order(config: ServeConfig, shown: str) -> list[int]:
    """The agents' indexes, each after the agents it offers as tools (sub_agents); ConfigError naming the cycle
    when agents offer each other (A offers B, B offers A): an agent can only be offered once it is built."""
    index = {a.name: i for i, a in enumerate(config.agents)}
    order: list[int] = []
    state: dict[int, str] = {}

    def visit(i: int, path: list[str]) -> None:
        if state.get(i) == "done":
            return
        name = config.agents[i].name
        if state.get(i) == "visiting":
            cycle = " -> ".join([*path[path.index(name) :], name])
            raise ConfigError(
                shown,
                f"/agents/{i}/sub_agents",
                f"agents offer each other in a cycle ({cycle}); an agent that needs to call itself again uses "
                "`fork` (bounded by max_depth)",
            )
        state[i] = "visiting"
        for sub in config.agents[i].sub_agents or []:
            visit(index[sub.agent], [*path, name])
        state[i] = "done"
        order.append(i)

    for i in range(len(config.agents)):
        visit(i, [])
    return order


def build_app(config: ServeConfig, path: Path, mode: Mode) -> ServeApp:
    """Agents, stores and providers for `config` (read from `path`; relative sqlite paths are relative to it)."""
    shown = str(path)
    base = path.resolve().parent
    stores: dict[str, RunStore] = {}
    agents: dict[str, AgentEntry] = {}
    twin: list[Any] = []
    try:
        for i in _build_order(config, shown):
            cfg = config.agents[i]
            url = _store_url(cfg.store or os.environ.get(DB_ENV) or DEFAULT_STORE, base)
            if url not in stores:
                try:
                    stores[url] = RunStore(url)
                except Exception as e:  # StoreError, or the driver (e.g. psycopg) missing
                    raise ConfigError(
                        shown, f"/agents/{i}/store", f"cannot open the run store {redact(url)}: {e}"
                    ) from None
            tools, pausing_tools = [], []
            client_tools = set()
            for j, tool_cfg in enumerate(cfg.tools or []):
                try:
                    built, is_client = build_tool(tool_cfg, client_answers=mode == "stdio")
                    pausing = build_tool(tool_cfg, client_answers=False)[0] if is_client and mode == "stdio" else built
                except ToolConfigError as e:
                    raise ConfigError(shown, f"/agents/{i}/tools/{j}{e.pointer}", str(e)) from None
                tools.append(built)
                pausing_tools.append(pausing)
                if is_client:
                    client_tools.add(built.name)
            # One MCPTools per configured server, shared by the agent and its pausing twin: one process each.
            sources = [
                _mcp_source(server, base, shown, f"/agents/{i}/mcp_servers/{j}")
                for j, server in enumerate(cfg.mcp_servers or [])
            ]
            offered = _sub_agent_tools(cfg, agents)
            provider = _provider(cfg.provider, shown, f"/agents/{i}/provider", twin)
            agent = _agent(cfg, provider, [*tools, *offered, *sources], stores[url])
            same = all(p is t for p, t in zip(pausing_tools, tools, strict=True))
            agents[cfg.name] = AgentEntry(
                config=cfg,
                agent=agent,
                pausing=agent if same else _agent(cfg, provider, [*pausing_tools, *offered, *sources], stores[url]),
                store=stores[url],
                client_tools=frozenset(client_tools),
            )
    except BaseException:
        for store in stores.values():
            store.close()
        raise
    return ServeApp(agents, stores, twin[0] if twin else None)


def _sub_agent_tools(cfg: AgentConfig, built: dict[str, AgentEntry]) -> list[Tool]:
    """The agents this one offers (built before it: `_build_order`), and its fork tool."""
    tools = [
        built[sub.agent].agent.as_tool(
            sub.name,
            sub.description,
            remember=sub.remember is not False,
            max_depth=sub.max_depth or DEFAULT_MAX_DEPTH,
        )
        for sub in cfg.sub_agents or []
    ]
    if cfg.fork is not None:
        fork = cfg.fork
        options: dict[str, Any] = {"name": fork.name or "fork", "max_depth": fork.max_depth or DEFAULT_MAX_DEPTH}
        if fork.description:
            options["description"] = fork.description
        tools.append(fork_tool(**options))
    return tools


def _agent(cfg: AgentConfig, provider: Provider, tools: list[Tool | ToolSource], store: RunStore) -> Agent:
    return Agent(
        provider,
        cfg.prompt or "",
        tools,
        store,
        max_iterations=cfg.max_iterations or 10,
        name=cfg.name,
        cache_diagnostics=cfg.cache_diagnostics is not False,
    )


def _mcp_shape(server: McpServerConfig) -> str | None:
    """What is wrong with an MCP server entry's combination of keys (the schema checks each key alone)."""
    if (server.command is None) == (server.url is None):
        return f"MCP server {server.name!r} needs exactly one of command (stdio) or url (Streamable HTTP)"
    wrong = ("args", "env", "pass_env", "cwd") if server.url is not None else ("headers_env",)
    extra = [key for key in wrong if getattr(server, key) is not None]
    if extra:
        kind = "a url" if server.url is not None else "a command"
        return f"MCP server {server.name!r} has {kind}, so {', '.join(extra)} does not apply; remove it"
    return None


def _mcp_source(server: McpServerConfig, base: Path, shown: str, pointer: str) -> ToolSource:
    """segue.mcp.MCPTools for one entry; environment variables are read (and must be set) here, at start-up."""
    try:
        from segue.mcp import MCPTools, MCPToolsError
    except ImportError as e:
        raise ConfigError(shown, pointer, str(e)) from None

    def from_env(key: str, variable: str) -> str:
        value = os.environ.get(variable)
        if value is None:
            raise ConfigError(shown, f"{pointer}/{key}", f"the environment variable {variable} is not set")
        return value

    options: dict[str, Any] = {
        "name": server.name,
        "prefix": server.prefix,
        "requires_approval": server.requires_approval or False,
        "timeout": server.timeout_seconds or 60.0,
    }
    if server.connect_timeout_seconds is not None:
        options["connect_timeout"] = server.connect_timeout_seconds
    try:
        if server.url is not None:
            headers = {h: from_env("headers_env", v) for h, v in (server.headers_env or {}).items()}
            return MCPTools.http(server.url, headers=headers, **options)
        assert server.command is not None
        env = {**(server.env or {}), **{v: from_env("pass_env", v) for v in server.pass_env or []}}
        cwd = base / server.cwd if server.cwd else None
        return MCPTools.stdio(server.command, server.args or [], env=env or None, cwd=cwd, **options)
    except MCPToolsError as e:
        raise ConfigError(shown, pointer, str(e)) from None


def _provider(cfg: ProviderConfig, shown: str, pointer: str, twin: list[Any]) -> Provider:
    key: str | None = None
    if cfg.api_key_env is not None:
        key = os.environ.get(cfg.api_key_env)
        if not key:
            raise ConfigError(shown, f"{pointer}/api_key_env", f"the environment variable {cfg.api_key_env} is not set")
    elif cfg.kind in _KEY_VARIABLES and cfg.base_url is None:
        variables, twin_kind = _KEY_VARIABLES[cfg.kind]
        if not any(os.environ.get(name) for name in variables):
            raise ConfigError(
                shown,
                f"{pointer}/kind",
                f"{variables[0]} is not set: set it (or name another variable with api_key_env), "
                f"or use kind {twin_kind!r} for segue's offline twin",
            )
    try:
        return _make_provider(cfg, key, twin)
    except ConfigError:
        raise
    except Exception as e:  # the vendor SDKs raise their own errors for a missing key or a bad option
        raise ConfigError(shown, pointer, f"cannot build the {cfg.kind} provider: {type(e).__name__}: {e}") from None


def _make_provider(cfg: ProviderConfig, key: str | None, twin: list[Any]) -> Provider:
    from segue import providers

    kind, model = cfg.kind, cfg.model
    if BY_KIND[kind].on_twin and not twin:
        from segue_twin import Twin

        twin.append(Twin())  # one twin per server, so prompt caches carry over between runs
    if kind == "anthropic" or kind == "twin-anthropic":
        from segue.providers.anthropic import without_sdk_spans  # the anthropic SDK loads with its driver

        client: Any = None
        if kind == "twin-anthropic":  # segue builds these clients: their own spans are off, as the driver's are
            client = without_sdk_spans(twin[0].anthropic_client())
        elif key is not None or cfg.base_url is not None:
            import anthropic

            client = without_sdk_spans(anthropic.AsyncAnthropic(api_key=key, base_url=cfg.base_url))
        return providers.AnthropicProvider(
            model,
            cache_ttl="auto" if cfg.cache_ttl == "auto" else _control_ttl(cfg.cache_ttl),
            thinking=cfg.thinking,
            max_tokens=cfg.max_tokens or 4096,
            client=client,
        )
    if kind == "openai_responses" or kind == "twin-openai":
        client = twin[0].openai_client() if kind == "twin-openai" else _openai(key, cfg.base_url)
        return providers.OpenAIResponsesProvider(
            model,
            reasoning=cfg.reasoning,
            cache_mode=cfg.cache_mode or "implicit",
            cache_ttl=_breakpoint_ttl(cfg.cache_ttl),
            client=client,
        )
    if kind == "openai_chat":
        client = _openai(key, cfg.base_url)
        return providers.OpenAIChatProvider(
            model,
            base_url=cfg.base_url,
            vendor=cfg.vendor,
            cache_mode=cfg.cache_mode or "implicit",
            client=client,
        )
    if kind == "openrouter":
        from segue.providers.openrouter import BASE_URL

        client = _openai(key, BASE_URL) if key is not None else None
        return providers.OpenRouterProvider(
            model,
            reasoning=cfg.reasoning,
            cache_ttl=_control_ttl(cfg.cache_ttl),
            cache_mode=cfg.cache_mode or "implicit",
            client=client,
        )
    from segue.testing import ScriptedProvider

    return ScriptedProvider(replies=list(cfg.replies or []), model=model)


def _control_ttl(ttl: str | None) -> Literal["5m", "1h"]:
    """cache_ttl for Anthropic's cache_control (default 5m); the OpenAI TTLs are refused by name."""
    if ttl is None or ttl == "5m":
        return "5m"
    if ttl == "1h":
        return "1h"
    if ttl == "auto":
        raise ValueError(
            "cache_ttl 'auto' is taken by the anthropic and twin-anthropic kinds; this one takes '5m' or '1h'"
        )
    raise ValueError(f"cache_ttl {ttl!r} is for OpenAI breakpoint caches; this provider takes '5m' or '1h'")


def _breakpoint_ttl(ttl: str | None) -> Literal["30m", "12h"]:
    """cache_ttl for OpenAI's prompt_cache_options (default 30m); Anthropic's TTLs are refused by name."""
    if ttl is None or ttl == "30m":
        return "30m"
    if ttl == "12h":
        return "12h"
    if ttl == "auto":
        raise ValueError(
            "cache_ttl 'auto' is taken by the anthropic and twin-anthropic kinds; this one takes '30m' or '12h'"
        )
    raise ValueError(f"cache_ttl {ttl!r} is for Anthropic's cache_control; this provider takes '30m' or '12h'")


def _openai(key: str | None, base_url: str | None) -> Any:
    if key is None and base_url is None:
        return None
    import openai

    return openai.AsyncOpenAI(api_key=key or "unused", base_url=base_url)


def _store_url(url: str, base: Path) -> str:
    """sqlite URLs with a relative path are made relative to the config file's folder."""
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return url
    path = unquote(url.removeprefix(prefix))
    if path == ":memory:" or path.startswith("/"):
        return url
    return prefix + str(base / path)


def _pointer(path: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)
