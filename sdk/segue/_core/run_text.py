"""Run records read as one line for people: the replay summary, and the question a run list shows."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from segue.generated import ReplaySummary

#: How much of a run's input a run list shows.
QUESTION_CHARS = 200


def replay_text(summary: ReplaySummary) -> str:
    """E.g. "replayed 3 runs (2 in full, 1 as question + answer), reasoning kept for 2, 1 warning: cross-vendor
    (run 01J...)"."""
    full, text = len(summary.runs_full), len(summary.runs_text)
    runs = full + text
    parts = [f"replayed {runs} run{'' if runs == 1 else 's'}"]
    if full and text:
        parts[0] += f" ({full} in full, {text} as question + answer)"
    elif text:
        parts[0] += " as question + answer"
    if summary.compaction is not None:
        c = summary.compaction
        after = (
            f"compaction {c.run_id} (the summary of the first {c.runs} runs, {c.first} to {c.last})"
            if c.vendor is None
            else f"{c.vendor}'s compaction block in run {c.run_id} (standing for the first {c.runs} runs, {c.first} "
            f"to {c.last})"
        )
        parts[0] = f"replayed {after}, then {parts[0][len('replayed ') :]} after it"
    if summary.reasoning_kept or summary.reasoning_dropped:
        parts.append(f"reasoning kept for {len(summary.reasoning_kept)}")
    warnings = summary.warnings
    if warnings:
        shown = "; ".join(f"{w.cause} (run {w.run_id})" for w in warnings[:3])
        more = f"; {len(warnings) - 3} more" if len(warnings) > 3 else ""
        parts.append(f"{len(warnings)} warning{'' if len(warnings) == 1 else 's'}: {shown}{more}")
    return ", ".join(parts)


def question(user_input: str, limit: int = QUESTION_CHARS) -> str:
    """A run's own input on one line, cut to `limit` characters (… marks the cut)."""
    line = " ".join(user_input.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def other_tenants(
    tenant: str | None, tenants: Sequence[tuple[str, int]], name: Callable[[str], str] = str
) -> tuple[str, str] | None:
    """Where an empty run list's runs are: (e.g. "'acme' (12 runs), 'demo' (5 runs)", the first of them) for the
    tenants other than `tenant` (at most five named, then "and N more"); None when no other tenant has runs.
    `name` renders a tenant id for the surface (the CLI strips terminal controls)."""
    others = [(t, n) for t, n in tenants if t != tenant]
    if not others:
        return None
    shown = ", ".join(f"{name(t)!r} ({n:,} run{'s' if n != 1 else ''})" for t, n in others[:5])
    more = f" and {len(others) - 5} more" if len(others) > 5 else ""
    return shown + more, name(others[0][0])
