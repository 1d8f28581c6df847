"""Who plays in bench/peers.py and how each is set up: segue's variants per scenario and the three peers, each
pinned, in its own virtual environment (bench/peers/_peer_venv.py), configured as its own docs recommend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
from _peer_venv import peer_python
from harness import Driver, Host, PeerProcess
from scenarios import Scenario
from segue_side import SegueDriver, supports_auto_ttl, supports_knob


@attrs.frozen(kw_only=True)
class Peer:
    #: The name `--peer` takes.
    key: str
    name: str
    package: str
    version: str
    extras: str | None
    module: str | None
    script: str
    vendors: frozenset[str]
    #: How the peer keeps the conversation and caches it (for the table), per TTL name.
    setup: Callable[[str, int | None], str]
    #: Why the peer cannot play a vendor it lacks.
    missing_vendor: str = ""

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    def python(self) -> Path | None:
        return peer_python(self.package, self.version, self.extras, self.module)

    def cannot(self, scenario: Scenario) -> str | None:
        lacking = scenario.vendors - self.vendors
        return self.missing_vendor if lacking else None

    def driver(self, python: Path, scenario: Scenario, ttl: str, where: Host) -> Driver:
        settings = {"thinking": scenario.thinking, "ttl": ttl, "window": scenario.window}
        return PeerProcess(python, self.script, settings, where)


def _pydantic_setup(ttl: str, window: int | None) -> str:
    cache = "cache=True" if ttl in ("5m", "30m") else f'cache="{ttl}"'
    kept = f", ProcessHistory keeping the last {window} turns" if window else ""
    return f"`message_history`, {cache}{kept}"


def _agents_setup(ttl: str, window: int | None) -> str:
    return "`SQLiteSession`, default prompt caching"


def _dendrux_setup(ttl: str, window: int | None) -> str:
    last = window if window else '"all"'
    return f"`runs=`, `replay_last={last}`, `cache_ttl`={ttl}"


PEERS = (
    Peer(
        key="pydantic-ai",
        name="PydanticAI",
        package="pydantic-ai-slim",
        version="2.68.0",
        extras="anthropic,openai",
        module="pydantic_ai",
        script="_pydantic_turns.py",
        vendors=frozenset({"anthropic", "openai"}),
        setup=_pydantic_setup,
    ),
    Peer(
        key="agents",
        name="OpenAI Agents SDK",
        package="openai-agents",
        version="0.24.0",
        extras=None,
        module="agents",
        script="_agents_turns.py",
        vendors=frozenset({"openai"}),
        setup=_agents_setup,
        missing_vendor="Anthropic only through its LiteLLM extension (not the SDK's own models)",
    ),
    Peer(
        key="dendrux",
        name="dendrux",
        package="dendrux",
        version="0.4.1",
        extras="anthropic,openai",
        module=None,
        script="_dendrux_turns.py",
        vendors=frozenset({"anthropic", "openai"}),
        setup=_dendrux_setup,
    ),
)

#: segue windows for the long chat, each used when `Agent.run` takes all its knobs (detected, not assumed): a
#: branch that adds a window adds one line here.
SEGUE_WINDOWS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("`replay_last={n}`", {"replay_last": "{n}"}),
    ("`replay_last={n}, replay_step=4`", {"replay_last": "{n}", "replay_step": 4}),
    ("`replay_keep={n}, replay_step=4` ({n} to {n}+3 runs)", {"replay_keep": "{n}", "replay_step": 4}),
    # Bounded like the peers: never more than n runs in all (n-3 to n), moving every fourth turn.
    ("`replay_keep={k}, replay_step=4` (at most {n} runs)", {"replay_keep": "{k}", "replay_step": 4}),
)


@attrs.frozen(kw_only=True)
class SegueVariant:
    setup: str
    ttl: str
    knobs: dict[str, Any] = attrs.field(factory=dict)
    prewarm: bool = False

    def driver(self, scenario: Scenario, where: Host) -> SegueDriver:
        return SegueDriver(where, thinking=scenario.thinking, ttl=self.ttl, knobs=self.knobs, prewarm=self.prewarm)


def segue_variants(scenario: Scenario) -> list[SegueVariant]:
    if scenario.window is not None:
        n = scenario.window
        out = []
        for label, knobs in SEGUE_WINDOWS:
            if all(supports_knob(k) for k in knobs):
                slots = {"{n}": n, "{k}": max(1, n - 3)}
                filled = {k: slots.get(v, v) if isinstance(v, str) else v for k, v in knobs.items()}
                setup = label.format(n=n, k=slots["{k}"])
                out.append(SegueVariant(setup=setup, ttl=scenario.ttl, knobs=filled))
        return out
    if scenario.peer_ttls:  # the pauses scenarios
        out = [
            SegueVariant(setup='`replay_last="all"`, fixed 5m', ttl="5m"),
            SegueVariant(setup='`replay_last="all"`, fixed 1h', ttl="1h"),
        ]
        if supports_auto_ttl():
            out.append(SegueVariant(setup='`replay_last="all"`, `cache_ttl="auto"`', ttl="auto"))
            out.append(
                SegueVariant(setup='`cache_ttl="auto"`, kept warm with `agent.prewarm`', ttl="auto", prewarm=True)
            )
        out.append(SegueVariant(setup="5m, kept warm with `agent.prewarm`", ttl="5m", prewarm=True))
        return out
    return [SegueVariant(setup='`runs=`, `replay_last="all"`', ttl=scenario.ttl)]
