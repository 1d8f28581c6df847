"""Run INSIDE dendrux's own virtual environment (bench/peers/side_by_side.py starts it): the demo chat on dendrux.

argv: a JSON file with {"prompt", "questions", "shop_sql", "model", "db_url"}. ANTHROPIC_BASE_URL and
ANTHROPIC_API_KEY point dendrux's Anthropic client at the twin. The three tools return the same shapes as
segue.demo.shop_db's. After each turn one JSON line is printed ({"turn": n, "status": ...}) so the caller can
attribute the twin's exchanges to turns.
"""

import asyncio
import json
import sqlite3
import sys

from dendrux import Agent, tool
from dendrux.llm.anthropic import AnthropicProvider

config = json.load(open(sys.argv[1]))
db = sqlite3.connect(":memory:", check_same_thread=False)
db.row_factory = sqlite3.Row
db.executescript(config["shop_sql"])


@tool()
def list_tables() -> list:
    """List the tables of the shop database."""
    rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
    return [r["name"] for r in rows]


@tool()
def describe_table(table: str) -> list:
    """Describe a table's columns: name, type, whether it may be null, and primary key."""
    columns = db.execute("SELECT * FROM pragma_table_info(?)", (table,)).fetchall()
    keys = db.execute("SELECT * FROM pragma_foreign_key_list(?)", (table,)).fetchall()
    refs = {k["from"]: f"{k['table']}({k['to']})" for k in keys}
    return [
        {
            "column": c["name"],
            "type": c["type"],
            "nullable": not c["notnull"] and not c["pk"],
            "primary_key": bool(c["pk"]),
            "references": refs.get(c["name"]),
        }
        for c in columns
    ]


@tool()
def run_query(sql: str) -> list:
    """Run one read-only SQL query (SELECT) on the shop database and return its rows."""
    return [dict(r) for r in db.execute(sql).fetchall()]


async def main() -> None:
    provider = AnthropicProvider(
        model=config["model"], thinking=True, thinking_budget=1024, cache_ttl="1h", max_tokens=4096, max_retries=0
    )
    agent = Agent(
        provider=provider,
        prompt=config["prompt"],
        tools=[list_tables, describe_table, run_query],
        database_url=config["db_url"],
        max_iterations=8,
    )
    ids = []
    for turn, question in enumerate(config["questions"], start=1):
        result = await agent.run(question, runs=ids or None, replay_last="all", tenant_id="demo")
        ids.append(result.run_id)
        print(json.dumps({"turn": turn, "status": str(result.status), "error": result.error}), flush=True)


asyncio.run(main())
