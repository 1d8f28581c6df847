"""How the `segue` command shows runs on a terminal: colour only on a terminal, control characters shown rather
than obeyed, aligned tables, and the text forms of `segue runs show` and `segue runs explain`."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from segue.generated import PrewarmRecord, RunDetail, RunExplanation, RunSummary, Usage

if TYPE_CHECKING:
    from segue.apps.dashboard.views import CostFn


class Style:
    """ANSI colour only when stdout is a terminal (and NO_COLOR is unset)."""

    CODES: ClassVar[dict[str, str]] = {
        "green": "32",
        "red": "31",
        "yellow": "33",
        "magenta": "35",
        "dim": "2",
        "bold": "1",
    }
    STATUS: ClassVar[dict[str, str]] = {
        "success": "green",
        "error": "red",
        "running": "yellow",
        "waiting_approval": "yellow",
    }

    def __init__(self) -> None:
        self.enabled = sys.stdout.isatty() and "NO_COLOR" not in os.environ

    def __call__(self, text: str, colour: str | None) -> str:
        if not self.enabled or colour is None:
            return text
        return f"\033[{self.CODES[colour]}m{text}\033[0m"

    def status(self, status: str) -> str:
        return self(status, self.STATUS.get(status, "magenta"))


def _printable(c: str) -> bool:
    code = ord(c)
    return c in "\n\t" or (code >= 0x20 and not 0x7F <= code < 0xA0)


def clean(text: str, width: int | None = None) -> str:
    """Text from users, tools or models, safe for a terminal: control characters are shown, not obeyed."""
    out = "".join(c if _printable(c) else f"\\x{ord(c):02x}" for c in text)
    if width is not None:
        out = " ".join(out.split())
        if len(out) > width:
            out = out[: width - 1] + "…"
    return out


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], colours: Sequence[Sequence[str | None]]) -> str:
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    style = Style()
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row, colour in zip(rows, colours, strict=True):
        cells = [style(c.ljust(w), k) for c, w, k in zip(row, widths, colour, strict=True)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _block_line(block: Any) -> str:
    from segue.generated import CompactionBlock, ImageBlock, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock

    if isinstance(block, TextBlock):
        return clean(block.text, 160)
    if isinstance(block, ToolCallBlock):
        return f"call {clean(block.name)}({clean(json.dumps(block.arguments, ensure_ascii=False), 120)})"
    if isinstance(block, ToolResultBlock):
        flag = " ERROR" if block.is_error else ""
        return f"result{flag} [{clean(block.tool_call_id)}]: {clean(block.content, 140)}"
    if isinstance(block, ReasoningBlock):
        return f"reasoning ({clean(block.vendor)} {clean(block.format)}, {len(block.text or '')} chars)"
    if isinstance(block, ImageBlock):
        return "[image]"
    if isinstance(block, CompactionBlock):
        return f"compaction ({clean(block.vendor)}): {clean(block.content or '(opaque)', 140)}"
    return clean(str(block), 120)


def _usage_line(u: Usage) -> str:
    from segue._core.usage import cache_parts

    parts = cache_parts(u)
    return (
        f"input {count(u.input_tokens)} (cache read {count(parts.read)}, cache write {count(parts.write)}, uncached "
        f"{count(parts.uncached)}), output {count(u.output_tokens)}, cache-read share {share(parts.read_share)}"
    )


def show_text(run: RunDetail, facts: Sequence[str] = ()) -> str:
    """The text form of `segue runs show`; `facts` are lines the caller adds after the usage (cost, totals)."""
    from segue._core.usage import cache_parts
    from segue.cache.collapse import verdict_text
    from segue.cache.explain import is_fragment_text
    from segue.generated import TextBlock

    style = Style()
    out = [
        f"{style('run', 'bold')} {run.run_id}  {style.status(run.status)}",
        f"tenant {clean(run.tenant_id)} · agent {clean(run.agent_name)} · model {clean(run.model)}"
        + (f" @ {clean(run.vendor)}" if run.vendor else "")
        + (f" · answered by {clean(run.served_model)}" if run.served_model else ""),
        f"started {run.created_at}"
        + (f" · finished {run.finished_at}" if run.finished_at else "")
        + (f" · stopped: {run.stop_reason}" if run.stop_reason else ""),
    ]
    for label, value in (("continued from", run.continued_from), ("retry of", run.retry_of)):
        if value:
            out.append(f"{label} {value}")
    if run.error:
        out.append(style(f"error: {clean(run.error)}", "red"))
    out += [
        f"input: {clean(run.input, 200)}",
        f"answer: {clean(run.answer or '—', 200)}",
        f"usage: {_usage_line(run.usage)}",
        *facts,
    ]
    for note in run.notes or ():
        times = f", {note.count} times" if note.count > 1 else ""
        out.append(style(f"note [{note.kind}] (iteration {note.iteration}{times}): {clean(note.message)}", "yellow"))
    layout = run.meta.segue_layout if run.meta is not None else None
    if layout is not None:
        at = f" at iteration {layout.iteration}" if layout.iteration else ""
        out.append(f"layout: {layout.mode or 'undecided'} ({clean(layout.reason or '')}){at}")
    made = run.meta.segue_compaction if run.meta is not None else None
    if made is not None:
        out.append(f"compaction: this run's answer summarizes the first {made.runs} runs ({made.first} to {made.last})")
    if run.replay is not None:
        r = run.replay
        out.append("replay:")
        if r.compaction is not None:
            comp = r.compaction
            what = (
                f"{comp.run_id}, the summary of the first {comp.runs} runs"
                if comp.vendor is None
                else f"{clean(comp.vendor)}'s block in run {comp.run_id}'s response, standing for the first "
                f"{comp.runs} runs"
            )
            out.append(f"  compaction: {what} ({comp.first} to {comp.last}); its call: segue runs show {comp.run_id}")
        out.append(f"  in full: {', '.join(r.runs_full) or '—'}")
        out.append(f"  as question + answer: {', '.join(r.runs_text) or '—'}")
        out.append(f"  reasoning kept: {', '.join(r.reasoning_kept) or '—'}")
        out.append(f"  reasoning dropped: {', '.join(r.reasoning_dropped) or '—'}")
        out += [f"  warning {w.run_id} [{w.cause}]: {clean(w.message)}" for w in r.warnings]
    if run.llm_interactions:
        headers = [
            "ITER",
            "MODEL",
            "INPUT",
            "CACHE READ",
            "CACHE WRITE",
            "UNCACHED",
            "OUTPUT",
            "LATENCY",
            "VENDOR SAYS",
        ]
        rows = []
        for c in run.llm_interactions:
            parts = cache_parts(c.usage)
            rows.append(
                [
                    str(c.iteration),
                    clean(c.model, 28) + (" (twin)" if c.served_by == "twin" else ""),
                    count(c.usage.input_tokens),
                    count(parts.read),
                    count(parts.write),
                    count(parts.uncached),
                    count(c.usage.output_tokens),
                    f"{c.latency_ms:,.0f} ms",
                    verdict_text(c.cache_verdict) if c.cache_verdict is not None else "—",
                ]
            )
        out += ["", "iterations:", table(headers, rows, [[None] * 9] * len(rows))]
    out += ["", "traces:"]
    for t in run.traces:
        fragment = any(isinstance(b, TextBlock) and is_fragment_text(b.text) for b in t.message.content)
        tag = " (runtime-state fragment)" if fragment else ""
        for i, block in enumerate(t.message.content):
            head = f"  [{t.index}] iter {t.iteration if t.iteration is not None else '-'} {t.message.role}{tag}:"
            out.append(f"{head if i == 0 else ' ' * len(head)} {_block_line(block)}")
    if run.tool_calls:
        out += ["", "tool calls:"]
        for call in run.tool_calls:
            flag = style(" ERROR", "red") if call.is_error else ""
            args = clean(json.dumps(call.arguments, ensure_ascii=False), 100)
            out.append(f"  iter {call.iteration} {clean(call.name)}({args}){flag} {call.duration_ms:,.0f} ms")
            out.append(f"    → {clean(call.result or '—', 160)}")
    return "\n".join(out)


def explain_text(run: RunDetail, explanation: RunExplanation) -> str:
    """The text form of `segue runs explain`: one row per request, then why each stopped reusing the last one."""
    from segue.cache.explain import BREAK_CAUSES, prefix_share
    from segue.cache.reasons import verdict_line

    out: list[str] = []
    style = Style()
    out.append(
        f"{style('run', 'bold')} {run.run_id}" + (f" (continues {run.continued_from})" if run.continued_from else "")
    )
    if explanation.layout:
        out.append(f"layout: {explanation.layout.mode or 'undecided'}")
    if not explanation.iterations:
        out.append("the run made no provider request")
    headers = ["ITER", "COMPARED WITH", "REUSED", "OF", "SHARE", "CACHE READ", "INPUT", "CAUSE"]
    rows, colours = [], []
    for it in explanation.iterations:
        before = f"{it.previous_run_id} #{it.previous_iteration}" if it.previous_run_id else "—"
        rows.append(
            [
                str(it.iteration),
                before,
                f"{it.prefix_bytes:,} B",
                f"{it.previous_bytes:,} B" if it.previous_bytes is not None else "—",
                share(prefix_share(it)),
                count(it.usage.cache_read_tokens),
                count(it.usage.input_tokens),
                it.cause,
            ]
        )
        colour = "red" if it.cause in BREAK_CAUSES else "green" if it.cause == "extends" else "dim"
        colours.append([*([None] * 7), colour])
    if rows:
        out.append(table(headers, rows, colours))
    for it in explanation.iterations:
        said = verdict_line(it, with_reason=False)
        if said is not None:  # the vendor's own verdict first, segue's reasoning beside it
            out.append(f"  {it.iteration}: {clean(said)}")
            out.append(f"     segue's comparison: {clean(it.reason)}")
        else:
            out.append(f"  {it.iteration}: {clean(it.reason)}")
        if it.divergence is not None and it.cause in BREAK_CAUSES:
            d = it.divergence
            out.append(f"     at byte {d.byte_offset:,}, {d.path}: was {clean(d.previous or '∅', 70)}")
            out.append(f"     {' ' * len(f'at byte {d.byte_offset:,}, {d.path}:')} now {clean(d.current or '∅', 70)}")
        if it.note:
            out.append(f"     note: {it.note}")
    return "\n".join(out)


def prewarm_text(run_id: str, prewarm: PrewarmRecord) -> str:
    """What `runs show` says of a prewarm's id: it is not a run, and what it warmed."""
    call = prewarm.interaction
    return (
        f"{run_id} is a prewarm, not a run: {call.vendor}/{call.model} at {prewarm.created_at[:19]}, "
        f"{call.usage.cache_write_tokens or 0:,} tokens written to the cache for the runs "
        f"{', '.join(prewarm.runs) or '(none)'}; it has no answer or traces to show"
    )


