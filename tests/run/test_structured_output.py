"""Structured output (issue 20): `output_type=` on Agent, run and stream.

Every driver is exercised through its official SDK client on the twin, and the exact body each vendor receives is
asserted (and checked against the SDK's request TypedDicts): the native mechanism where the catalog says the path
takes it (`llm.structured_output: native`), the final-answer tool elsewhere. Then: a valid answer converted to
the app's type, an invalid one repaired once and then refused with the JSON path, a schema change between turns
dropping replayed reasoning with cause `output-schema`, and the same type giving byte-identical schemas across
processes.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, TypedDict

import attrs
import pytest
from anthropic.types import OutputConfigParam
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses import ResponseTextConfigParam
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming
from openai.types.shared_params import ResponseFormatJSONSchema

from segue import Agent, RunStore
from segue._core.contracts import FINAL_ANSWER_TOOL
from segue._core.json_types import output_spec
from segue.errors import InputError
from segue.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider, OpenRouterProvider
from segue_twin import Twin
from segue_twin.scripted import ScriptedPolicy
from segue_twin.view import AssistantTurn, PlannedCall
from tests._support.vendor_http import assert_typed


@attrs.frozen
class Count:
    country: str
    customers: int


@dataclasses.dataclass
class Reading:
    city: str
    celsius: float | None


class Tag(TypedDict):
    name: str
    weight: int


COUNT_SCHEMA = {
    "type": "object",
    "properties": {"country": {"type": "string"}, "customers": {"type": "integer"}},
    "required": ["country", "customers"],
    "additionalProperties": False,
}


def last_body(twin: Twin) -> dict[str, Any]:
    body: dict[str, Any] = twin.exchanges[-1].request
    return body


# -- the one conversion module ---------------------------------------------------------------------------------


def test_attrs_dataclass_and_typeddict_become_closed_strict_schemas() -> None:
    assert output_spec(Count).schema == COUNT_SCHEMA
    assert output_spec(Reading).schema == {
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"anyOf": [{"type": "number"}, {"type": "null"}]}},
        "required": ["city", "celsius"],
        "additionalProperties": False,
    }
    tag = output_spec(Tag)
    assert tag.schema["required"] == ["name", "weight"] and tag.format.strict is True
    assert output_spec(Tag).check({"name": "a", "weight": 2}) == ({"name": "a", "weight": 2}, None)
    assert output_spec(Reading).check({"city": "Oslo", "celsius": None}) == (Reading("Oslo", None), None)


def test_a_schema_dict_is_kept_and_strict_only_when_openai_strict_mode_takes_it() -> None:
    loose = {"type": "object", "properties": {"n": {"type": "integer"}}, "title": "Tally"}
    spec = output_spec(loose)
    assert spec.schema == loose and spec.format.name == "Tally" and spec.format.strict is False
    assert spec.target is None and spec.check({"n": 3}) == ({"n": 3}, None)
    assert output_spec(COUNT_SCHEMA).format.strict is True


def test_validation_names_the_json_path() -> None:
    value, error = output_spec(Count).read('{"country": "DE", "customers": "many"}')
    assert value is None and error == "at $.customers: 'many' is not of type 'integer'"
    assert output_spec(Count).read("Germany: 12")[1].startswith("at $: the answer is not JSON")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (int, "output_type must be an attrs class, a dataclass, a TypedDict, a pydantic model or a JSON Schema dict"),
        ({"type": "array", "items": {}}, "output_type must describe a JSON object (schema type 'object'), got type"),
        ({"type": "object", "properties": 3}, "output_type is not a valid JSON Schema: at $.properties"),
    ],
)
def test_an_output_type_that_cannot_be_converted_is_refused_before_any_row(tmp_path: Path, bad: Any, says: str) -> None:
    store = RunStore(f"sqlite:///{tmp_path}/runs.db")
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()), store=store)
    with pytest.raises(InputError, match=None) as caught:
        import asyncio

        asyncio.run(agent.run("Count the customers.", output_type=bad))
    assert says in str(caught.value)
    assert store.list_runs(tenant_id="default") == []


def test_a_class_field_json_cannot_describe_is_named() -> None:
    @attrs.frozen
    class Bad:
        when: complex

    with pytest.raises(InputError, match=r"output_type Bad\.when: cannot describe type <class 'complex'>"):
        output_spec(Bad)


TYPES_MODULE = """
import attrs, dataclasses
from typing import Literal, TypedDict

