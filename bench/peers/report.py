"""The numbers bench/peers.py prints per contender, from the one ledger (bench/peers/ledger.py), as markdown."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from harness import Turn, TurnResult
from ledger import Call


@attrs.frozen(kw_only=True)
class Row:
    """One contender on one scenario; `skipped` is the reason it did not play (shown as "—")."""

    contender: str
    setup: str
    segue: bool
    cost: float | None = None
    input_tokens: int = 0
    cached: float = 0.0
    calls: int = 0
    reexplored: int = 0
    failed: int = 0
    turns: int = 0
    first_error: str | None = None
    skipped: str | None = None

    @property
    def complete(self) -> bool:
        return self.skipped is None and self.failed == 0


def reexplored(turns: Sequence[Turn], results: Sequence[TurnResult]) -> int:
    """Tool calls that repeat (same tool, same arguments) one answered in an earlier turn of the conversation."""
    answered: dict[int, set[tuple[str, str]]] = {}
    count = 0
    for t, r in zip(turns, results, strict=True):
        earlier = answered.setdefault(t.conversation, set())
        mine = {c for call in r.calls for c in call.tool_calls}
        count += sum(1 for call in r.calls for c in call.tool_calls if c in earlier)
        earlier |= mine
    return count


def summarise(
    contender: str, setup: str, turns: Sequence[Turn], results: Sequence[TurnResult], between: Sequence[Call]
) -> Row:
    calls = [c for r in results for c in r.calls] + list(between)
    priced = [c for c in calls if c.usage is not None]
    unknown = any(c.cost is None for c in priced)
    total_in = sum(c.usage.input_tokens for c in priced if c.usage)
    read = sum(c.usage.cache_read_tokens or 0 for c in priced if c.usage)
    errors = [r.error for r in results if not r.ok]
    return Row(
        contender=contender,
        setup=setup,
        segue=contender == "segue",
        cost=None if unknown else sum(c.cost or 0.0 for c in priced),
        input_tokens=total_in,
        cached=read / total_in if total_in else 0.0,
        calls=len(calls),
        reexplored=reexplored(turns, results),
        failed=len(errors),
        turns=len(results),
        first_error=errors[0] if errors else None,
    )


def _ratio(best_segue: Row | None, row: Row) -> str:
    if row.segue or best_segue is None or best_segue.cost is None or not row.complete or not row.cost:
        return "" if row.segue else "—"
    return f"{best_segue.cost / row.cost:.2f}"


def best_segue(rows: Sequence[Row]) -> Row | None:
    done = [r for r in rows if r.segue and r.complete and r.cost is not None]
    return min(done, key=lambda r: r.cost or 0.0) if done else None


def table(title: str, rows: Sequence[Row]) -> str:
    best = best_segue(rows)
    lines = [
        f"### {title}",
        "",
        "| contender | setup | cost $ | input tokens | cached | calls | re-explored | failed turns | segue / peer |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for r in rows:
        if r.skipped is not None:
            lines.append(f"| {r.contender} | {r.setup or '—'} | — | — | — | — | — | — | — |")
            notes.append(f"{r.contender}: {r.skipped}")
            continue
        cost = f"{r.cost:.4f}" if r.cost is not None else "?"
        failed = f"{r.failed}/{r.turns}"
        lines.append(
            f"| {r.contender} | {r.setup} | {cost} | {r.input_tokens:,} | {r.cached:.0%} | {r.calls} | "
            f"{r.reexplored} | {failed} | {_ratio(best, r)} |"
        )
        if r.first_error:
            notes.append(f"{r.contender} ({r.setup}): first failed turn: {_gist(r.first_error)}")
    if best is not None and sum(1 for r in rows if r.segue) > 1:
        notes.append(f"segue / peer uses segue's cheapest complete setting ({best.setup})")
    lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines).rstrip() + "\n"


def _gist(error: str) -> str:
    """The vendor's message of an error that quotes the response body, else the error, in at most 240 chars."""
    for marker in ("'message': '", '"message": "'):
        if marker in error:
            error = error.split(marker, 1)[1].rstrip("'\"}) ")
            break
    return error if len(error) <= 240 else error[:239] + "…"


def summary(results: Sequence[tuple[str, Sequence[Row]]]) -> str:
    """One line per scenario: segue's cheapest complete setting, then each peer with segue / peer in bold."""
    peers = list(dict.fromkeys(r.contender for _, rows in results for r in rows if not r.segue))
    lines = ["| scenario | segue | " + " | ".join(peers) + " |", "|---|---|" + "---|" * len(peers)]
    for title, rows in results:
        best = best_segue(rows)
        several = sum(1 for r in rows if r.segue) > 1
        cells = [(_short(best) + (f" ({best.setup})" if several else "")) if best else "did not complete"]
        for name in peers:
            row = next((r for r in rows if r.contender == name), None)
            if row is None:
                cells.append("")
                continue
            ratio = _ratio(best, row)
            cells.append(_short(row) + (f" (**{ratio}**)" if ratio not in ("", "—") else ""))
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _short(r: Row) -> str:
    if r.skipped is not None:
        return "—"
    if r.failed:
        return f"{r.turns - r.failed}/{r.turns} turns, {r.failed} fail"
    cost = f"${r.cost:.4f}" if r.cost is not None else "cost unknown"
    return f"{cost}, {r.cached:.0%} read"
