"""Helpers for putting code under test against the twin: a fake clock, the shop tools in each vendor's
format, and minimal tool loops over the official clients (for tests; segue's Agent is the real loop)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from segue.demo import shop_db as sample_db

if TYPE_CHECKING:
    import anthropic
    import openai
    from anthropic.types import Message
    from openai.types.responses import Response


class FakeClock:
    """A clock the test moves: pass it as `Twin(clock=clock)` and call `advance(seconds)`."""

    def __init__(self, start: float = 1_750_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock only moves forward; got advance({seconds})")
        self.now += seconds


#: The three shop tools: name -> (description, JSON schema of the arguments).
SHOP_TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "list_tables": ("List the tables of the shop database.", {"type": "object", "properties": {}}),
    "describe_table": (
        "Describe one table: columns, types, keys and references.",
        {"type": "object", "properties": {"table": {"type": "string"}}, "required": ["table"]},
    ),
    "run_query": (
        "Run one read-only SQL SELECT (SQLite) and return the rows.",
        {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
    ),
}


def anthropic_shop_tools() -> list[dict[str, Any]]:
    return [{"name": n, "description": d, "input_schema": s} for n, (d, s) in SHOP_TOOLS.items()]


def responses_shop_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "name": n, "description": d, "parameters": s} for n, (d, s) in SHOP_TOOLS.items()]


def chat_shop_tools() -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": n, "description": d, "parameters": s}}
        for n, (d, s) in SHOP_TOOLS.items()
    ]


def call_shop_tool(name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    """Run a shop tool; returns (JSON result or error text, is_error)."""
    functions: dict[str, Callable[..., Any]] = {
        "list_tables": sample_db.list_tables,
        "describe_table": sample_db.describe_table,
        "run_query": sample_db.run_query,
    }
    if name not in functions:
        return f"Error: unknown tool {name!r}", True
    try:
        return json.dumps(functions[name](**arguments)), False
    except (ValueError, TypeError) as exc:
        return f"Error: {exc}", True


async def anthropic_tool_loop(
    client: anthropic.AsyncAnthropic, *, messages: list[dict[str, Any]], max_steps: int = 8, **create: Any
) -> list[Message]:
    """Call Messages until the model stops asking for tools; appends every turn to ``messages`` in place."""
    responses: list[Message] = []
    for _ in range(max_steps):
        response = await client.messages.create(messages=messages, **create)  # type: ignore[arg-type]
        responses.append(response)
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in response.content]})
        if response.stop_reason != "tool_use":
            return responses
        results = []
        for block in response.content:
            if block.type == "tool_use":
                text, is_error = call_shop_tool(block.name, dict(block.input))
                results.append({"type": "tool_result", "tool_use_id": block.id, "content": text, "is_error": is_error})
        messages.append({"role": "user", "content": results})
    raise AssertionError(f"the model was still calling tools after {max_steps} steps")


async def responses_tool_loop(
    client: openai.AsyncOpenAI, *, items: list[dict[str, Any]], max_steps: int = 8, **create: Any
) -> list[Response]:
    """Call Responses until no function calls remain; appends output items and tool outputs to ``items``."""
    responses: list[Response] = []
    for _ in range(max_steps):
        response = await client.responses.create(input=items, **create)  # type: ignore[arg-type]
        responses.append(response)
        calls = []
        for item in response.output:
            items.append(item.model_dump(exclude_none=True))
            if item.type == "function_call":
                calls.append(item)
        if not calls:
            return responses
        for call in calls:
            text, _is_error = call_shop_tool(call.name, json.loads(call.arguments or "{}"))
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": text})
    raise AssertionError(f"the model was still calling tools after {max_steps} steps")
