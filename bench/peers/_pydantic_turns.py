"""Run INSIDE PydanticAI's own virtual environment (bench/peers.py starts it): the bench's turns on PydanticAI.

Configured as PydanticAI's docs recommend for a multi-turn chat: the app keeps the conversation as
`message_history` (`result.all_messages()` of the previous turn), the system prompt is the agent's
`instructions` (re-sent every turn, so an edited prompt applies from the next turn), and prompt caching is the
unified `cache` setting (`True`: the provider's default retention, 5m on Anthropic; or the TTL name). Thinking:
`anthropic_thinking` with the same 1,024-token budget as segue, `openai_reasoning_effort="low"` on OpenAI. A
window of N turns is PydanticAI's history processor (the `ProcessHistory` capability) keeping the last N turns.
With `compaction_trigger` (bench/long.py --compaction), Anthropic's server-side compaction through PydanticAI's
`anthropic_context_management` setting (compact_20260112 at that many input tokens; PydanticAI round-trips the
block as a CompactionPart).
The protocol is bench/peers/_peer_protocol.py's.
"""

from __future__ import annotations

from typing import Any

from _peer_protocol import config, serve, shop
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

cfg = config()
db = shop(cfg)
window = cfg.get("window")


def list_tables() -> list[str]:
    """List the tables of the shop database."""
    return db.list_tables()


def describe_table(table: str) -> list[dict[str, Any]]:
    """Describe a table's columns: name, type, whether it may be null, and primary key.

    Args:
        table: the table name, as list_tables returns it
    """
    return db.describe_table(table)


def run_query(sql: str) -> list[dict[str, Any]]:
    """Run one read-only SQL query (SELECT) on the shop database and return its rows.

    Args:
        sql: a single SELECT statement in SQLite's dialect
    """
    return db.run_query(sql)


def keep_last_turns(messages: list[ModelMessage]) -> list[ModelMessage]:
    """The last `window` earlier turns and the current one: cut where a user prompt starts a turn."""
    starts = [
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
    ]
    if window is None or len(starts) <= window + 1:
        return messages
    return messages[starts[-(window + 1)] :]


def model_for(vendor: str, name: str) -> Any:
    if vendor == "anthropic":
        return AnthropicModel(name, provider=AnthropicProvider(api_key="bench", base_url=cfg["anthropic_url"]))
    return OpenAIResponsesModel(name, provider=OpenAIProvider(base_url=cfg["openai_url"], api_key="bench"))


def settings_for(vendor: str) -> dict[str, Any]:
    ttl = cfg["ttl"]
    out: dict[str, Any] = {"cache": True if ttl in ("5m", "30m") else ttl}
    trigger = cfg.get("compaction_trigger")
    if trigger is not None and vendor == "anthropic":
        out["anthropic_context_management"] = {
            "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": trigger}}]
        }
    if cfg["thinking"]:
        if vendor == "anthropic":
            out["anthropic_thinking"] = {"type": "enabled", "budget_tokens": 1024}
        else:
            out["openai_reasoning_effort"] = "low"
    return out


histories: dict[int, list[ModelMessage]] = {}


async def turn(spec: dict[str, Any]) -> None:
    agent = Agent(
        model_for(spec["vendor"], spec["model"]),
        instructions=spec["prompt"],
        tools=[list_tables, describe_table, run_query],
        model_settings=settings_for(spec["vendor"]),  # type: ignore[arg-type]
        capabilities=[ProcessHistory(keep_last_turns)] if window is not None else None,
    )
    history = histories.get(spec["conversation"], [])
    result = await agent.run(spec["question"], message_history=history or None)
    histories[spec["conversation"]] = result.all_messages()


serve(turn)
