"""The peers' windows as columns of bench/long.py's long chat: PydanticAI's keep-last-N history processor and
dendrux's `replay_last=N`, on the same questions (segue.demo.long_chat), prompt, tools, model, thinking and 1h
cache as bench/long.py's segue settings, each on a fresh twin, priced from the twin's responses with the shared
ledger (bench/peers/ledger.py). Peers whose environment cannot be made are skipped with a message."""

from __future__ import annotations

from contenders import PEERS
from harness import Turn, host, play
from report import summarise
from scenarios import SONNET, Scenario

from segue.catalog import Catalog
from segue.demo import PROMPT, long_chat

#: Peers that have a window over the demo chat on Anthropic (the Agents SDK's own models are OpenAI's).
WINDOWED = {"PydanticAI": "keep-last-{n} processor", "dendrux": "replay_last={n}"}


def peer_lines(turns: int, window: int = 8, *, ttl: str = "1h") -> list[str]:
    """One printed line per peer: setting, cost, cached share, largest request (input tokens), failed turns."""
    catalog = Catalog.load(env=False)
    chat = tuple(Turn(question=q, vendor="anthropic", model=SONNET, prompt=PROMPT) for q in long_chat(turns))
    scenario = Scenario(name="long", title="", turns=chat, ttl=ttl, window=window)
    lines = []
    for peer in PEERS:
        if peer.name not in WINDOWED:
            continue
        label = f"{peer.name} {WINDOWED[peer.name].format(n=window)}"
        python = peer.python()
        if python is None:
            lines.append(f"{label}: skipped ({peer.package}=={peer.version} could not be installed here)")
            continue
        with host(catalog) as where:
            driver = peer.driver(python, scenario, ttl, where)
            try:
                results, between = play(driver, chat, where)
            finally:
                driver.close()
        row = summarise(peer.label, label, chat, results, between)
        largest = max((c.usage.input_tokens for r in results for c in r.calls if c.usage), default=0)
        cost = f"{row.cost:>8.4f}" if row.cost is not None else f"{'?':>8}"
        lines.append(
            f"{label:<34} {cost} {row.cached:>7.1%} {largest:>8,}  failed turns {row.failed}/{row.turns}, "
            f"re-explored tools {row.reexplored} (peer {peer.label}: storage and overhead not measured)"
        )
    return lines
