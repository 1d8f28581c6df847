"""The headline demo: a 5-turn database chat, replayed run by run, on the twin (or a real vendor).

`run_chat(setting, vendor=...)` runs the chat and returns one `TurnReport` per turn: iterations, tool calls,
input tokens, cache read, cache write, uncached tokens, cost and the ReplaySummary. `segue demo`,
examples/34_run_replay.py and bench/replay_table.py all use it.

Settings (how each turn carries the earlier ones):
- `all`: runs=<earlier runs>, replay_last="all" (the headline);
- `last3`: replay_last=3 (older turns as question + answer);
- `none`: replay_last=0 (every earlier turn as question + answer);
- `history`: no runs=, the earlier questions and answers as history= (what apps do without replay);
- `tool_added`: like `all`, but a tool is added on turn 3 (the prefix changes: reasoning and cache reset).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Literal

import attrs

from segue._core.contracts import Provider
from segue.agent import Agent
from segue.catalog import Catalog, CatalogError
from segue.generated import Message, ReplaySummary, TextBlock, Usage
from segue.run.conversation import tool_calls
from segue.store import RunStore
from segue.tools import Tool, tool

Setting = Literal["all", "last3", "none", "history", "tool_added"]
Vendor = Literal["anthropic", "openai"]
SETTINGS: tuple[Setting, ...] = ("all", "last3", "none", "history", "tool_added")
REPLAY_LAST: dict[str, int | Literal["all"]] = {"all": "all", "tool_added": "all", "last3": 3, "none": 0}

QUESTIONS: tuple[str, ...] = (
    "Which tables are there in the shop database, and what columns do they have?",
    "How many customers are in each country?",
    "What are the top 5 products by revenue?",
    "Which customers placed more than 3 orders?",
    "What was the revenue per month in 2025?",
)

MODELS: dict[Vendor, str] = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-5.6-terra"}


def long_chat(turns: int) -> list[str]:
    """A tool chat of `turns` questions the twin's analyst answers with a new query every turn (bench/long.py and
    the storage tests: a conversation that grows, each turn a run that replays the earlier ones)."""
    out = ["Which tables are there in the shop database, and what columns do they have?"]
    k = 0
    while len(out) < turns:
        k += 1
        out += [
            f"What are the top {k + 2} products by revenue?",
            f"Which customers placed more than {k} orders?",
            f"What was the revenue per month in {2000 + k}?",
        ]
    return out[:turns]


PROMPT = """You are a careful data analyst for a small online shop. You answer questions about the shop's
SQLite database by calling tools, and you never guess at numbers.

## How you work
1. If you do not know which tables exist, call list_tables. If you do not know a table's columns, call
   describe_table for it. Do this only for facts that are not already in this conversation: earlier tool
   results stay valid for the whole conversation, so reuse them instead of asking again.
2. Write one read-only SQL query (SELECT only) that answers the question, and call run_query with it. Use
   explicit JOINs on the key columns, qualify columns with table aliases, and order results deterministically.
3. Answer from the rows you got: name the numbers, keep units (money is in US dollars, two decimals), and say
   when the data cannot answer the question.

## Conventions of this database
- Money columns are stored in US dollars; revenue is quantity times unit price over order items.
- Orders have a status; cancelled orders do not count towards revenue.
- Dates are ISO 8601 strings (YYYY-MM-DD); group by month with strftime('%Y-%m', ...).
- Customer names are unique; countries are stored as English country names.

## Style
- Be brief: a one-line summary, then a short list or table of the relevant rows.
- Do not explain the SQL unless asked. Do not invent columns or tables.
- Tools may change between turns of a conversation: if a tool you used before is no longer offered, do not
  call it; say what you would need instead.

## Examples of good answers
Question: How many orders were placed?
Answer: 220 orders were placed in total.

Question: Which product sold best?
Answer: The best seller by revenue is the Walnut Desk Organizer with $1,234.50.