class Item(TypedDict):
    sku: str
    qty: int

@dataclasses.dataclass
class Line:
    item: Item
    note: str | None

@attrs.frozen
class Order:
    zeta: list[Line]
    alpha: Literal["open", "closed"]
    tags: dict[str, float]
"""


def test_the_same_type_gives_byte_identical_wire_across_processes(tmp_path: Path) -> None:
    (tmp_path / "order_types.py").write_text(TYPES_MODULE)
    code = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, sys.argv[1])
        from order_types import Order
        from segue._core.contracts import ProviderRequest
        from segue.generated import Message, TextBlock
        from segue._core.json_types import output_spec
        from segue.wire.anthropic import request as anthropic
        from segue.wire.openai_chat import request as openai_chat
        from segue.wire.openai_responses import request as openai_responses
        fmt = output_spec(Order).format
        req = ProviderRequest(system="s", messages=[Message(role="user", content=[TextBlock(text="q")])], output=fmt)
        import json, hashlib
        bodies = [
            anthropic.build_request(req, model="m", max_tokens=9, cache_ttl=None, thinking=None, output=fmt).body,
            openai_responses.build_request(req, model="m", reasoning=None, store=False, cache_key_prefix=None,
                                           output=fmt).body,
            openai_chat.build_request(req, model="m", vendor="openai", output=fmt).body,
            anthropic.build_request(req.__class__(system="s", messages=req.messages, tools=[fmt.as_tool()]),
                                    model="m", max_tokens=9, cache_ttl=None, thinking=None).body,
        ]
        print(output_spec(Order).hash, hashlib.sha256(json.dumps(bodies).encode()).hexdigest())
        """
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        ).stdout
        for seed in ("1", "2")
    ]
    assert runs[0] == runs[1] and runs[0].startswith("sha256:")


# -- each driver's native mechanism, or the final-answer tool ------------------------------------------------------


async def test_anthropic_sends_output_config_format_where_the_catalog_says_the_model_takes_it() -> None:
    twin = Twin(policy=ScriptedPolicy(["Germany has 12 customers."]))
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), "You count.")
    result = await agent.run("How many customers in DE?", output_type=Count)
    body = last_body(twin)
    assert_typed(body, MessageCreateParamsNonStreaming)
    expected: OutputConfigParam = {"format": {"type": "json_schema", "schema": COUNT_SCHEMA}}
    assert body["output_config"] == expected and "tools" not in body
    # The twin constrains the scripted text to the schema, as the vendor's constrained decoding would.
    assert result.status == "success" and result.output == Count(country="Germany has 12 customers.", customers=12)
    assert json.loads(result.answer or "") == attrs.asdict(result.output)


async def test_anthropic_falls_back_to_a_final_answer_tool_where_the_catalog_names_no_native_mechanism() -> None:
    twin = Twin(
        policy=ScriptedPolicy(
            [
                AssistantTurn(
                    tool_calls=(PlannedCall(name=FINAL_ANSWER_TOOL, arguments={"country": "DE", "customers": 12}),)
                )
            ]
        )
    )
    agent = Agent(AnthropicProvider("claude-fable-5", client=twin.anthropic_client()), "You count.")
    result = await agent.run("How many customers in DE?", output_type=Count)
    body = last_body(twin)
    assert_typed(body, MessageCreateParamsNonStreaming)
    assert "output_config" not in body
    assert body["tools"] == [
        {
            "name": FINAL_ANSWER_TOOL,
            "description": "Give your final answer (Count) by calling this tool once, with the answer as its "
            "arguments, instead of answering in text.",
            "input_schema": COUNT_SCHEMA,
        }
    ]
    assert result.status == "success" and result.output == Count("DE", 12)
    assert result.answer == '{"country":"DE","customers":12}'


RESPONSES_TEXT: ResponseTextConfigParam = {
    "format": {"type": "json_schema", "name": "Count", "schema": COUNT_SCHEMA, "strict": True}
}
CHAT_FORMAT: ResponseFormatJSONSchema = {
    "type": "json_schema",
    "json_schema": {"name": "Count", "schema": COUNT_SCHEMA, "strict": True},
}


