"""Run INSIDE dendrux's own virtual environment (bench/peers.py starts it): the bench's turns on dendrux 0.4.1.

Configured as dendrux's docs recommend for a chat: every turn `agent.run(question, runs=<the conversation's
earlier runs>, replay_last=...)` on one database (`"all"`, or the scenario's window of N recent runs in full),
the Anthropic provider with `thinking=True, thinking_budget=1024` and the scenario's `cache_ttl`, the OpenAI
Responses provider with `reasoning_effort="low"`; both clients find the twin through ANTHROPIC_BASE_URL /
OPENAI_BASE_URL, which the bench sets. A prompt edit or vendor switch is a new Agent on the same
database. The protocol is bench/peers/_peer_protocol.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _peer_protocol import config, serve, shop
from dendrux import Agent, tool
from dendrux.llm.anthropic import AnthropicProvider
from dendrux.llm.openai_responses import OpenAIResponsesProvider

cfg = config()
db = shop(cfg)


@tool()
def list_tables() -> list:
    """List the tables of the shop database."""
    return db.list_tables()


@tool()
def describe_table(table: str) -> list:
    """Describe a table's columns: name, type, whether it may be null, and primary key.

    Args:
        table: the table name, as list_tables returns it
    """
    return db.describe_table(table)


@tool()
def run_query(sql: str) -> list:
    """Run one read-only SQL query (SELECT) on the shop database and return its rows.

    Args:
        sql: a single SELECT statement in SQLite's dialect
    """
    return db.run_query(sql)


agents: dict[tuple[str, str, str], Agent] = {}
runs: dict[int, list[str]] = {}
database = f"sqlite+aiosqlite:///{Path(cfg['workdir']) / 'dendrux.db'}"


def agent_for(spec: dict[str, Any]) -> Agent:
    key = (spec["vendor"], spec["model"], spec["prompt"])
    if key not in agents:
        if spec["vendor"] == "anthropic":
            ttl = cfg["ttl"] if cfg["ttl"] in ("5m", "1h") else "5m"
            provider: Any = AnthropicProvider(
                model=spec["model"],
                thinking=cfg["thinking"],
                thinking_budget=1024 if cfg["thinking"] else None,
                cache_ttl=ttl,
                max_tokens=4096,
                max_retries=0,
            )
        else:
            provider = OpenAIResponsesProvider(
                model=spec["model"], reasoning_effort="low" if cfg["thinking"] else None, max_retries=0
            )
        agents[key] = Agent(
            provider=provider,
            prompt=spec["prompt"],
            tools=[list_tables, describe_table, run_query],
            database_url=database,
            max_iterations=8,
        )
    return agents[key]


async def turn(spec: dict[str, Any]) -> None:
    earlier = runs.setdefault(spec["conversation"], [])
    window = cfg["window"] if cfg["window"] is not None else "all"
    result = await agent_for(spec).run(spec["question"], runs=earlier or None, replay_last=window, tenant_id="bench")
    if str(result.status) != "success":
        raise RuntimeError(f"{result.status}: {result.error}")
    earlier.append(result.run_id)


serve(turn)
