"""The peers' windows as columns of bench/long.py's long chat: PydanticAI's keep-last-N history processor and
dendrux's `replay_last=N`, on the same questions (segue.demo.long_chat), prompt, tools, model, thinking and 1h
cache as bench/long.py's segue settings, each on a fresh twin, priced from the twin's responses with the shared
ledger (bench/peers/ledger.py). Peers whose environment cannot be made are skipped with a message.

`compaction_lines` gives the peers' compaction rows of `bench/long.py --compaction`: each peer's compaction at its
pinned version where it runs on the twin, and otherwise a line saying why not."""

from __future__ import annotations

from contenders import PEERS
from harness import PeerProcess, Turn, host, play
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


#: Why a peer's compaction is not played on the long chat (claude-sonnet-4-6 on the Anthropic twin), checked against
#: the pinned versions' sources in their environments (~/.cache/segue-bench).
NO_COMPACTION = {
    "OpenAI Agents SDK": (
        "not run: its session compaction (OpenAIResponsesCompactionSession, in openai-agents 0.24.0) calls OpenAI's "
        "responses.compact for OpenAI models, and the chat is on claude-sonnet-4-6, which the SDK reaches only "
        "through its LiteLLM extension (not in its environment)"
    ),
    "dendrux": "not run: dendrux 0.4.1 has no compaction (its long-conversation tool is replay_last=N)",
}


def compaction_lines(turns: int, trigger: int, catalog: Catalog) -> list[str]:
    """One printed line per peer for the compaction comparison: PydanticAI 2.68.0 with Anthropic's server-side
    compaction (its `anthropic_context_management` setting, compact_20260112 at `trigger` input tokens: the same
    vendor compaction as segue's `vendor compact` row; its own client-side `capabilities/compaction.py` is not in
    2.68.0), every earlier turn kept as `message_history`; the other peers as a line saying why not."""
    chat = tuple(Turn(question=q, vendor="anthropic", model=SONNET, prompt=PROMPT) for q in long_chat(turns))
    lines = []
    for peer in PEERS:
        if peer.name in NO_COMPACTION:
            lines.append(f"{peer.label}: {NO_COMPACTION[peer.name]}")
            continue
        label = f"{peer.name} vendor compact"
        python = peer.python()
        if python is None:
            lines.append(f"{label}: skipped ({peer.package}=={peer.version} could not be installed here)")
            continue
        settings = {"thinking": True, "ttl": "1h", "window": None, "compaction_trigger": trigger}
        with host(catalog) as where:
            driver = PeerProcess(python, peer.script, settings, where)
            try:
                results, between = play(driver, chat, where)
            finally:
                driver.close()
        row = summarise(peer.label, label, chat, results, between)
        usages = [c.usage for r in results for c in r.calls if c.usage]
        # The summaries' own prompts count in the cached share as in segue's rows (the cost has them already).
        read = sum(
            (u.cache_read_tokens or 0) + sum(p.cache_read_tokens or 0 for p in u.compaction_iterations or ())
            for u in usages
        )
        sent = sum(u.input_tokens + sum(p.input_tokens for p in u.compaction_iterations or ()) for u in usages)
        parts = [p for u in usages for p in u.compaction_iterations or ()]
        largest = max([u.input_tokens for u in usages] + [p.input_tokens for p in parts], default=0)
        lowest = min(((p.cache_read_tokens or 0) / max(1, p.input_tokens) for p in parts), default=None)
        cost = f"{row.cost:>8.4f}" if row.cost is not None else f"{'?':>8}"
        shown = f"{lowest:.1%}" if lowest is not None else "-"
        lines.append(
            f"{label:<16} {cost} {read / max(1, sent):>7.1%} {largest:>8,} {row.reexplored:>11} {row.failed:>6} "
            f"{len(parts):>9} {shown:>19}  (peer {peer.label})"
        )
        failed = next((r.error for r in results if not r.ok), None)
        if failed:
            lines.append(f"  {peer.name}'s first failed turn: {' '.join(failed.split())[:300]}")
    return lines