@pytest.mark.parametrize(
    ("driver", "sdk_type", "key", "expected"),
    [
        (OpenAIResponsesProvider, ResponseCreateParamsNonStreaming, "text", RESPONSES_TEXT),
        (OpenAIChatProvider, CompletionCreateParamsNonStreaming, "response_format", CHAT_FORMAT),
    ],
    ids=["responses text.format", "chat response_format"],
)
async def test_openai_wires_send_their_json_schema_format_strict(
    driver: Any, sdk_type: Any, key: str, expected: Any
) -> None:
    twin = Twin(policy=ScriptedPolicy(['{"country": "DE", "customers": 7}']))
    result = await Agent(driver("gpt-4.1-mini", client=twin.openai_client()), "You count.").run(
        "Customers in DE?", output_type=Count
    )
    body = last_body(twin)
    assert_typed(body, sdk_type)
    assert body[key] == expected
    assert result.output == Count("DE", 7)


async def test_openrouter_uses_response_format_only_where_the_catalog_says_the_host_takes_it() -> None:
    twin = Twin(
        policy=ScriptedPolicy(
            [
                '{"country": "DE", "customers": 3}',
                AssistantTurn(
                    tool_calls=(PlannedCall(name=FINAL_ANSWER_TOOL, arguments={"country": "FR", "customers": 4}),)
                ),
            ]
        )
    )
    native = OpenRouterProvider("openai/gpt-4.1-mini", client=twin.openai_client())
    first = await Agent(native, "You count.").run("Customers in DE?", output_type=Count)
    assert last_body(twin)["response_format"]["json_schema"]["name"] == "Count"
    assert first.output == Count("DE", 3)
    tool_path = OpenRouterProvider("anthropic/claude-sonnet-4.6", client=twin.openai_client(), cache_ttl=None)
    second = await Agent(tool_path, "You count.").run("Customers in FR?", output_type=Count)
    body = last_body(twin)
    assert "response_format" not in body
    assert [t["function"]["name"] for t in body["tools"]] == [FINAL_ANSWER_TOOL]
    assert second.output == Count("FR", 4)


# -- validation, repair, refusal ---------------------------------------------------------------------------------


async def test_an_invalid_final_answer_is_repaired_once_with_the_validation_error() -> None:
    bad = AssistantTurn(
        tool_calls=(PlannedCall(name=FINAL_ANSWER_TOOL, arguments={"country": "DE", "customers": "many"}),)
    )
    good = AssistantTurn(
        tool_calls=(PlannedCall(name=FINAL_ANSWER_TOOL, arguments={"country": "DE", "customers": 12}),)
    )
    policy = ScriptedPolicy([bad, good])
    agent = Agent(AnthropicProvider("claude-fable-5", client=Twin(policy=policy).anthropic_client()), "You count.")
    result = await agent.run("How many customers in DE?", output_type=Count)
    assert result.status == "success" and result.output == Count("DE", 12) and result.iterations == 2
    repair = policy.views[1].tool_results()[-1]
    assert repair.is_error and "at $.customers: 'many' is not of type 'integer'" in repair.content


async def test_an_answer_still_invalid_after_the_repairs_is_an_error_result_naming_the_path(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}  # not strict
    policy = ScriptedPolicy(["three", '{"n": "3"}'])
    store = RunStore(f"sqlite:///{tmp_path}/runs.db")
    provider = OpenAIResponsesProvider("gpt-4.1-mini", client=Twin(policy=policy).openai_client())
    result = await Agent(provider, "You count.", store=store).run("How many?", output_type=schema)
    assert result.status == "error" and result.output is None and result.answer == '{"n": "3"}'
    assert result.error is not None and "at $.n: '3' is not of type 'integer'" in result.error
    assert "after 1 repair turn(s)" in result.error
    assert "at $: the answer is not JSON" in policy.views[1].last_user_text()
    stored = store.get_run(result.run_id, tenant_id="default")
    assert stored is not None and stored.status == "error" and stored.answer == '{"n": "3"}'


