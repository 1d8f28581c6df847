"""The twin's structured-output rules (segue_twin.structured), each test quoting the rule and its source.

The quotes from the pinned SDKs are read from the installed packages, so an SDK bump that rewords a rule fails
here until the twin is checked against the new wording.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import anthropic.types.output_config_param as anthropic_output_config
import openai.types.responses.response_format_text_json_schema_config_param as responses_format
import openai.types.shared_params.response_format_json_schema as chat_format
import pytest
from jsonschema import Draft202012Validator

from segue_twin import Twin
from segue_twin.scripted import ScriptedPolicy
from segue_twin.structured import instance

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "celsius": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "sky": {"enum": ["clear", "cloudy"]},
        "hours": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["city", "celsius", "sky", "hours"],
    "additionalProperties": False,
}
STRICT_QUOTE = "If set to true, the model will always follow the exact schema defined in the `schema`"


def _responses(twin: Twin, fmt: dict[str, Any] | None, text: str = "Oslo is 12 degrees") -> Any:
    client = twin.openai_client()
    extra = {"text": {"format": fmt}} if fmt is not None else {}
    import asyncio

    return asyncio.run(client.responses.create(model="gpt-4.1-mini", input=text, **extra))


def test_strict_json_schema_format_constrains_the_answer_openai_responses() -> None:
    """Rule: a strict `json_schema` text.format makes the answer follow the schema. Source: the pinned openai SDK's
    ResponseFormatTextJSONSchemaConfigParam.strict: "If set to true, the model will always follow the exact schema
    defined in the `schema` field"."""
    assert STRICT_QUOTE in inspect.getsource(responses_format).replace("\n    ", " ")
    twin = Twin(policy=ScriptedPolicy(["Oslo is 12 degrees and clear."]))
    fmt = {"type": "json_schema", "name": "Weather", "schema": SCHEMA, "strict": True}
    answer = json.loads(_responses(twin, fmt).output_text)
    assert not list(Draft202012Validator(SCHEMA).iter_errors(answer))
    assert answer == {"city": "Oslo is 12 degrees and clear.", "celsius": 12.0, "sky": "clear", "hours": [12]}


def test_a_non_strict_format_is_not_constrained() -> None:
    """Rule: only `strict: true` promises schema adherence ("Only a subset of JSON Schema is supported when `strict`
    is `true`", same docstring): without it the twin passes the policy's answer through."""
    assert "Only a subset of JSON Schema is supported when `strict` is `true`" in inspect.getsource(
        responses_format
    ).replace("\n    ", " ")
    twin = Twin(policy=ScriptedPolicy(["not json"]))
    fmt = {"type": "json_schema", "name": "Weather", "schema": SCHEMA, "strict": False}
    assert _responses(twin, fmt).output_text == "not json"


def test_an_answer_that_already_matches_is_kept() -> None:
    """Rule (twin design): a policy that answers with matching JSON keeps its answer, so scripted tests control it."""
    good = {"city": "Oslo", "celsius": None, "sky": "cloudy", "hours": []}
    twin = Twin(policy=ScriptedPolicy([json.dumps(good)]))
    fmt = {"type": "json_schema", "name": "Weather", "schema": SCHEMA, "strict": True}
    assert json.loads(_responses(twin, fmt).output_text) == good


def test_chat_response_format_json_schema_strict_constrains_the_answer() -> None:
    """Rule: Chat Completions `response_format: {"type": "json_schema", "json_schema": {...}}` "enables Structured
    Outputs which ensures the model will match your supplied JSON schema" (the pinned SDK's
    CompletionCreateParams.response_format); strict as above (JSONSchema.strict)."""
    assert STRICT_QUOTE in inspect.getsource(chat_format).replace("\n    ", " ")
    import asyncio

    twin = Twin(policy=ScriptedPolicy(["Oslo, 3 degrees"]))
    client = twin.openai_client()
    fmt = {"type": "json_schema", "json_schema": {"name": "Weather", "schema": SCHEMA, "strict": True}}
    done = asyncio.run(
        client.chat.completions.create(
            model="gpt-4.1-mini",
            messages=[{"role": "user", "content": "Weather?"}],
            response_format=fmt,  # type: ignore[arg-type]
        )
    )
    answer = json.loads(done.choices[0].message.content or "")
    assert answer["celsius"] == 3.0 and not list(Draft202012Validator(SCHEMA).iter_errors(answer))


