"""Long conversations on the twin: a 60- and a 200-turn tool chat under four ways of replaying the earlier turns.

The chat is the demo's shop analyst (`segue demo`: its prompt, its three tools, Anthropic claude-sonnet-4-6 with
thinking and the 1-hour cache), asked a new question each turn that needs a new query (top N products, customers
with more than N orders, revenue per month of a year), so every turn makes tool calls and adds tool results.
Settings, side by side in one run, each on a fresh twin and a fresh store:

- `all`: runs=<every earlier run>, replay_last="all";
- `last8`: replay_last=8 (the window moves one run per turn);
- `last8 step4`: replay_last=8, replay_step=4 (the window moves four runs every fourth turn);
- `keep8 step4`: replay_keep=8, replay_step=4 (8 to 11 of the latest runs in full, older ones left out, four at
  a time every fourth turn: requests stop growing);
- `all, fitted`: replay_last="all" on a context window of `--window` tokens (a catalog layer of this bench:
  the packaged catalog gives no window for claude-sonnet-4-6), so the chat outgrows it and is fitted.

Per setting: the chat's cost (catalog list prices), the share of input read from the cache, the largest request
(input tokens), the bytes the store keeps for request bodies on turn 10 and on the last turn (skeletons and
parts, segue.store.bodies) beside the bytes of the bodies themselves (what storing each whole would take), the
`budget` warnings, and segue's overhead per turn (the turn's wall time less the time inside the twin).
Token counts are the twin's approximation. Run: python bench/long.py [--turns 60 200] [--window 24000]

`--compaction` runs the long-conversation comparison instead (#38): every setting on the `--window` context window,
so the 200-turn chat passes it: client-side compaction (`Compaction(every=S)`), the vendor's own
(`Compaction(vendor=True, trigger_tokens=12000)`: Anthropic's compact_20260112, emulated by the twin),
`replay_keep=8, replay_step=4` and fitted `"all"`, then the peers' compaction where they run on the twin
(bench/peers/long_peers.py; a peer that cannot gets a line saying why). Per setting: cost and cached share (the
compaction runs' calls included), the largest request, re-explored tool calls (a call repeating, with the same
arguments, one answered in an earlier turn: the twin explores what it cannot see in the request), failed turns, and
for compaction the summary requests' lowest share read from the cache (the vendor's: each `usage.iterations`
compaction entry, whose tokens cost and cached share include). Run: python bench/long.py --compaction [--turns 200]
[--window 24000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx2

from segue import Agent, Compaction, RunStore
from segue.catalog import Catalog
from segue.demo import PROMPT, demo_tools, long_chat
from segue.generated import ToolCallBlock
from segue.providers import AnthropicProvider
from segue_twin import Twin
from segue_twin.transport import TwinAsyncTransport

MODEL = "claude-sonnet-4-6"
SETTINGS: dict[str, dict[str, Any]] = {
    "all": {"replay_last": "all"},
    "last8": {"replay_last": 8},
    "last8 step4": {"replay_last": 8, "replay_step": 4},
    "keep8 step4": {"replay_keep": 8, "replay_step": 4},
    "all, fitted": {"replay_last": "all"},
}


class TimedTwin:
    """The twin behind a transport that adds up the time spent inside it."""

    def __init__(self, twin: Twin) -> None:
        self.twin = twin
        self.seconds = 0.0

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes, **options: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.twin.handle(method, path, headers, body, **options)
        finally:
            self.seconds += time.perf_counter() - start


def window_catalog(folder: Path, tokens: int) -> Catalog:
    row = {
        "model": MODEL,
        "vendor": "anthropic",
        "role": "inference_provider",
        "priority": 100,
        "api_name": MODEL,
        "configuration": {"llm": {"context_window": tokens}},
    }
    layer = folder / "catalog"
    layer.mkdir()
    doc = {"$schema": "../schemas/catalog.schema.json", "version": 2, "model_vendors": [row]}
    (layer / "window.json").write_text(json.dumps(doc))
    return Catalog.load(extra_dirs=[layer], env=False)


def stored_bytes(store: RunStore) -> int:
    (skeletons,) = store.db.execute_sql(
        "SELECT COALESCE(SUM(LENGTH(provider_request)), 0) FROM llm_interactions"
    ).fetchone()
    (parts,) = store.db.execute_sql("SELECT COALESCE(SUM(LENGTH(body)), 0) FROM request_parts").fetchone()
    return int(skeletons) + int(parts)


async def chat(setting: str, turns: int, catalog: Catalog, folder: Path) -> dict[str, Any]:
    timed = TimedTwin(Twin())
    client = timed.twin.anthropic_client(http_client=httpx2.AsyncClient(transport=TwinAsyncTransport(timed)))
    provider = AnthropicProvider(
        MODEL, cache_ttl="1h", thinking={"type": "enabled", "budget_tokens": 1024}, client=client
    )
    store = RunStore(f"sqlite:///{folder}/{setting.replace(' ', '_').replace(',', '')}-{turns}.db")
    agent = Agent(provider, PROMPT, demo_tools(), store, catalog=catalog, max_iterations=8)
    knobs = SETTINGS[setting]
    ids: list[str] = []
    cost = read = total_input = largest = budget = 0.0
    stored: list[int] = []
    whole: list[int] = []
    overhead = 0.0
    for question in long_chat(turns):
        before = timed.seconds
        start = time.perf_counter()
        result = await agent.run(question, runs=ids or None, **knobs)
        overhead += (time.perf_counter() - start) - (timed.seconds - before)
        if result.status != "success":
            raise RuntimeError(f"{setting}: turn {len(ids) + 1} ended {result.status}: {result.error}")
        detail = store.get_run(result.run_id)
        assert detail is not None
        cost += catalog.cost(result.usage, MODEL, "anthropic")
        read += result.usage.cache_read_tokens or 0
        total_input += result.usage.input_tokens
        largest = max(largest, *(c.usage.input_tokens for c in detail.llm_interactions))
        budget += sum(1 for w in (result.replay.warnings if result.replay else []) if w.cause == "budget")
        stored.append(stored_bytes(store))
        whole.append(sum(len(json.dumps(c.provider_request, ensure_ascii=False)) for c in detail.llm_interactions))
        ids.append(result.run_id)
    store.close()
    per_turn = [b - a for a, b in zip([0, *stored], stored, strict=False)]
    return {
        "cost": cost,
        "cached": read / total_input,
        "largest": int(largest),
        "stored10": per_turn[9],
        "stored_last": per_turn[-1],
        "whole10": whole[9],
        "whole_last": whole[-1],
        "stored_total": stored[-1],
        "whole_total": sum(whole),
        "budget": int(budget),
        "overhead_ms": overhead / turns * 1000,
    }


#: The vendor's trigger of the `vendor compact` row (prompt input tokens): half the --window default, so the
#: vendor compacts a few times in 200 turns.
VENDOR_TRIGGER = 12_000
#: The long-conversation comparison (--compaction): each on the --window context window.
WINDOWED: dict[str, dict[str, Any]] = {
    "compact every 4": {"compaction": Compaction(every=4)},
    "compact every 8": {"compaction": Compaction(every=8)},
    "vendor compact": {"compaction": Compaction(vendor=True, trigger_tokens=VENDOR_TRIGGER)},
    "keep8 step4": {"replay_keep": 8, "replay_step": 4},
    "all, fitted": {"replay_last": "all"},
}


async def windowed_chat(setting: str, turns: int, catalog: Catalog, folder: Path) -> dict[str, Any]:
    """One chat of the comparison: what it cost in all (compaction runs included), and how it went."""
    twin = Twin()
    provider = AnthropicProvider(
        MODEL, cache_ttl="1h", thinking={"type": "enabled", "budget_tokens": 1024}, client=twin.anthropic_client()
    )
    store = RunStore(f"sqlite:///{folder}/w-{setting.replace(' ', '_').replace(',', '')}-{turns}.db")
    agent = Agent(provider, PROMPT, demo_tools(), store, catalog=catalog, max_iterations=8)
    ids: list[str] = []
    cost = read = total_input = largest = 0.0
    failed = explored = 0
    answered: set[tuple[str, str]] = set()
    compactions: dict[str, float] = {}  # compaction run id -> the share its request read from the cache
    vendor_reads: list[float] = []  # the share each of the vendor's summary samplings read from the cache
    for question in long_chat(turns):
        result = await agent.run(question, runs=ids or None, **WINDOWED[setting])
        detail = store.get_run(result.run_id)
        assert detail is not None
        calls = [
            (b.name, json.dumps(b.arguments, sort_keys=True))
            for t in detail.traces
            for b in t.message.content
            if isinstance(b, ToolCallBlock)
        ]
        explored += sum(1 for c in calls if c in answered)
        answered.update(calls)
        ref = result.replay.compaction if result.replay is not None else None
        # segue's own compaction is a run of its own; the vendor's (ref.vendor) is in a run this loop counts anyway.
        if ref is not None and ref.vendor is None and ref.run_id not in compactions:
            made = store.get_run(ref.run_id)
            assert made is not None
            usage = made.usage
            cost += catalog.cost(usage, MODEL, "anthropic")
            read += usage.cache_read_tokens or 0
            total_input += usage.input_tokens
            largest = max(largest, *(c.usage.input_tokens for c in made.llm_interactions))
            compactions[ref.run_id] = (usage.cache_read_tokens or 0) / max(1, usage.input_tokens)
        cost += catalog.cost(result.usage, MODEL, "anthropic")  # the vendor's summary samplings included
        read += result.usage.cache_read_tokens or 0
        total_input += result.usage.input_tokens
        for call in detail.llm_interactions:
            largest = max(largest, call.usage.input_tokens)
            for part in call.usage.compaction_iterations or ():  # the vendor's summary: its own prompt read
                read += part.cache_read_tokens or 0
                total_input += part.input_tokens
                largest = max(largest, part.input_tokens)
                vendor_reads.append((part.cache_read_tokens or 0) / max(1, part.input_tokens))
        if result.status != "success":
            failed += 1
        ids.append(result.run_id)
    store.close()
    return {
        "cost": cost,
        "cached": read / total_input,
        "largest": int(largest),
        "explored": explored,
        "failed": failed,
        "compactions": len(compactions) + len(vendor_reads),
        "summary_read": min([*compactions.values(), *vendor_reads], default=None),
    }


def compaction_table(turns: int, window: int, folder: Path, *, peers: bool = True) -> None:
    catalog = window_catalog(folder, window)
    print(f"\n{turns}-turn tool chat, anthropic twin, {MODEL} (thinking, 1h cache), context window {window:,}")
    print(
        f"{'setting':<16} {'cost $':>8} {'cached':>7} {'largest':>8} {'re-explored':>11} {'failed':>6} "
        f"{'summaries':>9} {'lowest summary read':>19}"
    )
    rows = {}
    for setting in WINDOWED:
        r = rows[setting] = asyncio.run(windowed_chat(setting, turns, catalog, folder))
        lowest = f"{r['summary_read']:.1%}" if r["summary_read"] is not None else "-"
        print(
            f"{setting:<16} {r['cost']:>8.4f} {r['cached']:>7.1%} {r['largest']:>8,} {r['explored']:>11} "
            f"{r['failed']:>6} {r['compactions']:>9} {lowest:>19}",
            flush=True,
        )
    keep = rows["keep8 step4"]
    for setting in ("compact every 4", "compact every 8", "vendor compact"):
        r = rows[setting]
        held = (
            r["cost"] <= 0.7 * keep["cost"]
            and r["explored"] <= keep["explored"]
            and (r["summary_read"] or 0) >= 0.8
            and r["failed"] == 0
        )
        print(
            f"  {setting} / keep8 step4: cost {r['cost'] / keep['cost']:.2f}x (target <= 0.7x), re-explored "
            f"{r['explored']} vs {keep['explored']} (target: no more), lowest summary read "
            f"{(r['summary_read'] or 0):.1%} (target >= 80%), failed turns {r['failed']} (target 0): "
            f"{'ok' if held else 'MISSED'}"
        )
    if peers:  # the peers' compaction on the same chat: bench/peers/long_peers.py
        sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
        from long_peers import compaction_lines

        print("\n".join(compaction_lines(turns, VENDOR_TRIGGER, catalog)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, nargs="+", default=[60, 200], help="turns per chat")
    parser.add_argument("--window", type=int, default=24_000, help="context window of the fitted setting")
    parser.add_argument("--no-peers", action="store_true", help="skip PydanticAI's and dendrux's windows")
    parser.add_argument("--compaction", action="store_true", help="the long-conversation comparison (#38) instead")
    args = parser.parse_args()
    logging.getLogger("segue.replay").setLevel(logging.ERROR)
    logging.getLogger("segue.cache").setLevel(logging.ERROR)
    logging.getLogger("segue.run").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.compaction:
            for turns in args.turns:
                compaction_table(turns, args.window, folder, peers=not args.no_peers)
            return
        plain = Catalog.load(env=False)
        fitted = window_catalog(folder, args.window)
        for turns in args.turns:
            print(
                f"\n{turns}-turn tool chat, anthropic twin, {MODEL} (thinking, 1h cache); fitted window {args.window:,}"
            )
            print(
                f"{'setting':<13} {'cost $':>8} {'cached':>7} {'largest':>8} {'budget':>6} "
                f"{'stored/turn t10':>16} {f't{turns}':>7} {'(whole t10':>11} {f't{turns})':>8} "
                f"{'stored MB':>9} {'(whole)':>8} {'overhead/turn':>14}"
            )
            rows = {}
            for setting in SETTINGS:
                catalog = fitted if setting == "all, fitted" else plain
                r = rows[setting] = asyncio.run(chat(setting, turns, catalog, folder))
                print(
                    f"{setting:<13} {r['cost']:>8.4f} {r['cached']:>7.1%} {r['largest']:>8,} {r['budget']:>6} "
                    f"{r['stored10']:>16,} {r['stored_last']:>7,} {r['whole10']:>11,} {r['whole_last']:>8,} "
                    f"{r['stored_total'] / 1e6:>9.3f} {r['whole_total'] / 1e6:>8.3f} {r['overhead_ms']:>11.1f} ms",
                    flush=True,
                )
            step, one, fit = rows["last8 step4"], rows["last8"], rows["all, fitted"]
            growth = rows["all"]["stored_last"] / rows["all"]["stored10"]
            held = step["cost"] / one["cost"] <= 0.8 and step["cached"] >= 0.8 and growth <= 1.5 and fit["budget"] > 0
            print(
                f"  last8 step4 / last8: cost {step['cost'] / one['cost']:.2f}x (target <= 0.8x at 60 turns), "
                f"cached {step['cached']:.1%} (target >= 80%); all: stored per turn t{turns} / t10 "
                f"{growth:.2f}x (target <= 1.5x at 60 turns); all, fitted: every turn completed, {fit['budget']} "
                f"budget warnings (target > 0): {'ok' if held else 'MISSED'}"
            )
            if not args.no_peers:  # the peers' windows on the same chat: bench/peers/long_peers.py
                sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
                from long_peers import peer_lines

                print("\n".join(peer_lines(turns)), flush=True)


if __name__ == "__main__":
    main()