async def test_output_repairs_zero_refuses_at_once_and_the_stream_ends_with_the_value() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    twin = Twin(policy=ScriptedPolicy(["nope", '{"n": 3}']))
    agent = Agent(OpenAIResponsesProvider("gpt-4.1-mini", client=twin.openai_client()), output_type=schema)
    refused = await agent.run("How many?", output_repairs=0)
    assert refused.status == "error" and refused.iterations == 1
    events = [e async for e in agent.stream("How many?")]
    assert "".join(e.text or "" for e in events if e.type == "TEXT_DELTA") == '{"n": 3}'
    assert events[-1].type == "RUN_COMPLETED" and events[-1].result is not None
    assert events[-1].result.output == {"n": 3}


# -- replay and the prefix descriptor ---------------------------------------------------------------------------


async def test_a_schema_change_between_turns_drops_reasoning_with_cause_output_schema(tmp_path: Path) -> None:
    twin = Twin()
    provider = AnthropicProvider(
        "claude-sonnet-4-6", client=twin.anthropic_client(), thinking={"type": "enabled", "budget_tokens": 1024}
    )
    store = RunStore(f"sqlite:///{tmp_path}/runs.db")
    agent = Agent(provider, "You count.", store=store, output_type=Count, max_iterations=3)
    first = await agent.run("Customers in DE: 12")
    assert first.status == "success"
    same = await agent.run("And in FR: 4?", runs=[first.run_id], replay_last="all")
    assert same.replay is not None and same.replay.reasoning_kept == [first.run_id]
    changed = await agent.run("And in IT: 2?", runs=[first.run_id], replay_last="all", output_type=Reading)
    assert changed.replay is not None and changed.replay.reasoning_dropped == [first.run_id]
    assert [w.cause for w in changed.replay.warnings] == ["output-schema"]
    detail = store.get_run(first.run_id, tenant_id="default")
    assert detail is not None and detail.meta.segue_prefix is not None
    assert detail.meta.segue_prefix.output_hash == output_spec(Count).hash


async def test_retry_keeps_the_agents_type(tmp_path: Path) -> None:
    twin = Twin(policy=ScriptedPolicy(['{"country": "DE", "customers": 12}'] * 2))
    store = RunStore(f"sqlite:///{tmp_path}/runs.db")
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), store=store, output_type=Count
    )
    first = await agent.run("Customers in DE?")
    again = await agent.retry(first.run_id)
    assert isinstance(again.output, Count) and again.output.customers == 12


# -- the protocol ----------------------------------------------------------------------------------------------


def test_output_type_over_the_protocol_is_a_json_schema_and_output_plain_json(tmp_path: Path) -> None:
    from tests._support.protocol_harness import stdio_server, twin_agent, write_config

    config = write_config(tmp_path / "agents.json", [twin_agent([], store=f"sqlite:///{tmp_path}/runs.db")])
    with stdio_server(config) as client:
        answer = client.call("run", {"agent": "analyst", "input": "How many customers?", "output_type": COUNT_SCHEMA})
        result = answer["result"]["result"]
        assert result["status"] == "success"
        assert set(result["output"]) == {"country", "customers"} and isinstance(result["output"]["customers"], int)
        assert json.loads(result["answer"]) == result["output"]
        bad = client.call("run", {"agent": "analyst", "input": "How many?", "output_type": {"type": "array"}})
        assert "output_type must describe a JSON object" in bad["error"]["message"]
        assert client.call("runs/list", {})["result"]["runs"][0]["status"] == "success"  # only the good run
        assert len(client.call("runs/list", {})["result"]["runs"]) == 1


async def test_an_idempotent_repeat_returns_the_value_and_a_new_schema_is_a_new_request(tmp_path: Path) -> None:
    from segue.errors import IdempotencyConflictError

    twin = Twin(policy=ScriptedPolicy(['{"country": "DE", "customers": 12}']))
    store = RunStore(f"sqlite:///{tmp_path}/runs.db")
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), store=store)
    first = await agent.run("Customers in DE?", output_type=Count, idempotency_key="k1")
    again = await agent.run("Customers in DE?", output_type=Count, idempotency_key="k1")
    assert again.run_id == first.run_id and again.output == Count("DE", 12)
    with pytest.raises(IdempotencyConflictError):
        await agent.run("Customers in DE?", output_type=Reading, idempotency_key="k1")
