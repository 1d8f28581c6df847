"""What the dashboard pages show, computed from store records (no HTTP, no HTML: the templates render these).

Everything here is plain data for jinja2, which escapes it on output. Stored requests of any vendor shape
(Anthropic, OpenAI Responses, Chat Completions, segue's canonical JSON) are read by segue.wire.stored through the
generated wire parsers; their messages become `MessageView`s of `BlockView`s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

import attrs

from segue._core.run_text import question
from segue._core.usage import cache_parts
from segue._support.readers import Unknown
from segue.apps.dashboard.chart import Chart, bar_chart
from segue.cache.explain import (
    IterationExplanation,
    explain_run,
    is_fragment,
    is_fragment_text,
    miss_cause,
    own_messages_start,
)
from segue.cache.reasons import verdict_line
from segue.catalog.costs import price_ref
from segue.generated import (
    CompactionBlock,
    ContentBlock,
    ImageBlock,
    LayoutMeta,
    LlmInteraction,
    PriceSource,
    ReasoningBlock,
    RunCost,
    RunDetail,
    RunSummary,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from segue.run.conversation import ZERO_USAGE, add_usage
from segue.wire import stored
from segue.wire.stored_message import StoredMessage, of_message

#: Dollars for `usage` on a serving path, or None when no pricing is known (the catalog plugs in here).
CostFn = Callable[[Usage, str, str | None], float | None]
Origin = Literal["replayed", "history", "new"]
BlockKind = Literal["text", "tool_call", "tool_result", "reasoning", "image", "other"]


def no_pricing(usage: Usage, model: str, vendor: str | None) -> float | None:
    """The default cost function: no pricing known, so the dashboard shows "—"."""
    return None


def _cost(cost: CostFn, usage: Usage, model: str, vendor: str | None) -> float | None:
    try:
        return cost(usage, model, vendor)
    except (LookupError, ValueError):
        # A pricing source without a price for this path (e.g. the catalog's CatalogError) means "unknown".
        return None


def recorded_cost(run: RunSummary | RunDetail) -> RunCost | None:
    """The cost segue recorded with the run (each call priced on the path that served it), if it did."""
    if isinstance(run, RunSummary):
        return run.cost
    return run.meta.segue_cost if run.meta is not None else None


def run_cost(run: RunSummary | RunDetail, cost: CostFn) -> tuple[float | None, str]:
    """(dollars or None, where the figure came from): the cost recorded with the run (each call priced from the
    catalog on the path that served it); else `cost` applied to the run's summed usage; else unknown, and why."""
    recorded = recorded_cost(run)
    if recorded is not None and recorded.usd is not None:
        sources = "; ".join(_source(p) for p in recorded.prices)
        return recorded.usd, f"priced when the run was recorded, from {sources}" if sources else "no provider call"
    if run.served_by == "twin":  # the twin charges nothing: the vendor's price of its usage is no cost
        return None, f"unknown: {recorded.missing}" if recorded is not None else "no price recorded"
    usd = _cost(cost, run.usage, run.model, run.vendor)
    if usd is not None:
        return usd, "priced by the dashboard's cost function from the run's total usage"
    if recorded is not None:
        return None, f"unknown: {recorded.missing}"
    return None, "no pricing known for this model"


#: The title of every figure the twin served: whoever reads it must not take it for a vendor's answer or charge.
TWIN_TITLE = "served by segue's twin, an offline emulator: the answer is not a model's and nothing was charged"


def twin_money(emulated: float | None, charged: float | None = None) -> str:
    """A twin-served cost, which cannot be read as a charge: "twin (emulated, $X at the vendor's prices)"; a
    vendor's part (a Failover member that was a vendor) comes first."""
    at = f", {money(emulated)} at the vendor's prices" if emulated is not None else ", no price known"
    return f"{money(charged) + ' + ' if charged else ''}twin (emulated{at})"


def shown_cost(run: RunSummary | RunDetail, cost: CostFn) -> tuple[str, str]:
    """(the cost as shown, where it came from): cost_text(run_cost), or twin_money for a run the twin served."""
    usd, where = run_cost(run, cost)
    if run.served_by != "twin":
        return cost_text(run, usd), where
    recorded = recorded_cost(run)
    return twin_money(recorded.twin_usd if recorded is not None else None, usd), f"{TWIN_TITLE}; {where}"


def _source(p: PriceSource) -> str:
    """A price's source in short: the catalog file's name and row (never a path of the server's machine)."""
    hosted = ", self-hosted: no per-token price" if p.self_hosted else ""
    return f"{p.model}{'@' + p.vendor if p.vendor else ''}: {price_ref(p)}{hosted}"


