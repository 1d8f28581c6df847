"""Python types as JSON Schema, and JSON values back as Python values: the one place segue converts between them.

Two users: `@tool` describes a function's arguments (`json_schema_for`) and converts the model's arguments back
(`from_json`), and structured output (`OutputSpec`) describes the final answer an app asked for with
`output_type=`: an attrs class, a dataclass, a TypedDict, a pydantic model, or a JSON Schema dict given as is.

No well-kept library covers this: attrs and cattrs convert values, not types to schemas, and pydantic (the app's
if it uses it, never imported by segue) describes dataclasses and TypedDicts but not attrs classes, and in a
shape (titles, `$defs`, optional fields left out of `required`) that OpenAI's strict mode refuses. So the
type -> schema step is written here, small and strict-mode shaped (every object closed, every field required,
optional fields as `X | None`), with `Annotated` constraints and descriptions (annotated-types, pydantic's
`Field`) read by `json_constraints`; validation is jsonschema's, conversion cattrs' (pydantic's own
`model_validate` for a pydantic model, so its validators run).

The schema a type gives is canonical: the same type gives byte-identical JSON (`canonical_json`) in every
process, so the wire format segue sends, and its hash in the prefix descriptor, never change by accident.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, get_args, get_origin, is_typeddict

import attrs
import cattrs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator

from segue._core.contracts import OutputFormat
from segue._core.hashing import canonical_hash, canonical_json
from segue._core.json_constraints import annotated_keywords
from segue._core.json_schema import errors_of, local_validator, past_the_limit, too_deep
from segue.errors import InputError

#: OpenAI's rule for a response format's name: "a-z, A-Z, 0-9, or contain underscores and dashes, with a maximum
#: length of 64" (the pinned SDK's ResponseFormatTextJSONSchemaConfigParam.name).
_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_TYPES_HINT = (
    "use str, int, float, bool, None, list[...], dict[str, ...], Literal[...], an Enum, date, datetime, time, a "
    "union of them, or an attrs class, dataclass, TypedDict or pydantic model of them (Annotated constraints allowed)"
)
#: JSON Schema formats of the date and time types (ISO 8601 text on the wire), datetime before its base class date.
_FORMATS: tuple[tuple[type, str], ...] = (
    (datetime.datetime, "date-time"),
    (datetime.date, "date"),
    (datetime.time, "time"),
)
#: What `output_type=` takes: a class (attrs, dataclass, TypedDict, pydantic model) or a JSON Schema dict.
OutputType = type | Mapping[str, Any]


def json_schema_for(annotation: Any, where: str) -> dict[str, Any]:
    """The JSON Schema of a type annotation; TypeError naming `where` for a type JSON cannot describe.

    Classes (attrs, dataclasses, TypedDicts, pydantic models) become closed objects with every field required
    (strict modes need both; optional fields are `X | None`); `from_json` converts a value back to them."""
    return _schema(annotation, where, ())


def _schema(annotation: Any, where: str, seen: tuple[type, ...]) -> dict[str, Any]:
    if annotation is Any:
        return {}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}
    if isinstance(annotation, type) and annotation in simple:
        return {"type": simple[annotation]}
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return annotated_keywords(_schema(args[0], where, seen), annotation.__metadata__, where)
    if origin is Literal:
        return {"enum": list(args)}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum(annotation, where)
    for cls, fmt in _FORMATS:
        if isinstance(annotation, type) and issubclass(annotation, cls):
            return {"type": "string", "format": fmt}
    if origin in (list, Sequence, tuple, set, frozenset) or annotation in (list, tuple):
        return {"type": "array", "items": _schema(args[0] if args else Any, where, seen)}
    if origin in (dict, Mapping) or annotation is dict:
        value = args[1] if len(args) == 2 else Any
        return {"type": "object", "additionalProperties": _schema(value, where, seen)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema(a, where, seen) for a in args]}
    if isinstance(annotation, type) and _is_record(annotation):
        if annotation in seen:
            raise TypeError(f"{where}: {annotation.__name__} refers to itself; recursive types cannot be described")
        return _record(annotation, where, (*seen, annotation))
    raise TypeError(f"{where}: cannot describe type {annotation!r} as JSON Schema; {_TYPES_HINT}")


def _enum(cls: type[enum.Enum], where: str) -> dict[str, Any]:
    values = [m.value for m in cls]
    for kind, name in ((str, "string"), (int, "integer")):
        if values and all(isinstance(v, kind) and not isinstance(v, bool) for v in values):
            return {"type": name, "enum": values}
    raise TypeError(f"{where}: the values of Enum {cls.__name__} must be all strings or all integers, got {values!r}")


def pydantic_model(annotation: Any) -> bool:
    """Whether `annotation` is a pydantic model class. pydantic is the app's, never imported here: a model class
    exists only if the app imported it."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


def _is_record(cls: type) -> bool:
    return attrs.has(cls) or dataclasses.is_dataclass(cls) or _is_typeddict(cls) or pydantic_model(cls)


def _is_typeddict(cls: type) -> bool:
    """typing's TypedDict, or typing_extensions' (which pydantic asks for before Python 3.12)."""
    extensions = sys.modules.get("typing_extensions")
    return is_typeddict(cls) or (extensions is not None and extensions.is_typeddict(cls))


def _record(cls: type, where: str, seen: tuple[type, ...]) -> dict[str, Any]:
    """A closed object with every field required (strict modes need both); optional fields are `X | None`. A field
    is named as the JSON carries it (an attrs alias, a pydantic alias)."""
    if pydantic_model(cls):
        fields = {
            f.alias or n: _field_annotation(f.annotation, f)
            for n, f in cls.model_fields.items()  # type: ignore[attr-defined]
        }
    else:
        hints = typing.get_type_hints(cls, include_extras=True)
        if attrs.has(cls):
            fields = {f.alias or f.name: hints[f.name] for f in attrs.fields(cls) if f.init}
        elif dataclasses.is_dataclass(cls):
            fields = {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}
        else:
            fields = hints
    properties = {n: _schema(t, f"{where}.{n}", seen) for n, t in fields.items()}
    return {"type": "object", "properties": properties, "required": list(fields), "additionalProperties": False}


