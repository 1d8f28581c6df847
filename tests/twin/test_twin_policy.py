"""DatabaseChatPolicy, ScriptedPolicy and the sample shop database."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import anthropic
import openai
import pytest

from segue.demo import shop_db as sample_db
from segue.demo._shopgen import generate
from segue.demo.sample_tools import anthropic_shop_tools, anthropic_tool_loop, responses_shop_tools, responses_tool_loop
from segue_twin import DatabaseChatPolicy, ScriptedPolicy, Twin
from segue_twin.db_policy import plan_question

MODEL = "claude-sonnet-4-6"
QUESTIONS = [
    "Which tables are there?",
    "How many customers are in each country?",
    "What are the top 5 products by revenue?",
    "Which customers placed more than 3 orders?",
    "What was the revenue per month in 2025?",
]


def _tool_calls(messages: list[dict[str, Any]], start: int = 0) -> list[str]:
    """Tool calls (name plus its argument) made in ``messages[start:]``."""
    calls = []
    for message in messages[start:]:
        if message["role"] == "assistant":
            for block in message["content"]:
                if block["type"] == "tool_use":
                    argument = next(iter(block["input"].values()), "")
                    calls.append(f"{block['name']}({argument[:20]})" if argument else block["name"])
    return calls


async def _ask(client: anthropic.AsyncAnthropic, messages: list[dict[str, Any]], question: str) -> str:
    messages.append({"role": "user", "content": question})
    responses = await anthropic_tool_loop(
        client,
        messages=messages,
        model=MODEL,
        max_tokens=4096,
        system="You analyse the shop database.",
        tools=anthropic_shop_tools(),
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    final = responses[-1].content[-1]
    assert final.type == "text"
    return final.text


async def test_five_turn_chat_answers_from_the_database() -> None:
    """Each demo question is answered with the rows the database returns for it."""
    client = Twin().anthropic_client()
    messages: list[dict[str, Any]] = []
    answers = [await _ask(client, messages, q) for q in QUESTIONS]
    assert answers[0] == "The database has 4 tables: customers, order_items, orders, products."
    for question, answer in zip(QUESTIONS[1:], answers[1:], strict=True):
        plan = plan_question(question)
        assert plan is not None and plan.sql is not None
        rows = sample_db.run_query(plan.sql)
        assert rows, question
        first = rows[0]
        assert answer.startswith(plan.title + ":\n- ")
        assert all(str(v) in answer or f"{v:.2f}" in answer for v in first.values()), (first, answer)
        assert answer.count("\n- ") == len(rows)
    # One conversation: the schema is explored once, each table described once.
    calls = _tool_calls(messages)
    assert calls.count("list_tables") == 1
    assert sorted(c for c in calls if c.startswith("describe_table")) == [
        "describe_table(customers)",
        "describe_table(order_items)",
        "describe_table(orders)",
        "describe_table(products)",
    ]


async def test_policy_re_explores_without_context_and_not_with_replayed_tool_results() -> None:
    """A fresh conversation re-lists and re-describes; with the earlier turns replayed (tool results included) the
    model goes straight to the facts it is missing."""
    client = Twin().anthropic_client()
    earlier: list[dict[str, Any]] = []
    await _ask(client, earlier, QUESTIONS[1])
    assert _tool_calls(earlier) == ["list_tables", "describe_table(customers)", "run_query(SELECT country, COUN)"]

    fresh: list[dict[str, Any]] = []
    await _ask(client, fresh, QUESTIONS[3])
    assert _tool_calls(fresh) == [
        "list_tables",
        "describe_table(customers)",
        "describe_table(orders)",
        "run_query(SELECT c.name AS cus)",
    ]

    replayed = list(earlier)
    start = len(replayed)
    await _ask(client, replayed, QUESTIONS[3])
    assert _tool_calls(replayed, start) == ["describe_table(orders)", "run_query(SELECT c.name AS cus)"]

    again = list(earlier)
    start = len(again)
    answer = await _ask(client, again, QUESTIONS[1])
    assert _tool_calls(again, start) == []  # the rows are already in context
    assert answer.startswith("Customers per country:")


async def test_policy_on_the_openai_responses_wire() -> None:
    """The same policy drives the Responses API (function calls, reasoning items, outputs)."""
    client = Twin().openai_client()
    items: list[dict[str, Any]] = [{"role": "user", "content": QUESTIONS[4]}]
    responses = await responses_tool_loop(client, items=items, model="gpt-5", tools=responses_shop_tools(), store=False)
    assert [r.output[-1].type for r in responses] == ["function_call", "function_call", "function_call", "message"]
    assert responses[-1].output_text.startswith("Revenue per month in 2025:\n- month: 2025-01, revenue: ")


async def test_unknown_question_gets_a_polite_answer_and_no_tool_calls() -> None:
    client = Twin().anthropic_client()
    response = await client.messages.create(
        model=MODEL, max_tokens=512, tools=anthropic_shop_tools(), messages=[{"role": "user", "content": "Sing a song"}]
    )
    assert response.stop_reason == "end_turn"
    assert response.content[0].type == "text"
    assert response.content[0].text.startswith(
        "I am segue's twin, playing an analyst of its sample shop database. I can answer questions about its tables"
    )


async def test_missing_tools_and_failing_tools_do_not_loop() -> None:
    """Without the tools the policy says so; a failed call is reported instead of retried."""
    client = Twin(policy=DatabaseChatPolicy()).anthropic_client()
    response = await client.messages.create(
        model=MODEL, max_tokens=512, messages=[{"role": "user", "content": QUESTIONS[1]}]
    )
    assert response.content[0].type == "text"
    assert "list_tables tool is not available" in response.content[0].text

    messages = [
        {"role": "user", "content": QUESTIONS[0]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_x", "name": "list_tables", "input": {}}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_x", "content": "Error: db down", "is_error": True}
            ],
        },
    ]
    response = await client.messages.create(
        model=MODEL,
        max_tokens=512,
        tools=anthropic_shop_tools(),
        messages=messages,  # type: ignore[arg-type]
    )
    assert response.stop_reason == "end_turn"
    assert response.content[0].type == "text" and "list_tables failed with: Error: db down" in response.content[0].text


async def test_scripted_policy_replays_turns_then_refuses_with_a_400() -> None:
    policy = ScriptedPolicy(["one"])
    client = Twin(policy=policy).openai_client()
    first = await client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "a"}])
    assert first.choices[0].message.content == "one"
    assert policy.views[0].last_user_text() == "a" and policy.remaining == 0
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "b"}])
    assert "the ScriptedPolicy has no answer left (it was given 1 answer and this is request 2)" in caught.value.message
    assert len(policy.views) == 1  # a refused request is not recorded as shown to the model


def test_sample_db_tools_are_read_only() -> None:
    assert sample_db.list_tables() == ["customers", "order_items", "orders", "products"]
    columns = {c["column"]: c for c in sample_db.describe_table("orders")}
    assert columns["customer_id"]["references"] == "customers(id)"
    assert sample_db.run_query("SELECT COUNT(*) AS n FROM customers") == [{"n": 60}]
    for statement in (
        "DELETE FROM orders",
        "SELECT 1; DELETE FROM orders",
        "WITH x AS (SELECT 1) DELETE FROM orders",
        "PRAGMA writable_schema = 1",
    ):
        with pytest.raises(ValueError):
            sample_db.run_query(statement)
    assert sample_db.run_query("SELECT COUNT(*) AS n FROM orders") == [{"n": 220}]
    with pytest.raises(ValueError, match="unknown table 'nope'; the shop database has: customers"):
        sample_db.describe_table("nope")


def test_committed_shop_sql_matches_its_generator() -> None:
    """data/shop.sql is generated deterministically; the committed text is exactly what the generator emits."""
    assert sample_db.shop_sql() == generate()
    assert json.dumps(sample_db.run_query("SELECT COUNT(*) AS n FROM order_items")) == '[{"n": 555}]'


def test_database_policy_is_a_policy() -> None:
    from segue_twin import Policy

    assert isinstance(DatabaseChatPolicy(), Policy)
    assert isinstance(ScriptedPolicy([]), Policy)


def test_a_whole_schema_question_describes_every_table() -> None:
    from segue_twin.db_policy import plan_question

    plan = plan_question("Which tables are there, and what columns do they have?")
    assert plan is not None and plan.whole_schema
    assert plan_question("Which tables are there?") == plan_question("list the tables")


async def test_the_scripted_policy_example_in_docs_twin_md_runs_as_written() -> None:
    from tests._support.environment import REPO

    blocks = re.findall(r"```python\n(.+?)```", (REPO / "docs" / "twin.md").read_text(), flags=re.S)
    (example,) = [b for b in blocks if "ScriptedPolicy(" in b]
    namespace: dict[str, Any] = {}
    code = compile(example, "docs/twin.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    pending = eval(code, namespace)  # a coroutine: the block awaits at top level, as in `python -m asyncio`
    await pending
    assert namespace["result"].answer == "5" and namespace["script"].remaining == 0