def price_sources(run: RunSummary | RunDetail) -> list[str]:
    """The long form of each price's source, on request (`segue runs show --sources`): RunCost.sources, the row's
    JSON pointer and its notes (where the numbers came from and when they were read)."""
    recorded = recorded_cost(run)
    return recorded.sources if recorded is not None else []


def self_hosted(run: RunSummary | RunDetail) -> bool:
    """Every call of the run was served by a self-hosted path (catalog pricing.self_hosted): its $0 is that, not
    a price."""
    recorded = recorded_cost(run)
    return recorded is not None and bool(recorded.prices) and all(p.self_hosted for p in recorded.prices)


def cost_text(run: RunSummary | RunDetail, usd: float | None) -> str:
    return "$0 (self-hosted)" if usd == 0 and self_hosted(run) else money(usd)


def call_cost(run: RunDetail, call: LlmInteraction, cost: CostFn) -> str:
    """One call's cost as the run's header words it: the twin's, "$0 (self-hosted)" on a self-hosted path, or
    the price."""
    usd = _cost(cost, call.usage, call.model, call.vendor)
    if call.served_by == "twin":
        return twin_money(usd)
    recorded = recorded_cost(run)
    hosted = recorded is not None and any(p.self_hosted and p.vendor == call.vendor for p in recorded.prices)
    return "$0 (self-hosted)" if usd == 0 and hosted else money(usd)


