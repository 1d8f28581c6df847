"""Quickstart: an agent with two tools, a recorded run, and a second run that replays the first.

Runs offline against the twin (segue's emulator of the vendors' APIs); pass a real client (or set the vendor's API
key and drop `client=`) to talk to the vendor. Run: python examples/01_quickstart.py
"""

from __future__ import annotations

import asyncio

from segue import Agent, RunStore, tool
from segue.providers import AnthropicProvider
from segue.twin import Twin, sample_db


@tool
def list_tables() -> list[str]:
    """List the tables of the shop database."""
    return sample_db.list_tables()


@tool
def describe_table(table: str) -> list[dict[str, object]]:
    """Describe a table's columns.

    Args:
        table: a table name from list_tables
    """
    return sample_db.describe_table(table)


@tool
def run_query(sql: str) -> list[dict[str, object]]:
    """Run one read-only SELECT on the shop database.

    Args:
        sql: the SQL statement
    """
    return sample_db.run_query(sql)


async def main() -> None:
    twin = Twin()  # offline; for the real API: AnthropicProvider("claude-sonnet-4-6") with ANTHROPIC_API_KEY set
    provider = AnthropicProvider("claude-sonnet-4-6", cache_ttl="1h", client=twin.anthropic_client())
    store = RunStore("sqlite:///:memory:")  # default RunStore() writes ./segue.db
    agent = Agent(
        provider,
        "You answer questions about the shop database using the tools.",
        [list_tables, describe_table, run_query],
        store,
    )

    first = await agent.run("Which tables are there, and what columns do they have?", tenant_id="acme")
    print(first.status, first.iterations, "iterations;", first.usage.input_tokens, "input tokens")

    # The app keeps the conversation's run ids and passes them back: the earlier run is replayed in full
    # (question, tool calls, tool results, answer), so the model does not explore the schema again.
    second = await agent.run(
        "How many customers are in each country?", runs=[first.run_id], replay_last="all", tenant_id="acme"
    )
    print(second.answer)
    print(second.replay)
    print(
        [r.run_id for r in store.list_runs(tenant_id="acme")],
        "continued_from:",
        store.list_runs(tenant_id="acme")[0].continued_from,
    )

    async for event in agent.stream(
        "What are the top 5 products by revenue?",
        runs=[first.run_id, second.run_id],
        replay_last="all",
        tenant_id="acme",
    ):
        if event.type == "TOOL_CALL" and event.tool_call is not None:
            print("tool call:", event.tool_call.name)
        elif event.type == "RUN_COMPLETED" and event.result is not None:
            print("cache read:", event.result.usage.cache_read_tokens, "of", event.result.usage.input_tokens)


if __name__ == "__main__":
    asyncio.run(main())
