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
    assert named_tools(specs, "the forecast?") == []  # one description word is not clear enough
    assert named_tools(specs, "the weather?") == [weather]  # a word of the name counts twice
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


# -- issue 40 item 1: natural questions, no made-up arguments, failures that are not clean answers -------------


@tool
def look_up_order(order_id: str) -> str:
    """Look up an order's shipping status.

    Args:
        order_id: the order's id
    """
    if order_id != "4417":
        raise KeyError(f"no order {order_id}")
    return "shipped on 2026-12-01"


@pytest.mark.parametrize("kind", ["anthropic", "responses", "chat"])
async def test_a_natural_question_gives_the_argument_after_the_parameters_name(kind: str) -> None:
    twin = Twin()
    result = await Agent(driver(kind, twin), "You are a support bot.", [look_up_order], None).run(
        "where is my order 4417?"
    )
    assert _calls(kind, twin.exchanges[0].response) == [("look_up_order", {"order_id": "4417"})]
    assert result.answer == "look_up_order returned: shipped on 2026-12-01"
    assert not [n for n in result.notes or [] if n.kind in ("twin-note", "tool-failed")]


@pytest.mark.parametrize(
    ("message", "expected", "made_up"),
    [
        ("Where is order #A-17?", {"order_id": "A-17"}, ()),
        ("my order number is 55", {"order_id": "55"}, ()),
        ("order_id: x9, thanks", {"order_id": "x9"}, ()),
        ("where is my order?", {"order_id": "<order_id>"}, ("order_id",)),
    ],
)
def test_fill_reads_identifiers_and_lists_what_it_made_up(
    message: str, expected: dict[str, Any], made_up: tuple[str, ...]
) -> None:
    from segue_twin.arguments import fill

    filled = fill(look_up_order.parameters, message)
    assert (filled.arguments, filled.made_up) == (expected, made_up)
    assert fill(WEATHER, "nothing to go on").made_up == ("city", "days")  # unit has an enum: not made up


@pytest.mark.parametrize(("kind", "streamed"), [("anthropic", False), ("anthropic", True), ("chat", True)])
async def test_no_value_in_the_message_means_no_call_and_a_note_and_line_saying_so(
    kind: str, streamed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    twin = Twin()
    agent = Agent(driver(kind, twin), "You are a support bot.", [look_up_order], None)
    if streamed:
        events = [e async for e in agent.stream("where is my order?")]
        result = events[-1].result
    else:
        result = await agent.run("where is my order?")
    assert result is not None and result.iterations == 1
    assert _calls(kind, twin.exchanges[0].response) == []  # never sent "<order_id>"
    assert result.answer is not None and result.answer.startswith(
        "I am segue's twin, an offline stand-in for the model: I found no value for look_up_order's order_id in "
        "your message, so I called no tool"
    )
    [note] = [n for n in result.notes or [] if n.kind == "twin-note"]
    assert note.message.startswith("segue's twin found no value for look_up_order's order_id in the message")
    assert f"run {result.run_id}: segue's twin found no value" in caplog.text


async def test_a_tool_error_the_model_never_recovered_from_is_noted_and_typed_fields_stay_apart(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import attrs

    @attrs.frozen
    class Ticket:
        ticket_id: str
        summary: str

    agent = Agent(driver("anthropic", Twin()), "You are a support bot.", [look_up_order], None)
    result = await agent.run("Where is order 999?", output_type=Ticket)
    assert result.status == "success"
    [note] = [n for n in result.notes or [] if n.kind == "tool-failed"]
    assert note.message.startswith("the last call to look_up_order failed and the model answered without calling")
    assert "KeyError" in note.message and f"run {result.run_id}: the last call to look_up_order failed" in caplog.text
    # The error text is the answer's prose, not every string field's value.
    assert result.output == Ticket(ticket_id="", summary=result.output.summary)
    assert "no order 999" in result.output.summary


async def test_a_failure_followed_by_a_call_that_succeeded_is_no_tool_failed_note() -> None:
    from segue_twin import AssistantTurn, PlannedCall, ScriptedPolicy

    script = ScriptedPolicy(
        [
            AssistantTurn(tool_calls=(PlannedCall(name="look_up_order", arguments={"order_id": "1"}),)),
            AssistantTurn(tool_calls=(PlannedCall(name="look_up_order", arguments={"order_id": "4417"}),)),
            "Order 4417 shipped.",
        ]
    )
    agent = Agent(driver("anthropic", Twin(policy=script)), "p", [look_up_order], None)
    result = await agent.run("Where is my order?")
    assert script.views[1].tool_results()[0].is_error  # the first call did fail
    assert result.answer == "Order 4417 shipped." and not [n for n in result.notes or [] if n.kind == "tool-failed"]


def test_a_typed_answer_takes_a_labelled_value_and_puts_the_prose_in_one_field() -> None:
    from segue_twin.structured import instance

    schema = {
        "type": "object",
        "properties": {"ticket_id": {"type": "string"}, "note": {"type": "string"}, "summary": {"type": "string"}},
    }
    assert instance(schema, "Opened ticket_id: T-9.") == {
        "ticket_id": "T-9",
        "note": "",
        "summary": "Opened ticket_id: T-9.",
    }


async def test_a_final_answer_tool_call_after_a_failed_tool_is_noted_too() -> None:
    """The same note when the typed answer arrives as the final-answer tool (a path without native structured
    output), not only as text; a final answer after a call that succeeded carries none."""
    import attrs

    from segue.testing import ScriptedProvider, call

    @attrs.frozen
    class Ticket:
        summary: str

    def agent(order: str) -> Agent:
        script = ScriptedProvider.of(
            call("look_up_order", {"order_id": order}), call("final_answer", {"summary": "the order"})
        )
        return Agent(script, "You are a support bot.", [look_up_order], None)

    failed = await agent("999").run("Where is order 999?", output_type=Ticket)
    assert failed.status == "success" and failed.output == Ticket(summary="the order")
    [note] = [n for n in failed.notes or [] if n.kind == "tool-failed"]
    assert note.message.startswith("the last call to look_up_order failed") and "no order 999" in note.message
    fine = await agent("4417").run("Where is order 4417?", output_type=Ticket)
    assert fine.status == "success" and not [n for n in fine.notes or [] if n.kind == "tool-failed"]
