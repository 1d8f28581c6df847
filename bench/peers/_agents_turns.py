"""Run INSIDE the OpenAI Agents SDK's own virtual environment (bench/peers.py starts it): the bench's turns.

Configured as the SDK's docs recommend for memory: one `SQLiteSession` per conversation (the SDK loads the
session's items before each run and appends the new ones), an `OpenAIResponsesModel` on an `AsyncOpenAI` client
pointed at the twin, `ModelSettings(reasoning=Reasoning(effort="low"))` when thinking is on, and the SDK's
default prompt caching (OpenAI caches on its own; no cache setting is needed). Tracing is disabled: it would
export to OpenAI's servers. OpenAI only: the SDK reaches Anthropic through its LiteLLM extension, not here.
The protocol is bench/peers/_peer_protocol.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _peer_protocol import config, serve, shop
from agents import (
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from openai.types.shared import Reasoning

cfg = config()
db = shop(cfg)
set_tracing_disabled(True)
client = AsyncOpenAI(base_url=cfg["openai_url"], api_key="bench", max_retries=0)


@function_tool
def list_tables() -> list[str]:
    """List the tables of the shop database."""
    return db.list_tables()


@function_tool
def describe_table(table: str) -> list[dict[str, Any]]:
    """Describe a table's columns: name, type, whether it may be null, and primary key.

    Args:
        table: the table name, as list_tables returns it
    """
    return db.describe_table(table)


@function_tool
def run_query(sql: str) -> list[dict[str, Any]]:
    """Run one read-only SQL query (SELECT) on the shop database and return its rows.

    Args:
        sql: a single SELECT statement in SQLite's dialect
    """
    return db.run_query(sql)


sessions: dict[int, SQLiteSession] = {}


async def turn(spec: dict[str, Any]) -> None:
    if spec["vendor"] != "openai":
        raise RuntimeError("the Agents SDK's own models are OpenAI's")
    settings = ModelSettings(reasoning=Reasoning(effort="low")) if cfg["thinking"] else ModelSettings()
    agent = Agent(
        name="shop-analyst",
        instructions=spec["prompt"],
        tools=[list_tables, describe_table, run_query],
        model=OpenAIResponsesModel(model=spec["model"], openai_client=client),
        model_settings=settings,
    )
    n = spec["conversation"]
    if n not in sessions:
        sessions[n] = SQLiteSession(f"conversation-{n}", Path(cfg["workdir"]) / "agents.db")
    await Runner.run(agent, spec["question"], session=sessions[n], max_turns=8)


serve(turn)
