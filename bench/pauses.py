"""The demo's 5-turn chat with pauses between the turns, on the twin's clock: which cache lifetime costs least.

The chat is the demo's shop analyst (its prompt, its three tools, its five questions, Anthropic claude-sonnet-4-6,
each turn a run that replays the earlier ones with runs=). Thinking is off by default: Anthropic refuses a
prewarm (max_tokens 0) of a prefix with thinking on, so the prewarm variants need it off; `--thinking` runs the
variants without prewarm with thinking on. Between turns the twin's clock (and
the store's, so the runs' times show the same pauses) moves on by the given minutes; nothing sleeps. Variants:

- `5m`, `1h`: the driver's fixed `cache_ttl`;
- `auto`: `cache_ttl="auto"`, chosen per run from the conversation's pauses (segue.cache.ttl);
- `+ prewarm` (`prewarm=True`): while the user is away, the app calls `agent.prewarm(runs=...)` a minute
  (`keep_alive_margin`) before the entry the last turn wrote would expire (an app that knows its user is still
  in the session: the chat window is open), so the entry is read, and so kept alive, instead of expiring. A
  5m entry is pinged every 4 minutes of a pause; a 1h entry needs no ping in pauses under 59 minutes. The
  prewarms' cost is counted in the chat's.

Every call is priced with segue's catalog (`Catalog.cost`) from the twin's usage. `run_segue_pauses` is the one
function bench/peers.py calls for segue's side of its pauses scenario.

Run: python bench/pauses.py [--pauses 3 12 2 20] [--sequence]   (--sequence adds the 2-20 minute sequence)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal
from unittest import mock

from segue import Agent, RunStore
from segue.cache.ttl import ttl_seconds
from segue.catalog import Catalog
from segue.demo import PROMPT, QUESTIONS, demo_tools
from segue.generated import Usage
from segue.providers import AnthropicProvider
from segue.run.conversation import add_usage
from segue_twin import Twin

MODEL = "claude-sonnet-4-6"
VENDOR = "anthropic"
THINKING = {"type": "enabled", "budget_tokens": 1024}
#: The pauses of issue 28's scenario, in minutes, and a sequence of 2 to 20 minute pauses.
PAUSES: tuple[float, ...] = (3, 12, 2, 20)
SEQUENCE: tuple[float, ...] = (2, 20, 4, 15, 6, 20, 2, 10, 3)
#: Turns that come quickly: no pause outlives the short lifetime.
QUICK: tuple[float, ...] = (1, 3, 2, 4)
TTLS: tuple[str, ...] = ("5m", "1h", "auto")
Ttl = Literal["5m", "1h", "auto"]


class Clock:
    """One fake clock for the twin (cache expiry) and the store (the runs' times, which auto reads)."""

    def __init__(self, start: float = 1_790_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def on_store(self) -> contextlib.AbstractContextManager[None]:
        return store_stamped_by(self)


@contextlib.contextmanager
def store_stamped_by(now: Callable[[], float]) -> Iterator[None]:
    """The store stamps runs with `utc_now()`, and `cache_ttl="auto"` reads the pauses from those stamps: a bench
    whose twin runs on a clock of its own stamps the runs by that clock (`now()`, seconds), so that a pause the
    twin's cache sees is a pause for segue too."""

    def iso() -> str:
        return datetime.fromtimestamp(now(), UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    with (
        mock.patch("segue.store.records.utc_now", iso),
        mock.patch("segue.store.run_store.utc_now", iso),
        mock.patch("segue.store.prewarms.utc_now", iso),
    ):
        yield


async def _chat(
    ttl: Ttl, prewarm: bool, pauses: Sequence[float], questions: Sequence[str], keep_alive_margin: float, thinking: bool
) -> dict[str, Any]:
    clock = Clock()
    twin = Twin(clock=clock)
    catalog = Catalog.load()
    provider = AnthropicProvider(
        MODEL, cache_ttl=ttl, thinking=THINKING if thinking else None, client=twin.anthropic_client()
    )
    store = RunStore("sqlite:///:memory:")
    agent = Agent(provider, PROMPT, demo_tools(), store, name="shop-analyst", max_iterations=8)
    total = Usage(input_tokens=0, output_tokens=0)
    cost = warm_cost = 0.0
    runs: list[str] = []
    chosen: list[str] = []
    prewarms = 0
    with clock.on_store():
        for turn, question in enumerate(questions):
            if turn:
                left = pauses[turn - 1] * 60.0
                # A keep-alive ping just before the entry the last turn wrote would expire (its lifetime less
                # `keep_alive_margin`), for as long as the user is away.
                every = (ttl_seconds(chosen[-1]) or 0) - keep_alive_margin * 60.0
                while prewarm and every > 0 and left > every:
                    clock.now += every
                    left -= every
                    warmed = await agent.prewarm(runs=runs)
                    prewarms += 1
                    total = add_usage(total, warmed.usage)
                    warm_cost += catalog.cost(warmed.usage, MODEL, VENDOR)
                clock.now += left
            result = await agent.run(question, runs=runs or None)
            if result.status != "success":
                raise RuntimeError(f"turn {turn + 1} ended {result.status}: {result.error}")
            runs.append(result.run_id)
            total = add_usage(total, result.usage)
            cost += catalog.cost(result.usage, MODEL, VENDOR)
            chosen.append(written_ttl(result, ttl))
            clock.now += 20.0  # the turn's own time: its calls, the tools
    return {
        "ttl": ttl,
        "prewarm": prewarm,
        "thinking": thinking,
        "pauses": list(pauses[: len(questions) - 1]),
        "turns": len(questions),
        "chosen": chosen,
        "prewarms": prewarms,
        "cost": cost + warm_cost,
        "prewarm_cost": warm_cost,
        "input_tokens": total.input_tokens,
        "cache_read": total.cache_read_tokens or 0,
        "cache_write": total.cache_write_tokens or 0,
        "cache_write_by_ttl": dict(total.cache_write_tokens_by_ttl or {}),
        "cached_share": (total.cache_read_tokens or 0) / total.input_tokens if total.input_tokens else 0.0,
    }


def written_ttl(result: Any, ttl: str) -> str:
    """The lifetime the run wrote with: its `ttl-chosen` note under auto, else the fixed one."""
    for note in result.notes or []:
        if note.kind == "ttl-chosen":
            return str(note.message.split("'")[1])
    return ttl


def run_segue_pauses(
    ttl: Ttl,
    prewarm: bool,
    pauses: Sequence[float] = PAUSES,
    *,
    questions: Sequence[str] = QUESTIONS,
    keep_alive_margin: float = 1.0,
    thinking: bool = False,
) -> dict[str, Any]:
    """segue's chat with `pauses` (minutes, one per gap between turns) on a fresh twin and store: its cost in
    dollars (catalog prices, prewarms included), tokens, cached share, and the TTL each turn wrote with.
    More pauses than the demo's four gaps repeat its questions. `prewarm` needs `thinking` off (Anthropic)."""
    if prewarm and thinking:
        raise ValueError("prewarm=True needs thinking=False: Anthropic refuses a prewarm of a prefix with thinking")
    if ttl not in TTLS:
        raise ValueError(f"ttl must be one of {', '.join(TTLS)}, got {ttl!r}")
    if len(pauses) < 1 or any(p < 0 for p in pauses):
        raise ValueError(f"pauses must be minutes >= 0, one per gap between turns, got {list(pauses)}")
    wanted = len(pauses) + 1
    asked = [questions[i % len(questions)] for i in range(wanted)]
    return asyncio.run(_chat(ttl, prewarm, pauses, asked, keep_alive_margin, thinking))


def table(pauses: Sequence[float], thinking: bool = False) -> list[dict[str, Any]]:
    rows = [run_segue_pauses(t, False, pauses, thinking=thinking) for t in TTLS]
    if not thinking:
        rows += [run_segue_pauses(t, True, pauses) for t in ("5m", "auto")]
    return rows


def _print(pauses: Sequence[float], rows: list[dict[str, Any]], thinking: bool) -> None:
    best_fixed = min(r["cost"] for r in rows if r["ttl"] != "auto" and not r["prewarm"])
    shown = f"thinking {'on' if thinking else 'off'}"
    print(f"\npauses (min): {', '.join(f'{p:g}' for p in pauses)}  ({len(pauses) + 1} turns, {MODEL}, {shown})")
    print("| cache_ttl | prewarm | TTL per turn | cost | prewarms | cached share | vs best fixed |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['ttl']} | {'yes' if r['prewarm'] else 'no'} | {' '.join(r['chosen'])} | ${r['cost']:.4f} | "
            f"{r['prewarms']} (${r['prewarm_cost']:.4f}) | {r['cached_share']:.0%} | {r['cost'] / best_fixed:.2f} |"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pauses", type=float, nargs="+", default=list(PAUSES), help="minutes between turns")
    parser.add_argument("--sequence", action="store_true", help="also run the 2-20 minute sequence")
    parser.add_argument("--quick", action="store_true", help="also run quick turns (1-4 minute pauses)")
    parser.add_argument("--thinking", action="store_true", help="thinking on (no prewarm variants)")
    args = parser.parse_args(argv)
    runs = [args.pauses, *([list(SEQUENCE)] if args.sequence else []), *([list(QUICK)] if args.quick else [])]
    for pauses in runs:
        _print(pauses, table(pauses, args.thinking), args.thinking)
    return 0


if __name__ == "__main__":
    sys.exit(main())
