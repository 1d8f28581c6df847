"""`cache_ttl="auto"`: the cache lifetime a run writes with, chosen from the conversation's own pauses and the
serving path's catalog prices (pure: no I/O, no vendor names).

Which lifetime is cheaper depends on how long the user pauses between turns. A turn writes its own part of the
prompt (about one turn's worth, T) and the cache entry at its end covers the whole prefix (P, the turns so far).
Writing at lifetime t costs `write[t]` per token of T; if the next pause outlives t, the next turn writes the
whole prefix again instead of reading it, which costs `write[cheapest] - read` more per token of P. With the
conversation's n pauses so far as the evidence (`share[t]`: how many of them outlived t) and turns of about the
same size (P = (n + 1) T, the system prompt and tools counted with the first turn), the expected cost per token
of T is

    cost[t] = write[t] + (n + 1) * share[t] * (write[cheapest] - read)

and auto takes the cheapest t (ties: the cheaper write). With two lifetimes this is a break-even: the longer one
pays once the share of pauses between the two lifetimes reaches

    (write[long] - write[short]) / ((n + 1) * (write[short] - read))

Anthropic's prices (writes 1.25x and 2x input, reads 0.1x) put that at 0.652 / (n + 1): a single pause longer
than 5 minutes (and within the hour) among the first n already passes it (1/n > 0.652/(n + 1)), so auto writes
5m while turns come quickly and 1h from the turn after the first long pause (docs/replay.md, "Cache TTL").

One lifetime per run and per request: every breakpoint of a request carries the chosen TTL, so the vendors' rule
for mixing lifetimes in one request (Anthropic: "a 1-hour cache entry must appear before any 5-minute cache
entries") is kept by construction.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from segue.catalog import Resolved

__all__ = ["AUTO", "AutoTTL", "TtlChoice", "auto_ttl", "choose_ttl", "pauses_between", "ttl_seconds"]

#: The driver setting (`cache_ttl="auto"`) that lets segue choose the cache lifetime per run: segue's word, not
#: a vendor's.
AUTO = "auto"

_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def ttl_seconds(name: str) -> int | None:
    """The lifetime a TTL name spells, as the wire writes it ("5m", "1h", "30m", "12h", "24h"); None for a name
    that states no duration ("in_memory")."""
    m = _DURATION.match(name)
    return int(m.group(1)) * _UNIT[m.group(2)] if m else None


def pauses_between(spans: Sequence[tuple[float, float | None]], now: float) -> tuple[float, ...]:
    """Seconds between a conversation's turns: from each run's end to the next one's start, and from the last
    one's end to `now` (the run being planned). `spans` are the replayed runs' (start, end) in conversation
    order; a run without an end, or a negative gap (runs given out of order), tells nothing and is skipped."""
    out: list[float] = []
    starts = [start for start, _ in spans[1:]] + [now]
    for (_, end), start in zip(spans, starts[: len(spans)], strict=True):
        if end is not None and start >= end:
            out.append(start - end)
    return tuple(out)


@attrs.frozen(kw_only=True)
class TtlChoice:
    """The lifetime chosen for one run and why (the text of the run's `ttl-chosen` note)."""

    ttl: str
    reason: str


@attrs.frozen(kw_only=True)
class AutoTTL:
    """What `auto` needs of a serving path: its lifetimes (name, seconds, write price), shortest first, and the
    read price, all from the catalog."""

    label: str
    lifetimes: tuple[tuple[str, int, float], ...]
    read: float

    def choose(self, pauses: Sequence[float]) -> TtlChoice:
        return choose_ttl(self, pauses)


def auto_ttl(resolved: Resolved) -> AutoTTL:
    """The path's terms for `cache_ttl="auto"`, or ValueError naming what the catalog lacks: at least two
    lifetimes in `llm.cache_ttls`, each spelling a duration, each priced in `pricing.cache_write`, and a
    `pricing.cache_read` price."""
    offered = resolved.cache_ttls
    fix = "configure one of them explicitly, or price the path in a catalog layer"
    if len(offered) < 2:
        hint = (
            f"pass cache_ttl={offered[0]!r}" if offered else "pass cache_ttl=None, or name the path's TTLs in a layer"
        )
        raise ValueError(
            f"cache_ttl='auto' chooses between cache lifetimes, but {resolved.label} offers {offered or 'none'} "
            f"(catalog llm.cache_ttls); {hint}"
        )
    prices = resolved.pricing
    if prices is None or prices.cache_read is None:
        raise ValueError(
            f"cache_ttl='auto' weighs {resolved.label}'s cache prices, but the catalog has no "
            f"{'input/output' if prices is None else 'pricing.cache_read'} price for it; {fix} ({offered})"
        )
    lifetimes = []
    for name in offered:
        seconds = ttl_seconds(name)
        if seconds is None:
            raise ValueError(
                f"cache_ttl='auto' compares lifetimes, but {resolved.label}'s TTL {name!r} (llm.cache_ttls) states "
                f"no duration; {fix} ({offered})"
            )
        if name not in prices.cache_write:
            raise ValueError(
                f"cache_ttl='auto' weighs write prices, but the catalog has no pricing.cache_write[{name!r}] for "
                f"{resolved.label}; {fix} ({offered})"
            )
        lifetimes.append((name, seconds, prices.cache_write[name]))
    lifetimes.sort(key=lambda x: x[1])
    return AutoTTL(label=resolved.label, lifetimes=tuple(lifetimes), read=prices.cache_read)


def choose_ttl(terms: AutoTTL, pauses: Sequence[float]) -> TtlChoice:
    """The cheapest lifetime for the next pause, judged by the conversation's pauses so far (module docstring)."""
    n = len(pauses)
    cheapest = min(w for _, _, w in terms.lifetimes)
    rewrite = max(cheapest - terms.read, 0.0)

    def cost(life: tuple[str, int, float]) -> tuple[float, float]:
        outlived = sum(1 for p in pauses if p > life[1])
        share = outlived / n if n else 0.0
        return (life[2] + (n + 1) * share * rewrite, life[2])

    best = min(terms.lifetimes, key=cost)
    if not n:
        why = "no pause seen yet (the conversation's first turn)"
    else:
        longest = max(pauses)
        counts = ", ".join(f"{sum(1 for p in pauses if p > s)} outlived {name}" for name, s, _ in terms.lifetimes)
        why = f"{n} pause(s) seen, the longest {_minutes(longest)} ({counts})"
    shown = "; ".join(f"{life[0]} {cost(life)[0]:.2f}" for life in terms.lifetimes)
    return TtlChoice(
        ttl=best[0],
        reason=f"cache_ttl auto chose {best[0]!r} on {terms.label}: {why}; expected $/M per token this turn writes: "
        f"{shown}",
    )


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"
