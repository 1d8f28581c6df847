"""DatabaseChatPolicy: a scripted analyst for the sample shop database.

It answers demo questions with keyword -> SQL templates, and it calls `list_tables`, `describe_table` and
`run_query` only for facts missing from its context: any earlier tool result in the request counts,
replayed turns included. So a model that lost the conversation re-explores the schema; one that sees
replayed tool results goes straight to the query (or to the answer, if the rows are already there).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import attrs

from segue_twin.view import AssistantTurn, ConversationView, PlannedCall

LIST_TABLES = "list_tables"
DESCRIBE_TABLE = "describe_table"
RUN_QUERY = "run_query"

_NOT_CANCELLED = "o.status <> 'cancelled'"


@attrs.frozen(kw_only=True)
class QueryPlan:
    """What a question needs: the tables whose schema the SQL relies on, the SQL, and the answer's title."""

    title: str
    tables: tuple[str, ...] = ()
    sql: str | None = None
    #: Describe every table (a question about the whole schema), then answer from the descriptions.
    whole_schema: bool = False


def plan_question(question: str) -> QueryPlan | None:
    """The plan for a demo question, or None when no template matches."""
    q = question.lower()
    if "table" in q and any(w in q for w in ("column", "schema")):
        return QueryPlan(title="schema", whole_schema=True)
    if "table" in q and any(w in q for w in ("which", "what", "list", "show")):
        return QueryPlan(title="tables")
    if "customer" in q and "countr" in q:
        return QueryPlan(
            title="Customers per country",
            tables=("customers",),
            sql=(
                "SELECT country, COUNT(*) AS customers FROM customers GROUP BY country ORDER BY customers DESC, country"
            ),
        )
    if "product" in q and any(w in q for w in ("top", "best")):
        limit = _number(r"(?:top|best)\s+(\d+)", q, 5)
        return QueryPlan(
            title=f"Top {limit} products by revenue",
            tables=("products", "order_items", "orders"),
            sql=(
                "SELECT p.name AS product, ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue FROM order_items oi "
                "JOIN products p ON p.id = oi.product_id JOIN orders o ON o.id = oi.order_id "
                f"WHERE {_NOT_CANCELLED} GROUP BY p.id ORDER BY revenue DESC, product LIMIT {limit}"
            ),
        )
    if "customer" in q and "order" in q and "more than" in q:
        threshold = _number(r"more than\s+(\d+)", q, 3)
        return QueryPlan(
            title=f"Customers with more than {threshold} orders",
            tables=("customers", "orders"),
            sql=(
                "SELECT c.name AS customer, COUNT(o.id) AS orders FROM customers c "
                "JOIN orders o ON o.customer_id = c.id "
                f"GROUP BY c.id HAVING COUNT(o.id) > {threshold} ORDER BY orders DESC, customer"
            ),
        )
    if "revenue" in q and "month" in q:
        year = _number(r"\b(20\d\d)\b", q, 2025)
        return QueryPlan(
            title=f"Revenue per month in {year}",
            tables=("orders", "order_items"),
            sql=(
                "SELECT strftime('%Y-%m', o.order_date) AS month, "
                "ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue "
                f"FROM orders o JOIN order_items oi ON oi.order_id = o.id WHERE {_NOT_CANCELLED} "
                f"AND strftime('%Y', o.order_date) = '{year}' GROUP BY month ORDER BY month"
            ),
        )
    if "how many" in q and "order" in q:
        return QueryPlan(title="Orders", tables=("orders",), sql="SELECT COUNT(*) AS orders FROM orders")
    return None


def _number(pattern: str, text: str, default: int) -> int:
    found = re.search(pattern, text)
    return int(found.group(1)) if found else default


def normalize_sql(sql: str) -> str:
    return " ".join(sql.split()).rstrip(";").lower()