def money(value: float | None) -> str:
    if value is None:
        return "—"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def share(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def tokens(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


@attrs.frozen(kw_only=True)
class RunRow:
    run_id: str
    status: str
    tenant_id: str
    agent_name: str
    model: str
    vendor: str | None
    started: str
    input_tokens: int
    output_tokens: int
    read_share: str
    cost: str
    cost_title: str
    continued_from: str | None
    question: str
    twin: bool  # segue's twin served it (shown beside the model, and in the cost)
    #: The cost in the run list's narrow column: a twin run's "$X emulated" (the twin badge beside it and the
    #: title say the rest), else the cost as shown.
    brief_cost: str = ""
    #: Why the model stopped in the last response, the model that answered when another did, and the run's notes
    #: as (kind, message).
    stop_reason: str | None = None
    served_model: str | None = None
    notes: tuple[tuple[str, str], ...] = ()


def run_row(run: RunSummary | RunDetail, cost: CostFn) -> RunRow:
    shown, where = shown_cost(run, cost)
    return RunRow(
        run_id=run.run_id,
        status=run.status,
        tenant_id=run.tenant_id,
        agent_name=run.agent_name,
        model=run.model,
        vendor=run.vendor,
        started=run.created_at[:19].replace("T", " "),
        input_tokens=run.usage.input_tokens,
        output_tokens=run.usage.output_tokens,
        read_share=share(cache_parts(run.usage).read_share),
        cost=shown,
        cost_title=where,
        continued_from=run.continued_from,
        question=question(run.input) if isinstance(run, RunDetail) else run.question or "",
        twin=run.served_by == "twin",
        brief_cost=_brief_cost(run, shown),
        stop_reason=run.stop_reason,
        served_model=run.served_model,
        notes=tuple((n.kind, n.message) for n in run.notes or ()),
    )


def _brief_cost(run: RunSummary | RunDetail, shown: str) -> str:
    recorded = recorded_cost(run)
    if run.served_by != "twin" or recorded is None or recorded.twin_usd is None or recorded.usd:
        return shown
    return f"{money(recorded.twin_usd)} emulated"


@attrs.frozen(kw_only=True)
class Totals:
    """A conversation's runs added up: tokens, the cached share of their input, and the cost."""

    runs: int
    usage: Usage
    read_share: str
    cost: str
    cost_title: str


def totals(runs: Sequence[RunSummary | RunDetail], cost: CostFn) -> Totals:
    usage, usd, unknown, emulated = ZERO_USAGE, 0.0, [], None
    for run in runs:
        usage = add_usage(usage, run.usage)
        each, where = run_cost(run, cost)
        if each is None:
            unknown.append(f"{run.run_id} ({where})")
        else:
            usd += each
        recorded = recorded_cost(run) if run.served_by == "twin" else None
        if recorded is not None and recorded.twin_usd is not None:
            emulated = (emulated or 0.0) + recorded.twin_usd
    title = f"no total: no price for run {unknown[0]}" if unknown else f"the sum of {len(runs)} runs' costs"
    shown = "—" if unknown else money(usd)
    if not unknown and any(run.served_by == "twin" for run in runs):
        shown, title = twin_money(emulated, usd), f"{TWIN_TITLE}; {title}"
    return Totals(
        runs=len(runs),
        usage=usage,
        read_share=share(cache_parts(usage).read_share),
        cost=shown,
        cost_title=title,
    )


# -- messages -----------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class BlockView:
    kind: BlockKind
    title: str
    body: str
    error: bool = False


@attrs.frozen(kw_only=True)
class MessageView:
    index: int
    role: str
    origin: Origin
    blocks: list[BlockView]
    fragment: bool = False


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return str(value)
    return json.dumps(value, indent=2, ensure_ascii=False)


def _block(b: ContentBlock | Unknown) -> BlockView:
    if isinstance(b, TextBlock):
        return BlockView(
            kind=b.type, title="runtime-state fragment" if is_fragment_text(b.text) else b.type, body=b.text
        )
    if isinstance(b, ToolCallBlock):
        return BlockView(kind=b.type, title=f"tool call {b.name}", body=_pretty(b.arguments))
    if isinstance(b, ToolResultBlock):
        return BlockView(kind=b.type, title=f"tool result for {b.tool_call_id}", body=b.content, error=bool(b.is_error))
    if isinstance(b, ReasoningBlock):
        text = b.text or "\n".join(b.summary or []) or "(opaque)"
        return BlockView(kind=b.type, title=f"reasoning ({b.format})", body=text)
    if isinstance(b, ImageBlock):
        return BlockView(kind=b.type, title=b.type, body="(image not shown)")
    if isinstance(b, CompactionBlock):
        return BlockView(kind="other", title=f"compaction ({b.vendor})", body=b.content or "(opaque)")
    return BlockView(kind="other", title=str(b.tag or "block"), body=_pretty(b.raw))


def message_view(message: StoredMessage, index: int, origin: Origin) -> MessageView:
    """One message (or Responses input item) of a stored request, or of the run's own traces, read through the
    generated wire parsers (segue.wire.stored)."""
    blocks = [_block(b) for b in message.blocks]
    return MessageView(index=index, role=message.role, origin=origin, blocks=blocks, fragment=is_fragment(message))


def conversation_messages(run: RunDetail) -> list[MessageView]:
    """What the model saw, oldest first: messages replayed (or passed as history) before this run's own part,
    taken from the last provider request; then the run's own stored traces, marked new."""
    out: list[MessageView] = []
    start = own_messages_start(run)
    if start is not None and run.llm_interactions:
        sent = stored.read(run.llm_interactions[-1].provider_request).messages()
        request = run.meta.segue_request if run.meta is not None else None
        history = request.history if request is not None else None
        first_history = start - len(history) if history is not None else start
        for i, m in enumerate(sent[:start]):
            out.append(message_view(m, i, "history" if i >= first_history else "replayed"))
    for t in run.traces:
        out.append(message_view(of_message(t.message), len(out), "new"))
    return out


# -- run detail ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class IterationView:
    iteration: int
    model: str
    vendor: str
    input_tokens: str
    cache_read: str
    cache_write: str
    uncached: str
    output_tokens: str
    latency: str
    cost: str
    twin: bool  # segue's twin answered this call
    error: str | None
    request_json: str
    response_json: str | None
    headers_json: str | None
    explanation: IterationExplanation | None
    #: The vendor's own verdict and whether segue's comparison agrees (segue.cache.reasons), shown first.
    verdict: str | None = None


@attrs.frozen(kw_only=True)
class ReplayRunView:
    run_id: str
    mode: str  # "full", "question + answer", or a compaction's "summary of N runs (first to last)"
    reasoning: Literal["kept", "dropped", "none"]
    warnings: list[tuple[str, str]]


@attrs.frozen(kw_only=True)
class RunView:
    run: RunDetail
    row: RunRow
    layout: LayoutMeta | None
    messages: list[MessageView]
    replayed_count: int
    iterations: list[IterationView]
    chart: Chart
    replay_runs: list[ReplayRunView]
    other_warnings: list[tuple[str, str, str]]

    @property
    def earlier(self) -> list[MessageView]:
        """Messages that came before this run's own (replayed or history): folded below its question."""
        return [m for m in self.messages if m.origin != "new"]

    @property
    def own(self) -> list[MessageView]:
        return [m for m in self.messages if m.origin == "new"]


def run_view(run: RunDetail, previous: RunDetail | None, cost: CostFn) -> RunView:
    explanation = explain_run(run, previous)
    by_iteration = {e.iteration: e for e in explanation.iterations}
    iterations = []
    for c in run.llm_interactions:
        parts = cache_parts(c.usage)
        iterations.append(
            IterationView(
                iteration=c.iteration,
                model=c.model,
                vendor=c.vendor,
                input_tokens=tokens(c.usage.input_tokens),
                cache_read=tokens(parts.read),
                cache_write=tokens(parts.write),
                uncached=tokens(parts.uncached),
                output_tokens=tokens(c.usage.output_tokens),
                latency=f"{c.latency_ms:,.0f} ms",
                cost=call_cost(run, c, cost),
                twin=c.served_by == "twin",
                error=c.error,
                request_json=json.dumps(c.provider_request, indent=2, ensure_ascii=False),
                response_json=json.dumps(c.provider_response, indent=2, ensure_ascii=False)
                if c.provider_response is not None
                else None,
                headers_json=json.dumps(c.request_headers, indent=2) if c.request_headers else None,
                explanation=by_iteration.get(c.iteration),
                verdict=verdict_line(e) if (e := by_iteration.get(c.iteration)) is not None else None,
            )
        )
    replay_runs: list[ReplayRunView] = []
    other: list[tuple[str, str, str]] = []
    if run.replay is not None:
        r = run.replay
        listed = [*r.runs_text, *r.runs_full, *([r.compaction.run_id] if r.compaction is not None else [])]
        order = r.knobs.runs if r.knobs is not None else listed
        if (comp := r.compaction) is not None:  # its row links to the compaction's run, whose page shows its call
            mode = f"summary of the first {comp.runs} runs ({comp.first} to {comp.last})"
            if comp.vendor is not None:  # the run whose response carries the vendor's block (replayed in full too)
                mode = f"{comp.vendor}'s compaction block, standing for the first {comp.runs} runs ({comp.first} to "
                mode += f"{comp.last})"
            said: list[tuple[str, str]] = [(w.cause, w.message) for w in r.warnings if w.run_id == comp.run_id]
            replay_runs.append(ReplayRunView(run_id=comp.run_id, mode=mode, reasoning="none", warnings=said))
        for run_id in [x for x in order if x in listed]:
            reasoning: Literal["kept", "dropped", "none"] = (
                "kept" if run_id in r.reasoning_kept else "dropped" if run_id in r.reasoning_dropped else "none"
            )
            replay_runs.append(
                ReplayRunView(
                    run_id=run_id,
                    mode="full" if run_id in r.runs_full else "question + answer",
                    reasoning=reasoning,
                    warnings=[(w.cause, w.message) for w in r.warnings if w.run_id == run_id],
                )
            )
        other = [(w.run_id, w.cause, w.message) for w in r.warnings if w.run_id not in listed]
    messages = conversation_messages(run)
    return RunView(
        run=run,
        row=run_row(run, cost),
        layout=run.meta.segue_layout if run.meta is not None else None,
        messages=messages,
        replayed_count=sum(1 for m in messages if m.origin != "new"),
        iterations=iterations,
        chart=bar_chart([(f"#{c.iteration}", c.usage) for c in run.llm_interactions]),
        replay_runs=replay_runs,
        other_warnings=other,
    )


# -- conversations ------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ChainLink:
    run: RunDetail
    row: RunRow
    cache_read: str
    cache_write: str
    uncached: str
    chart: Chart
    replayed_full: int
    replayed_text: int
    current: bool
    miss: str | None  # why this turn missed the cache (a tools change, a prompt below the minimum), None if it did not


@attrs.frozen(kw_only=True)
class ChainView:
    links: list[ChainLink]
    totals: Totals
    truncated_before: str | None  # an earlier run exists but is not readable here (or the chain was too long)
    branches: list[str]  # other runs that continued from a run of this chain


def chain_view(
    chain: Sequence[RunDetail], current: str, truncated_before: str | None, branches: Sequence[str], cost: CostFn
) -> ChainView:
    links = []
    for i, run in enumerate(chain):
        parts = cache_parts(run.usage)
        links.append(
            ChainLink(
                run=run,
                row=run_row(run, cost),
                cache_read=tokens(parts.read),
                cache_write=tokens(parts.write),
                uncached=tokens(parts.uncached),
                chart=bar_chart([("", run.usage)], width=220, row=22, label_width=4),
                replayed_full=len(run.replay.runs_full) if run.replay else 0,
                replayed_text=len(run.replay.runs_text) if run.replay else 0,
                current=run.run_id == current,
                miss=miss_cause(explain_run(run, chain[i - 1] if i else None)),
            )
        )
    return ChainView(
        links=links, totals=totals(chain, cost), truncated_before=truncated_before, branches=list(branches)
    )