#: The width `segue runs list` fits its rows to when stdout is not a terminal (a pipe, a file, a CI log).
LIST_WIDTH = 120
_RUN_ID = 26  # a ULID


def model_shown(run: RunSummary) -> str:
    """The model asked for, and the one that answered when another did ("asked→served")."""
    return f"{run.model}→{run.served_model}" if run.served_model else run.model


def note_kinds(run: RunSummary) -> str:
    """The run's note kinds, in the order first reported."""
    return ", ".join(n.kind for n in run.notes or ())


def runs_table(runs: Sequence[RunSummary], price: CostFn, *, wide: bool, width: int | None = None) -> str:
    """`segue runs list`: one line per run. By default the columns a reader scans (the question gets what is left
    of `width`; a turn that continues another run is marked "↳"); agent and tenant appear only when the rows
    differ in them. `wide`: every column in full, the tenant and the continued run id included."""
    from segue._core.usage import cache_parts
    from segue.apps.dashboard.views import money, run_cost, shown_cost

    statuses = [[None, Style.STATUS.get(r.status, "magenta")] for r in runs]
    if wide:
        headers = [
            "RUN", "STATUS", "TENANT", "AGENT", "MODEL", "STARTED", "INPUT", "OUTPUT", "CACHE READ", "COST",
            "STOP", "NOTES", "CONTINUES", "PARENT", "QUESTION",
        ]  # fmt: skip
        rows = [
            [
                r.run_id,
                r.status,
                clean(r.tenant_id, 20),
                clean(r.agent_name, 24),
                clean(model_shown(r), 40),
                r.created_at[:19].replace("T", " "),
                count(r.usage.input_tokens),
                count(r.usage.output_tokens),
                share(cache_parts(r.usage).read_share),
                shown_cost(r, price)[0],
                r.stop_reason or "",
                note_kinds(r),
                r.continued_from or "",
                r.parent_run_id or "",
                clean(r.question or "", 60),
            ]
            for r in runs
        ]
        return table(headers, rows, [[*s, *([None] * 13)] for s in statuses])

    def cost(run: RunSummary) -> str:
        if run.served_by != "twin":
            return shown_cost(run, price)[0]
        charged = run_cost(run, price)[0]  # a Failover member that was a vendor; the twin's part cost nothing
        return f"{money(charged)} + twin" if charged else "$0 (twin)"

    columns: list[tuple[str, list[str]]] = [
        ("RUN", [r.run_id for r in runs]),
        ("STATUS", [r.status for r in runs]),
    ]
    if len({r.tenant_id for r in runs}) > 1:
        columns.append(("TENANT", [clean(r.tenant_id, 12) for r in runs]))
    agents = len({r.agent_name for r in runs}) > 1
    if agents:
        columns.append(("AGENT", [clean(r.agent_name, 12) for r in runs]))
    columns += [
        ("MODEL", [clean(model_shown(r), 16 if agents else 18) for r in runs]),
        ("STARTED", [r.created_at[5:16].replace("T", " ") for r in runs]),
        ("INPUT", [count(r.usage.input_tokens) for r in runs]),
        ("CACHED", [share(cache_parts(r.usage).read_share) for r in runs]),
        ("COST", [cost(r) for r in runs]),
    ]
    # How the runs stopped and what they noted, where any did: a cut answer or another model is worth a column.
    if any(r.stop_reason not in (None, "end", "tool_use") for r in runs):
        columns.append(("STOP", [r.stop_reason or "" for r in runs]))
    if any(r.notes for r in runs):
        columns.append(("NOTES", [clean(note_kinds(r), 24) for r in runs]))
    used = sum(max(len(h), *(len(v) for v in values)) + 2 for h, values in columns)
    room = max(16, (width or LIST_WIDTH) - used)
    questions = [
        "  ⤷ " + clean(f"{r.agent_name}: {r.question or ''}", room - 4)
        if r.parent_run_id
        else "↳ " + clean(r.question or "", room - 2)
        if r.continued_from
        else clean(r.question or "", room)
        for r in runs
    ]
    columns.append(("QUESTION", questions))
    headers = [h for h, _ in columns]
    rows = [[values[i] for _, values in columns] for i in range(len(runs))]
    return table(headers, rows, [[*s, *([None] * (len(columns) - 2))] for s in statuses])