@attrs.frozen(kw_only=True)
class _Knowledge:
    tables: tuple[str, ...] | None
    described: frozenset[str]
    queries: Mapping[str, str]
    #: (tool, canonical arguments) of calls that failed since the current question was asked.
    failed: Mapping[tuple[str, str], str]


def _knowledge(view: ConversationView) -> _Knowledge:
    tables: tuple[str, ...] | None = None
    described: set[str] = set()
    queries: dict[str, str] = {}
    failed: dict[tuple[str, str], str] = {}
    asked_at = max((i for i, t in enumerate(view.turns) if t.role == "user" and t.text.strip()), default=-1)
    for index, turn in enumerate(view.turns):
        # A vendor's compaction block opens a user turn of the compacted context (segue_twin.anthropic_context).
        facts = _facts(turn.text)
        if facts is not None:  # a summary of earlier turns (client-side compaction) states what they found
            tables = tuple(facts.get("tables") or ()) or tables
            described.update(facts.get("described") or ())
            queries.update(facts.get("queries") or {})
        for result in turn.tool_results:
            if CLIPPED in result.content:  # a result clipped out of the request (segue's fit): not seen
                continue
            arguments = dict(result.arguments or {})
            if result.is_error or _looks_like_error(result.content):
                if index > asked_at and result.name:
                    failed[(result.name, _args_key(arguments))] = result.content
                continue
            if result.name == LIST_TABLES:
                tables = _table_names(result.content)
            elif result.name == DESCRIBE_TABLE and isinstance(arguments.get("table"), str):
                described.add(arguments["table"])
            elif result.name == RUN_QUERY and isinstance(arguments.get("sql"), str):
                queries[normalize_sql(arguments["sql"])] = result.content
    return _Knowledge(tables=tables, described=frozenset(described), queries=queries, failed=failed)


#: A summary's facts: what a model that summarized the conversation would keep of its tool results, so the twin
#: answers from a summary as it would from the results themselves (and explores what the summary left out).
_FACTS = re.compile(r"<facts>(.*?)</facts>", re.DOTALL)
#: What segue puts in place of a tool result it clipped to fit the context window (segue.run.fit_iterations).
CLIPPED = "clipped to fit the context window"
#: A summary keeps the results of this many of the latest queries.
SUMMARY_QUERIES = 3


def is_summary_request(question: str) -> bool:
    return "summarize the conversation" in question.lower()


def _facts(text: str) -> dict[str, Any] | None:
    found = _FACTS.search(text)
    parsed = _json(found.group(1)) if found else None
    return parsed if isinstance(parsed, dict) else None


def summary(known: _Knowledge) -> str:
    """The twin's summary of a conversation: its facts, as a block it reads back on later turns."""
    facts = {
        "tables": list(known.tables or ()),
        "described": sorted(known.described),
        "queries": dict(list(known.queries.items())[-SUMMARY_QUERIES:]),
    }
    return (
        f"Summary of the conversation so far: {len(known.queries)} queries answered over the shop database "
        f"({', '.join(known.tables or ()) or 'tables not listed yet'}).\n<facts>{json.dumps(facts)}</facts>"
    )


def _looks_like_error(content: str) -> bool:
    return content.lstrip().lower().startswith(("error", '{"error"'))


def _args_key(arguments: Mapping[str, Any]) -> str:
    return json.dumps(dict(arguments), sort_keys=True)