def test_anthropic_output_config_format_constrains_the_answer() -> None:
    """Rule: `output_config.format` ({"type": "json_schema", "schema": ...}) is "A schema to specify Claude's output
    format in responses" (the pinned anthropic SDK's OutputConfigParam.format); the vendor's structured outputs page:
    "JSON outputs (output_config.format): Get Claude's response in a specific JSON format"."""
    assert "A schema to specify Claude's output format in responses." in inspect.getsource(anthropic_output_config)
    import asyncio

    twin = Twin(policy=ScriptedPolicy(["Oslo: 7 degrees"]))
    done = asyncio.run(
        twin.anthropic_client().messages.create(
            model="claude-sonnet-4-6",
            max_tokens=200,
            messages=[{"role": "user", "content": "Weather?"}],
            output_config={"format": {"type": "json_schema", "schema": SCHEMA}},
        )
    )
    answer = json.loads(done.content[0].text)  # type: ignore[union-attr]
    assert answer["celsius"] == 7.0 and not list(Draft202012Validator(SCHEMA).iter_errors(answer))


@pytest.mark.parametrize(
    "bad", [{"type": "json_schema"}, {"type": "json_schema", "schema": "x"}, {"type": "text", "schema": {}}]
)
def test_anthropic_output_config_format_needs_type_json_schema_and_a_schema(bad: dict[str, Any]) -> None:
    """Rule: JSONOutputFormatParam has `schema: Required[Dict[str, object]]` and
    `type: Required[Literal["json_schema"]]` (pinned anthropic SDK); anything else is a 400 invalid_request_error."""
    import asyncio

    import anthropic

    client = Twin().anthropic_client()
    with pytest.raises(anthropic.BadRequestError, match=r"output_config\.format"):
        asyncio.run(
            client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=10,
                messages=[{"role": "user", "content": "x"}],
                output_config={"format": bad},  # type: ignore[typeddict-item]
            )
        )


def test_changing_the_openai_format_misses_the_prefix_cache() -> None:
    """Rule: the structured-output format is part of the cached prefix, so changing it breaks the prefix. Source:
    OpenAI's prompt caching guide as summarised in the shared reference notes (wire-formats.md: "Changing
    `text.format`, `reasoning.effort` or `text.verbosity` breaks the prefix")."""
    twin = Twin(policy=ScriptedPolicy(["Oslo 1"] * 3))
    long_input = "weather report " * 400
    fmt = {"type": "json_schema", "name": "Weather", "schema": SCHEMA, "strict": True}
    other = {**fmt, "name": "Forecast"}
    _responses(twin, fmt, long_input)
    same = _responses(twin, fmt, long_input)
    changed = _responses(twin, other, long_input)
    assert same.usage.input_tokens_details.cached_tokens > 1000
    assert changed.usage.input_tokens_details.cached_tokens == 0


def test_instances_cover_the_schema_subset_structured_outputs_take() -> None:
    """Twin design: the nearest instance of a schema from the policy's text (strings take the text, numbers the
    first number in it), valid against the schema."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": ["integer", "null"]},
            "b": {"const": "x"},
            "c": {"type": "object", "properties": {"d": {"type": "boolean"}}},
        },
    }
    value = instance(schema, "it is -4.5 today")
    assert value == {"a": -4, "b": "x", "c": {"d": False}}
    assert not list(Draft202012Validator(schema).iter_errors(value))