## Reference: the kinds of questions you will get
- Inventory of the database: which tables exist and what their columns mean.
- Customer analytics: customers per country, repeat customers, customers with many orders.
- Product analytics: top products by revenue or by units, revenue per category.
- Time series: revenue per month or per quarter, order counts over time.
- Data quality: missing values, cancelled orders, orders without items.
When a question is ambiguous, pick the most common business reading and say which one you used.
"""


@attrs.frozen(kw_only=True)
class TurnReport:
    turn: int
    run_id: str
    question: str
    answer: str | None
    iterations: int
    tool_calls: list[str]
    usage: Usage
    #: The turn's price at the vendor's rates; on the twin (`twin`) an emulation, not a charge.
    cost: float | None
    replay: ReplaySummary | None
    twin: bool = False  # segue's twin served the turn (RunResult.served_by)

    @property
    def cache_read(self) -> int:
        return self.usage.cache_read_tokens or 0

    @property
    def cache_write(self) -> int:
        return self.usage.cache_write_tokens or 0

    @property
    def uncached(self) -> int:
        return self.usage.input_tokens - self.cache_read - self.cache_write

    @property
    def cached_share(self) -> float:
        return self.cache_read / self.usage.input_tokens if self.usage.input_tokens else 0.0


def demo_tools(*, with_export: bool = False) -> list[Tool]:
    from segue.demo import shop_db as sample_db

    @tool
    def list_tables() -> list[str]:
        """List the tables of the shop database."""
        return sample_db.list_tables()

    @tool
    def describe_table(table: str) -> list[dict[str, Any]]:
        """Describe a table's columns: name, type, whether it may be null, and primary key.

        Args:
            table: the table name, as list_tables returns it
        """
        return sample_db.describe_table(table)

    @tool
    def run_query(sql: str) -> list[dict[str, Any]]:
        """Run one read-only SQL query (SELECT) on the shop database and return its rows.

        Args:
            sql: a single SELECT statement in SQLite's dialect
        """
        return sample_db.run_query(sql)

    tools = [list_tables, describe_table, run_query]
    if with_export:

        @tool
        def export_csv(sql: str) -> str:
            """Export a query's rows as CSV text.

            Args:
                sql: a single SELECT statement
            """
            rows = sample_db.run_query(sql)
            header = ",".join(rows[0]) if rows else ""
            return "\n".join([header, *(",".join(str(v) for v in r.values()) for r in rows)])

        tools.append(export_csv)
    return tools


def make_provider(vendor: Vendor, *, twin: Any = None, model: str | None = None) -> Provider:
    """The demo's driver: on the twin unless the vendor's API key is set (and no twin is passed)."""
    chosen = model or MODELS[vendor]
    if vendor == "anthropic":
        from segue.providers import AnthropicProvider

        client = twin.anthropic_client() if twin is not None else None
        return AnthropicProvider(
            chosen, cache_ttl="1h", thinking={"type": "enabled", "budget_tokens": 1024}, client=client
        )
    from segue.providers import OpenAIResponsesProvider

    client = twin.openai_client() if twin is not None else None
    return OpenAIResponsesProvider(chosen, cache_key_prefix="segue-demo", reasoning={"effort": "low"}, client=client)


def uses_real_vendor(vendor: Vendor) -> bool:
    return bool(os.environ.get("ANTHROPIC_API_KEY" if vendor == "anthropic" else "OPENAI_API_KEY"))


async def run_chat(
    setting: Setting = "all",
    *,
    vendor: Vendor = "anthropic",
    store: RunStore | None = None,
    twin: Any = None,
    questions: Sequence[str] = QUESTIONS,
    catalog: Catalog | None = None,
    tenant_id: str = "demo",
    model: str | None = None,
    on_turn: Callable[[TurnReport], None] | None = None,
) -> list[TurnReport]:
    """Run the chat under one setting. With no twin and no API key for `vendor`, a fresh twin is used. `model`
    replaces the vendor's demo model (`MODELS`)."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r}; choose one of {', '.join(SETTINGS)}")
    if twin is None and not uses_real_vendor(vendor):
        from segue_twin import Twin

        twin = Twin()
    catalog = catalog or Catalog.load()
    store = store or RunStore("sqlite:///:memory:")
    provider = make_provider(vendor, twin=twin, model=model)

    def agent_for(turn: int) -> Agent:
        extra = setting == "tool_added" and turn >= 3
        return Agent(provider, PROMPT, demo_tools(with_export=extra), store, name="shop-analyst", max_iterations=8)

    reports: list[TurnReport] = []
    run_ids: list[str] = []
    history: list[Message] = []
    for turn, question in enumerate(questions, start=1):
        agent = agent_for(turn)
        if setting == "history":
            result = await agent.run(question, history=history, tenant_id=tenant_id)
        else:
            replay_last = REPLAY_LAST[setting]
            result = await agent.run(question, runs=run_ids or None, replay_last=replay_last, tenant_id=tenant_id)
        if result.status != "success":
            raise RuntimeError(f"turn {turn} ended {result.status}: {result.error}")
        detail = store.get_run(result.run_id, tenant_id=tenant_id)
        assert detail is not None
        calls = [c.name for t in detail.traces for c in tool_calls(t.message)]
        model = detail.model
        report = TurnReport(
            turn=turn,
            run_id=result.run_id,
            question=question,
            answer=result.answer,
            iterations=result.iterations,
            tool_calls=calls,
            usage=result.usage,
            cost=_cost(catalog, result.usage, model, vendor),
            replay=result.replay,
            twin=result.served_by == "twin",
        )
        reports.append(report)
        if on_turn is not None:
            on_turn(report)
        run_ids.append(result.run_id)
        history += [
            Message(role="user", content=[TextBlock(text=question)]),
            Message(role="assistant", content=[TextBlock(text=result.answer or "")]),
        ]
    return reports


