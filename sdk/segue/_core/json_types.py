"""Python types as JSON Schema, and JSON values back as Python values: the one place segue converts between them.

Two users: `@tool` describes a function's arguments (`json_schema_for`), and structured output (`OutputSpec`)
describes the final answer an app asked for with `output_type=`: an attrs class, a dataclass, a TypedDict, or a
JSON Schema dict given as is.

No well-kept library covers this: attrs and cattrs convert values, not types to schemas, and pydantic (only a
dependency of the vendor SDKs, not of segue) describes dataclasses and TypedDicts but not attrs classes, and
in a shape (titles, `$defs`, optional fields left out of `required`) that OpenAI's strict mode refuses. So the
type -> schema step is written here, small and strict-mode shaped (every object closed, every field required,
optional fields as `X | None`), while validation is jsonschema's and conversion is cattrs'.

The schema a type gives is canonical: the same type gives byte-identical JSON (`canonical_json`) in every
process, so the wire format segue sends, and its hash in the prefix descriptor, never change by accident.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args, get_origin, is_typeddict

import attrs
import cattrs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from segue._core.contracts import OutputFormat
from segue._core.hashing import canonical_hash, canonical_json
from segue.errors import InputError

#: OpenAI's rule for a response format's name: "a-z, A-Z, 0-9, or contain underscores and dashes, with a maximum
#: length of 64" (the pinned SDK's ResponseFormatTextJSONSchemaConfigParam.name).
_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_TYPES_HINT = (
    "use str, int, float, bool, None, list[...], dict[str, ...], Literal[...], a union of them, or an attrs class, "
    "dataclass or TypedDict of them"
)
_TOOL_TYPES_HINT = "use str, int, float, bool, list[...], dict[str, ...], Literal[...] or a union of them"
_converter = cattrs.Converter()
#: What `output_type=` takes: a class (attrs, dataclass, TypedDict) or a JSON Schema dict.
OutputType = type | Mapping[str, Any]


def json_schema_for(annotation: Any, where: str, *, records: bool = False) -> dict[str, Any]:
    """The JSON Schema of a type annotation; TypeError naming `where` for a type JSON cannot describe.

    `records`: attrs classes, dataclasses and TypedDicts become closed objects (structured output converts the
    answer back to them). Tools take plain JSON arguments, so for them a class is refused as before."""
    return _schema(annotation, where, (), records)


def _schema(annotation: Any, where: str, seen: tuple[type, ...], records: bool) -> dict[str, Any]:
    if annotation is Any:
        return {}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}
    if isinstance(annotation, type) and annotation in simple:
        return {"type": simple[annotation]}
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (list, Sequence, tuple, set, frozenset) or annotation in (list, tuple):
        return {"type": "array", "items": _schema(args[0] if args else Any, where, seen, records)}
    if origin in (dict, Mapping) or annotation is dict:
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": _schema(value, where, seen, records)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema(a, where, seen, records) for a in args]}
    if records and isinstance(annotation, type) and _is_record(annotation):
        if annotation in seen:
            raise TypeError(f"{where}: {annotation.__name__} refers to itself; recursive types cannot be described")
        return _record(annotation, where, (*seen, annotation))
    hint = _TYPES_HINT if records else _TOOL_TYPES_HINT
    raise TypeError(f"{where}: cannot describe type {annotation!r} as JSON Schema; {hint}")


def _is_record(cls: type) -> bool:
    return attrs.has(cls) or dataclasses.is_dataclass(cls) or is_typeddict(cls)


def _record(cls: type, where: str, seen: tuple[type, ...]) -> dict[str, Any]:
    """A closed object with every field required (strict modes need both); optional fields are `X | None`."""
    hints = typing.get_type_hints(cls)
    if attrs.has(cls):
        names = [f.alias or f.name for f in attrs.fields(cls) if f.init]
        hints = {f.alias or f.name: hints[f.name] for f in attrs.fields(cls) if f.init}
    elif dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls) if f.init]
    else:
        names = list(hints)
    properties = {n: _schema(hints[n], f"{where}.{n}", seen, True) for n in names}
    return {"type": "object", "properties": properties, "required": names, "additionalProperties": False}


@attrs.frozen(kw_only=True)
class OutputSpec:
    """What a run asked its final answer to be: the wire format (name, canonical schema, strict) and the Python
    type its value converts to (None: plain JSON, for a schema given as a dict)."""

    format: OutputFormat
    target: Any = None
    _validator: Draft202012Validator = attrs.field(eq=False, repr=False, alias="validator")

    @property
    def schema(self) -> dict[str, Any]:
        return dict(self.format.schema)

    @property
    def hash(self) -> str:
        """What the prefix descriptor records: a change of name, schema or strictness is a prefix change."""
        return format_hash(self.format)

    def read(self, text: str) -> tuple[Any, str | None]:
        """The answer's value converted to the target type, or (None, why not) naming the JSON path that failed."""
        try:
            value = json.loads(text)
        except ValueError as e:
            return None, f"at $: the answer is not JSON ({e}); answer with only a JSON value matching the schema"
        return self.check(value)

    def check(self, value: Any) -> tuple[Any, str | None]:
        errors = sorted(self._validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            return None, f"at {first.json_path}: {first.message}{more}"
        if self.target is None:
            return value, None
        try:
            return _converter.structure(value, self.target), None
        except Exception as e:  # cattrs reports a group of errors; the schema passed, so this is rare
            return None, f"at $: the value does not convert to {self.target.__name__}: {e}"


def format_hash(output: OutputFormat) -> str:
    return canonical_hash({"name": output.name, "schema": dict(output.schema), "strict": output.strict})


def output_spec(output_type: Any) -> OutputSpec:
    """The spec for `output_type=` (an attrs class, dataclass, TypedDict or JSON Schema dict); InputError naming
    the value and what to pass otherwise."""
    if isinstance(output_type, Mapping):
        schema = _plain(output_type)
        title = schema.get("title")
        name = title if isinstance(title, str) else "output"
        target = None
    elif isinstance(output_type, type) and _is_record(output_type):
        try:
            schema = json_schema_for(output_type, f"output_type {output_type.__name__}", records=True)
        except (TypeError, NameError) as e:
            raise InputError(str(e)) from None
        name, target = output_type.__name__, output_type
    else:
        raise InputError(
            f"output_type must be an attrs class, a dataclass, a TypedDict or a JSON Schema dict, got "
            f"{output_type!r:.80}; describe the answer as a class of typed fields (or pass its JSON Schema)"
        )
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        raise InputError(f"output_type is not a valid JSON Schema: at {e.json_path}: {e.message}") from None
    if schema.get("type") != "object":
        raise InputError(
            f"output_type must describe a JSON object (schema type 'object'), got type {schema.get('type')!r}: "
            "vendors' structured outputs and final-answer tools take objects; wrap the value in a field"
        )
    fmt = OutputFormat(name=_NAME.sub("_", name)[:64] or "output", schema=schema, strict=_strict_ok(schema))
    return OutputSpec(format=fmt, target=target, validator=Draft202012Validator(schema))


def _plain(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema as canonical plain JSON (a copy: the app's dict may change later, the run's may not)."""
    try:
        loaded: dict[str, Any] = json.loads(canonical_json(dict(schema)))
    except (TypeError, ValueError) as e:
        raise InputError(f"output_type must be plain JSON (a JSON Schema dict): {e}") from None
    return loaded


def _strict_ok(schema: Any) -> bool:
    """Whether OpenAI's strict mode takes the schema: every object closed (`additionalProperties: false`) with
    all its properties required. Class-made schemas always are; a dict that is not is sent with strict false."""
    if isinstance(schema, list):
        return all(_strict_ok(s) for s in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False or set(schema.get("required", [])) != set(props):
            return False
    return all(_strict_ok(v) for k, v in schema.items() if k not in ("enum", "const", "default", "examples"))
