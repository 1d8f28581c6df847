"""segue side by side with the SDKs a user would pick instead, on segue's twin, every call priced from one ledger.

Contenders: segue (this checkout), PydanticAI (pydantic-ai-slim 2.68.0), the OpenAI Agents SDK (openai-agents
0.24.0) and dendrux 0.4.1, each peer in its own virtual environment under ~/.cache/segue-bench, created on first
use (a peer that cannot be installed is skipped with a message). Each is configured the way its own docs
recommend (bench/peers/_<peer>_turns.py say how), with the same model, thinking budget and cache TTL, and the
demo's prompt, tools and questions (segue.demo). The twin runs in this process behind a loopback HTTP server;
the bench owns its clock (bench/peers/harness.py) and moves it between turns for the pauses scenario.

Every response the twin sends is priced by one function (bench/peers/ledger.py) from the usage on the wire
with segue's catalog; no contender's own accounting is used. Per contender: cost, input tokens, the share read
from the cache, provider calls, re-explored tools (a tool call repeating one answered in an earlier turn of the
conversation), failed turns, and segue's cost over the peer's. Token counts are the twin's approximation.
A peer that cannot play a scenario is shown as "—" with the reason. Output is markdown, ready to paste.

Run: python bench/peers.py [--scenario NAME ...] [--peer pydantic-ai|agents|dendrux ...] [--long-turns N]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

from contenders import PEERS, segue_variants
from harness import host, play
from report import Row, summarise, summary, table
from scenarios import LONG_TURNS, Scenario, all_scenarios

from segue.catalog import Catalog


def run_scenario(scenario: Scenario, peers: list[str], pythons: dict[str, Path | None], catalog: Catalog) -> list[Row]:
    rows = []
    for variant in segue_variants(scenario):
        with host(catalog) as where:
            mine = variant.driver(scenario, where)
            try:
                results, between = play(mine, scenario.turns, where)
            finally:
                mine.close()
        if mine.refused is not None:
            rows.append(Row(contender="segue", setup=variant.setup, segue=True, skipped=mine.refused))
            continue
        rows.append(summarise("segue", variant.setup, scenario.turns, results, between))
    for peer in PEERS:
        if peer.key not in peers:
            continue
        reason = peer.cannot(scenario)
        python = None if reason else pythons.setdefault(peer.name, peer.python())
        if reason is None and python is None:
            reason = f"{peer.package}=={peer.version} could not be installed here"
        if reason is not None or python is None:
            rows.append(Row(contender=peer.label, setup="", segue=False, skipped=reason))
            continue
        tried = []
        for ttl in scenario.peer_ttls or (scenario.ttl,):
            with host(catalog) as where:
                driver = peer.driver(python, scenario, ttl, where)
                try:
                    results, between = play(driver, scenario.turns, where)
                finally:
                    driver.close()
            setup = peer.setup(ttl, scenario.window)
            if len(scenario.peer_ttls) > 1:
                setup += f" (best fixed TTL of {', '.join(scenario.peer_ttls)})"
            tried.append(summarise(peer.label, setup, scenario.turns, results, between))
        rows.append(min(tried, key=lambda r: (r.failed, r.cost if r.cost is not None else float("inf"))))
    return rows


def main() -> None:
    scenarios = all_scenarios()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", action="append", choices=[s.name for s in scenarios], help="repeatable")
    parser.add_argument("--peer", action="append", choices=[p.key for p in PEERS], help="repeatable")
    parser.add_argument("--long-turns", type=int, default=LONG_TURNS, help="turns of the long chat")
    args = parser.parse_args()
    scenarios = all_scenarios(args.long_turns)
    chosen = [s for s in scenarios if not args.scenario or s.name in args.scenario]
    peers = args.peer or [p.key for p in PEERS]
    for name in ("segue", "segue.twin", "httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.ERROR)
    catalog = Catalog.load(env=False)
    versions = ", ".join(f"{p.label}" for p in PEERS if p.key in peers)
    print(f"## segue and its peers on the twin ({datetime.now(UTC):%Y-%m-%d}; {versions})\n")
    print("Every call priced from the twin's own responses with segue's catalog (list prices; twin token counts).\n")
    done: list[tuple[str, list[Row]]] = []
    needed = [p for p in PEERS if p.key in peers and any(p.cannot(s) is None for s in chosen)]
    with ThreadPoolExecutor(max_workers=3) as pool:  # first use on a fresh machine: the peers' envs in parallel
        pythons: dict[str, Path | None] = dict(
            zip([p.name for p in needed], pool.map(lambda p: p.python(), needed), strict=True)
        )
    for scenario in chosen:
        start = time.perf_counter()
        rows = run_scenario(scenario, peers, pythons, catalog)
        print(table(f"{scenario.name}: {scenario.title}", rows), flush=True)
        print(f"({scenario.name} took {time.perf_counter() - start:.0f} s)\n", file=sys.stderr, flush=True)
        done.append((scenario.title, rows))
    print("### Summary\n")
    print(summary(done))


if __name__ == "__main__":
    main()