def _cost(catalog: Catalog, usage: Usage, model: str, vendor: str) -> float | None:
    try:
        return catalog.cost(usage, model, vendor)
    except CatalogError:  # a price the catalog does not know: say unknown rather than guess
        return None


def format_report(reports: Sequence[TurnReport], *, title: str) -> str:
    twin = any(r.twin for r in reports)
    lines = [
        title,
        f"{'turn':>4} {'iter':>4} {'tool calls':<38} {'input':>7} {'read':>7} {'write':>7} {'uncached':>8} "
        f"{'cached':>6} {'twin $*' if twin else 'cost $':>9}",
    ]
    for r in reports:
        calls = ", ".join(f"{n}" for n in _counted(r.tool_calls)) or "-"
        cost = f"{r.cost:.5f}" if r.cost is not None else "-"
        lines.append(
            f"{r.turn:>4} {r.iterations:>4} {calls[:38]:<38} {r.usage.input_tokens:>7} {r.cache_read:>7} "
            f"{r.cache_write:>7} {r.uncached:>8} {r.cached_share:>6.0%} {cost:>9}"
        )
        if r.replay is not None:
            s = r.replay
            # One entry per distinct warning, in its own words, with how many runs it concerns.
            said = Counter(w.message for w in s.warnings)
            warn = "; ".join(f"{m} ({n} runs)" if n > 1 else m for m, n in said.items()) or "none"
            lines.append(
                f"{'':>9}replay: {len(s.runs_full)} full, {len(s.runs_text)} as Q+A, reasoning kept "
                f"{len(s.reasoning_kept)} / dropped {len(s.reasoning_dropped)}, warnings: {warn}"
            )
    costs = [r.cost for r in reports]
    total_cost = "cost unknown (no catalog price)" if None in costs else f"${sum(c or 0.0 for c in costs):.5f}"
    if twin and None not in costs:
        total_cost = f"twin (emulated, {total_cost} at the vendor's prices)"
    total_in = sum(r.usage.input_tokens for r in reports)
    total_read = sum(r.cache_read for r in reports)
    lines.append(f"total: {total_in} input tokens, {total_read / max(total_in, 1):.0%} read from cache, {total_cost}")
    if twin:
        lines.append("* served by segue's twin, an offline emulator: the vendor's prices for its usage, not a charge")
    return "\n".join(lines)


def _counted(names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for name in dict.fromkeys(names):
        n = names.count(name)
        out.append(f"{name} x{n}" if n > 1 else name)
    return out
