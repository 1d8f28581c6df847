"""The twin's default policy answers an app's own tools: it calls a tool the message names (arguments from the
tool's JSON Schema), reports the result, and otherwise says that it is the twin and what it can do."""

from __future__ import annotations

import json
from typing import Any, Literal

import jsonschema
import pytest

from segue import Agent, tool
from segue._core.contracts import Provider
from segue.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider
from segue_twin import DefaultPolicy, Twin
from segue_twin.app_policy import named_tools
from segue_twin.arguments import build_arguments
from segue_twin.view import ToolSpec

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "detailed": {"type": "boolean", "default": False},
    },
    "required": ["city", "days", "unit"],
}
ORDER = {
    "type": "object",
    "properties": {"order_number": {"type": "integer"}},
    "required": ["order_number"],
}


@tool
def get_weather(city: str, days: int, unit: Literal["celsius", "fahrenheit"] = "celsius") -> dict[str, Any]:
    """Forecast the weather.

    Args:
        city: the city
        days: how many days ahead
        unit: temperature unit
    """
    return {"city": city, "days": days, "unit": unit, "high": 21}


@tool
def lookup_order(order_number: int) -> str:
    """Look up an order's shipping status by its order number.

    Args:
        order_number: the number printed on the receipt
    """
    return f"order {order_number}: shipped"


def driver(kind: str, twin: Twin) -> Provider:
    if kind == "anthropic":
        return AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client())
    if kind == "responses":
        return OpenAIResponsesProvider("gpt-5", client=twin.openai_client())
    return OpenAIChatProvider("gpt-4.1", client=twin.openai_client())


@pytest.mark.parametrize("kind", ["anthropic", "responses", "chat"])
async def test_an_agent_with_its_own_tools_gets_the_named_tool_called_and_its_result_reported(kind: str) -> None:
    twin = Twin()
    agent = Agent(driver(kind, twin), "You help shoppers.", [get_weather, lookup_order], None)
    result = await agent.run("Use get_weather for 'Lisbon', 3 days, in fahrenheit please.")
    assert result.status == "success" and result.iterations == 2
    called = twin.exchanges[0].response
    assert _calls(kind, called) == [("get_weather", {"city": "Lisbon", "days": 3, "unit": "fahrenheit"})]
    expected = {"city": "Lisbon", "days": 3, "unit": "fahrenheit", "high": 21}
    assert result.answer is not None and result.answer.startswith("get_weather returned: ")
    assert json.loads(result.answer.removeprefix("get_weather returned: ")) == expected


async def test_a_tool_is_named_clearly_by_its_description_words() -> None:
    twin = Twin()
    agent = Agent(driver("anthropic", twin), "p", [get_weather, lookup_order], None)
    result = await agent.run("What is the shipping status of order 1042?")
    assert result.answer == "lookup_order returned: order 1042: shipped"


async def test_a_message_that_names_no_tool_gets_an_answer_saying_what_the_twin_is() -> None:
    twin = Twin()
    agent = Agent(driver("chat", twin), "p", [get_weather, lookup_order], None)
    result = await agent.run("Tell me a joke.")
    assert result.status == "success" and result.iterations == 1
    assert result.answer is not None and result.answer.startswith("I am segue's twin, an offline stand-in")
    assert "this request offers get_weather, lookup_order" in result.answer
    assert "list_tables, describe_table, run_query" in result.answer

    bare = await Agent(driver("chat", Twin()), "p", [], None).run("Which tables are there?")
    assert bare.answer is not None and "this request offers no tools" in bare.answer


def test_naming_rules() -> None:
    weather = ToolSpec(name="get_weather", description="Forecast the weather for a city.", parameters=WEATHER)
    order = ToolSpec(name="lookupOrder", description="Look up an order's shipping status.", parameters=ORDER)
    specs = [weather, order]
    assert named_tools(specs, "call get weather") == [weather]  # underscores read as spaces
    assert named_tools(specs, "please lookup order 7") == [order]  # camelCase split too
    assert named_tools(specs, "use get_weather and lookupOrder") == specs  # both, in offer order
    assert named_tools(specs, "the weather forecast for Oslo") == [weather]  # two description words
    assert named_tools(specs, "the weather?") == []  # one word is not clear enough
    twins = [ToolSpec(name="a", description="ship orders"), ToolSpec(name="b", description="ship orders")]
    assert named_tools(twins, "ship my orders") == []  # a tie is not clear either
    assert named_tools(specs, "use get_weather", exclude={"get_weather"}) == []


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("weather in 'Paris' for 3 days in fahrenheit", {"city": "Paris", "days": 3, "unit": "fahrenheit"}),
        ("city: Berlin, days=5.", {"city": "Berlin", "days": 5, "unit": "celsius"}),
        ('days: 2 and "Rome" for 9', {"city": "Rome", "days": 2, "unit": "celsius"}),
        ("nothing to go on", {"city": "<city>", "days": 1, "unit": "celsius"}),
    ],
)
def test_arguments_come_from_the_message_then_the_schema(message: str, expected: dict[str, Any]) -> None:
    arguments = build_arguments(WEATHER, message)
    assert arguments == expected
    jsonschema.validate(arguments, WEATHER)


def test_placeholders_follow_the_schema() -> None:
    schema = {
        "type": "object",
        "$defs": {"Range": {"type": "object", "properties": {"low": {"type": "number", "exclusiveMinimum": 0}}}},
        "properties": {
            "window": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/Range"}]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "strict": {"type": "boolean"},
            "mode": {"type": "string", "examples": ["fast"]},
            "version": {"const": 2},
            "limit": {"type": ["integer", "null"], "default": 10},
        },
        "required": ["window", "tags", "strict", "mode", "version", "limit"],
    }
    schema["$defs"]["Range"]["required"] = ["low"]  # type: ignore[index]
    arguments = build_arguments(schema, "no values here")
    assert arguments == {"window": {"low": 1}, "tags": [], "strict": False, "mode": "fast", "version": 2, "limit": 10}
    jsonschema.validate(arguments, schema)
    assert build_arguments({"type": "object", "properties": {}}, "x") == {}


async def test_the_demo_tools_keep_the_shop_analyst_and_a_named_app_tool_is_still_called() -> None:
    from segue.demo.chat import demo_tools

    shop = demo_tools(with_export=True)
    twin = Twin()
    analyst = await Agent(driver("anthropic", twin), "p", shop, None).run("How many orders are there?")
    assert analyst.answer == "Orders:\n- orders: 220"
    exported = await Agent(driver("anthropic", twin), "p", shop, None).run(
        "Run export_csv with sql: 'SELECT COUNT(*) AS n FROM orders'"
    )
    assert exported.answer == "export_csv returned: n\n220"
    assert isinstance(Twin().policy, DefaultPolicy)


def _calls(kind: str, response: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    if kind == "anthropic":
        return [(b["name"], b["input"]) for b in response["content"] if b["type"] == "tool_use"]
    if kind == "responses":
        return [(i["name"], json.loads(i["arguments"])) for i in response["output"] if i["type"] == "function_call"]
    calls = response["choices"][0]["message"].get("tool_calls") or []
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]