def _table_names(content: str) -> tuple[str, ...]:
    parsed = _json(content)
    if isinstance(parsed, dict):
        parsed = parsed.get("tables", parsed.get("result"))
    if isinstance(parsed, list) and all(isinstance(name, str) for name in parsed):
        return tuple(parsed)
    return tuple(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", content))


def _json(content: str) -> Any:
    try:
        return json.loads(content)
    except (json.JSONDecodeError, TypeError):
        return None


class DatabaseChatPolicy:
    """Plays a careful analyst over the shop database; deterministic for a given conversation."""

    def summarize(self, view: ConversationView) -> str:
        """The summary a vendor's server-side compaction makes: the same facts as a summary segue asks for."""
        return summary(_knowledge(view))

    def respond(self, view: ConversationView) -> AssistantTurn:
        question = view.last_user_text()
        if is_summary_request(question):
            return AssistantTurn(text=summary(_knowledge(view)), reasoning="Summarize what the tools found so far.")
        plan = plan_question(question)
        if plan is None:
            return AssistantTurn(
                text=(
                    "I am segue's twin, playing an analyst of its sample shop database. I can answer questions about "
                    "its tables, customers per country, top products by revenue, customers with many orders, monthly "
                    "revenue and order counts. Could you rephrase your question along those lines?"
                ),
                reasoning=f"The question {question[:60]!r} matches none of the questions I know how to answer.",
            )
        known = _knowledge(view)
        if known.tables is None:
            return self._call(
                view, known, PlannedCall(name=LIST_TABLES), reasoning="I do not know the tables yet; list them."
            )
        if plan.whole_schema:
            undescribed = [t for t in known.tables if t not in known.described]
            if undescribed:
                calls = [PlannedCall(name=DESCRIBE_TABLE, arguments={"table": t}) for t in undescribed]
                return self._call(view, known, *calls, reasoning="Describe every table to learn the whole schema.")
            return AssistantTurn(
                text=f"The database has {len(known.tables)} tables, all described above: {', '.join(known.tables)}.",
                reasoning="Every table is described in my context, so I can answer directly.",
            )
        if plan.sql is None:
            return AssistantTurn(
                text=f"The database has {len(known.tables)} tables: {', '.join(known.tables)}.",
                reasoning="The table list is in my context, so I can answer directly.",
            )
        absent = [t for t in plan.tables if t not in known.tables]
        if absent:
            return AssistantTurn(
                text=f"I cannot answer that: the database has no {', '.join(absent)} table.",
                reasoning=f"The tables I need ({', '.join(absent)}) are not in the table list.",
            )
        missing = [t for t in plan.tables if t not in known.described]
        if missing:
            calls = [PlannedCall(name=DESCRIBE_TABLE, arguments={"table": t}) for t in missing]
            return self._call(view, known, *calls, reasoning=f"I need the columns of {', '.join(missing)}.")
        rows = known.queries.get(normalize_sql(plan.sql))
        if rows is None:
            return self._call(
                view,
                known,
                PlannedCall(name=RUN_QUERY, arguments={"sql": plan.sql}),
                reasoning="The schema is known; run the query.",
            )
        return AssistantTurn(
            text=_answer(plan.title, rows), reasoning="The query result is in my context; summarise it."
        )

    def _call(self, view: ConversationView, known: _Knowledge, *calls: PlannedCall, reasoning: str) -> AssistantTurn:
        for call in calls:
            if call.name not in view.tools:
                return AssistantTurn(
                    text=f"I am segue's twin, playing an analyst of its sample shop database, and I cannot look "
                    f"this up: the {call.name} tool is not available in this conversation.",
                    reasoning=f"I need {call.name}, but it is not among the offered tools.",
                )
            error = known.failed.get((call.name, _args_key(call.arguments)))
            if error is not None:
                return AssistantTurn(
                    text=f"I could not get that from the database: {call.name} failed with: {error[:200]}",
                    reasoning=f"{call.name} already failed for this question; do not retry it.",
                )
        return AssistantTurn(tool_calls=calls, reasoning=reasoning)


def _answer(title: str, content: str) -> str:
    rows = _json(content)
    if isinstance(rows, dict):
        rows = rows.get("rows", rows.get("result"))
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return f"{title}:\n{content}"
    if not rows:
        return f"{title}: no rows matched."
    lines = [f"{title}:"]
    for row in rows:
        lines.append("- " + ", ".join(f"{k}: {_fmt(v)}" for k, v in row.items()))
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)