def _field_annotation(annotation: Any, field: Any) -> Any:
    """A pydantic field's type with its Field(...) (description, constraints) as Annotated metadata again."""
    return Annotated[annotation, field] if field.description or field.metadata else annotation


def from_json(value: Any, annotation: Any) -> Any:
    """A JSON value (already valid against `json_schema_for(annotation)`) as the annotation's Python type: the
    classes, enums and dates inside it built, anything else passed as it is. Raises (ValueError, TypeError or a
    cattrs error group) when the value does not convert."""
    return _CONVERTER.structure(value, annotation) if _needs_conversion(annotation) else value


def to_json(value: Any) -> Any:
    """A tool's return value as plain JSON where it holds the app's types: pydantic models (`model_dump(mode=
    "json")`), attrs classes, dataclasses, enums (their values), dates (ISO 8601); anything else as it is."""
    return _CONVERTER.unstructure(value)


def _needs_conversion(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        return _needs_conversion(get_args(annotation)[0])
    if isinstance(annotation, type) and (
        _is_record(annotation)
        or issubclass(annotation, enum.Enum)
        or any(issubclass(annotation, c) for c, _ in _FORMATS)
    ):
        return True
    return any(_needs_conversion(a) for a in get_args(annotation) if get_origin(annotation) is not Literal)


def _iso(value: Any, cls: Any) -> Any:
    if isinstance(value, cls):
        return value
    if not isinstance(value, str):
        raise TypeError(f"a {cls.__name__} is ISO 8601 text, got {value!r:.80}")
    return cls.fromisoformat(value)


def _converter() -> cattrs.Converter:
    """cattrs for the records and enums, ISO 8601 text for the dates, and pydantic's own validation for its models
    (constraints checked, validators run)."""
    converter = cattrs.Converter()
    for cls, _ in _FORMATS:
        converter.register_structure_hook(cls, _iso)
        converter.register_unstructure_hook(cls, lambda value: value.isoformat())
    converter.register_structure_hook_func(pydantic_model, lambda value, cls: cls.model_validate(value))
    converter.register_unstructure_hook_func(pydantic_model, lambda value: value.model_dump(mode="json"))
    return converter


_CONVERTER = _converter()


@attrs.frozen(kw_only=True)
class OutputSpec:
    """What a run asked its final answer to be: the wire format (name, canonical schema, strict) and the Python
    type its value converts to (None: plain JSON, for a schema given as a dict)."""

    format: OutputFormat
    target: Any = None
    _validator: Validator = attrs.field(eq=False, repr=False, alias="validator")

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
        except RecursionError:  # nested far past MAX_NESTING: the decoder ran out of stack before we could count
            return None, f"at $: {past_the_limit('the answer')}"
        return self.check(value)

    def check(self, value: Any) -> tuple[Any, str | None]:
        """The value converted, or (None, why not). Bounded: a value nested past MAX_NESTING is refused unread."""
        found = errors_of(self._validator, value, "the answer")
        if isinstance(found, str):
            return None, f"at $: {found}"
        errors = sorted(found, key=lambda e: [str(p) for p in e.absolute_path])
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            return None, f"at {first.json_path}: {first.message}{more}"
        if self.target is None:
            return value, None
        try:
            return _CONVERTER.structure(value, self.target), None
        except Exception as e:  # cattrs reports a group of errors; the schema passed, so this is rare
            return None, f"at $: the value does not convert to {self.target.__name__}: {e}"


def format_hash(output: OutputFormat) -> str:
    return canonical_hash({"name": output.name, "schema": dict(output.schema), "strict": output.strict})


def output_spec(output_type: Any) -> OutputSpec:
    """The spec for `output_type=` (an attrs class, dataclass, TypedDict, pydantic model or JSON Schema dict);
    InputError naming the value and what to pass otherwise."""
    if isinstance(output_type, Mapping):
        problem = too_deep(dict(output_type), "output_type: the schema")  # before anything below recurses into it
        if problem is not None:
            raise InputError(problem)
        schema = _plain(output_type)
        title = schema.get("title")
        name = title if isinstance(title, str) else "output"
        target = None
    elif isinstance(output_type, type) and _is_record(output_type):
        try:
            schema = json_schema_for(output_type, f"output_type {output_type.__name__}")
        except (TypeError, NameError) as e:
            raise InputError(str(e)) from None
        name, target = output_type.__name__, output_type
    else:
        raise InputError(
            "output_type must be an attrs class, a dataclass, a TypedDict, a pydantic model or a JSON Schema dict, "
            f"got {output_type!r:.80}; describe the answer as a class of typed fields (or pass its JSON Schema)"
        )
    try:
        validator = local_validator(schema, "output_type", dialect=Draft202012Validator)
    except SchemaError as e:
        raise InputError(f"output_type is not a valid JSON Schema: at {e.json_path}: {e.message}") from None
    if schema.get("type") != "object":
        raise InputError(
            f"output_type must describe a JSON object (schema type 'object'), got type {schema.get('type')!r}: "
            "vendors' structured outputs and final-answer tools take objects; wrap the value in a field"
        )
    fmt = OutputFormat(name=_NAME.sub("_", name)[:64] or "output", schema=schema, strict=_strict_ok(schema))
    return OutputSpec(format=fmt, target=target, validator=validator)


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
