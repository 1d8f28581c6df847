"""Structured outputs on the twin: a requested JSON schema constrains the answer text, as the vendors' do.

Vendor rules emulated (each checked by a test in tests/twin/test_twin_structured.py that quotes it):

- OpenAI (Responses `text.format`, Chat Completions `response_format`, type `json_schema`): "If set to true, the
  model will always follow the exact schema defined in the `schema` field" (the pinned SDK's `strict` docstring).
  Only strict formats constrain; a non-strict one is passed to the policy as is. The format is part of the cached
  prefix (the endpoints fold `text` / `response_format` into the prefix header).
- Anthropic (`output_config.format`, type `json_schema` with a `schema`, the pinned SDK's JSONOutputFormatParam):
  "JSON outputs (output_config.format): Get Claude's response in a specific JSON format" (the vendor's structured
  outputs page); always constrained.

A policy that already answers with JSON matching the schema keeps its answer. Otherwise the twin builds the
nearest instance of the schema from the policy's text, so a docs example runs offline and its output validates:
the text goes into one string field (the first whose name says it holds prose, `summary`, `answer`, `message`
..., else the first), another string field takes only what the text labels with its name (`ticket_id: T-9`) or
stays empty, numbers take the first number in the text. Tool calls are never rewritten.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import attrs
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.exceptions import Unresolvable

from segue_twin.errors import bad_request
from segue_twin.view import AssistantTurn, ConversationView, Policy

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def openai_schema(fmt: Any, param: str) -> Mapping[str, Any] | None:
    """The schema a strict OpenAI json_schema format constrains the answer to (None: not constrained)."""
    if fmt is None:
        return None
    if not isinstance(fmt, Mapping) or not isinstance(fmt.get("type"), str):
        raise bad_request(f"Invalid '{param}': expected an object with a 'type'.", param=param)
    if fmt["type"] != "json_schema":
        return None
    schema = fmt.get("schema")
    if not isinstance(schema, Mapping) or not isinstance(fmt.get("name"), str):
        raise bad_request(f"Missing required parameter: '{param}.name' and '{param}.schema'.", param=param)
    return schema if fmt.get("strict") is True else None


def anthropic_schema(output_config: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    fmt = (output_config or {}).get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), Mapping):
        raise bad_request(
            "output_config.format: Input should be {'type': 'json_schema', 'schema': {...}} (a JSON schema object)"
        )
    schema: Mapping[str, Any] = fmt["schema"]
    return schema


def respond(policy: Policy, view: ConversationView) -> AssistantTurn:
    """The policy's turn, its text constrained to the view's output schema when there is one."""
    turn = policy.respond(view)
    if view.output_schema is None or turn.tool_calls:
        return turn
    return attrs.evolve(turn, text=conform(turn.text, view.output_schema))


def conform(text: str, schema: Mapping[str, Any]) -> str:
    try:
        # An empty registry: a $ref is looked up inside the schema only, never fetched from where it points.
        if not any(Draft202012Validator(schema, registry=Registry()).iter_errors(json.loads(text))):
            return text
    except (ValueError, RecursionError, Unresolvable):
        pass
    return json.dumps(instance(schema, text), ensure_ascii=False, separators=(",", ":"))


#: Field names that hold prose: the text goes into the first of them (else into the first string field).
_PROSE = ("summary", "answer", "message", "text", "reply", "response", "explanation", "description", "content")


def instance(schema: Any, text: str, name: str = "", prose: bool = True) -> Any:
    """A value of `schema` made from `text` (the subset of JSON Schema structured outputs take). ``prose``: this
    value is the one that takes the whole text; another string takes only the value the text labels ``name``."""
    if not isinstance(schema, Mapping):
        return text if prose else ""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if not (isinstance(s, Mapping) and s.get("type") == "null")]
            return instance(options[0] if options else schema[key][0], text, name, prose)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        properties = dict(schema.get("properties") or {})
        strings = [k for k, sub in properties.items() if isinstance(sub, Mapping) and _stringy(sub)]
        named = [k for k in strings if any(word in k.lower() for word in _PROSE)]
        holder = (named or strings or [None])[0] if prose else None
        return {k: instance(sub, text, k, k == holder) for k, sub in properties.items()}
    if kind == "array":
        return [instance(schema.get("items", {}), text, name, prose)]
    if kind in ("integer", "number"):
        found = _NUMBER.search(text)
        number = float(found.group()) if found else 0
        return int(number) if kind == "integer" else number
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if prose:
        return text
    labelled = re.search(rf"(?<!\w){re.escape(name)}\s*[:=]\s*([^\s,;]+)", text, re.IGNORECASE) if name else None
    return labelled.group(1).rstrip(".") if labelled else ""


def _stringy(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "string" or (isinstance(kind, list) and "string" in kind)
