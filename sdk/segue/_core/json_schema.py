"""JSON Schemas that come from outside segue (output_type, tool parameters, MCP input schemas), and the values
checked against them, held to three rules before anything recurses or reaches the network.

- `$ref` resolves only inside the document (and to the JSON Schema meta-schemas jsonschema bundles). Validators
  get a `referencing` Registry that retrieves nothing: jsonschema's default registry fetches any `http://` URI it
  meets while validating, from the event loop, and quotes what it fetched in its errors. Every `$ref` of the
  document is looked up when the schema is taken, so one that points outside the document, or at nothing in it,
  is an InputError naming it before any row is written, never a fetch or a referencing error mid-run.
- Nesting is bounded: a schema, or a value to check against one, nested deeper than MAX_NESTING levels of JSON
  objects and arrays is refused with that limit named. Python's recursion limit (about 1,000 frames) would
  otherwise end the validator, the JSON decoder or the encoder with a RecursionError somewhere in the run.
- Work is bounded (`schema_work`): a schema whose branches multiply past MAX_APPLICATIONS subschemas at one place
  of a value is refused when it is taken, and each validation stops at its budget (MAX_VALIDATION_STEPS keyword
  checks, VALIDATION_SECONDS), the value refused naming it.

Depths are measured without recursion, so measuring can never be what overflows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import referencing.exceptions
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from jsonschema_specifications import REGISTRY as SPECIFICATIONS  # type: ignore[import-untyped]
from referencing import Registry, Resource, Specification
from referencing._core import Resolver  # the type Registry.resolver_with_root() returns; not re-exported
from referencing.jsonschema import DRAFT202012, specification_with

from segue._core.schema_work import (
    InPlaceCycle,
    TooMuchWork,
    budgeted,
    run_budgeted,
    work_problem,
)
from segue.errors import InputError

#: Levels of JSON objects and arrays a schema or a checked value may nest (`{"a": [1]}` is 2 levels).
MAX_NESTING = 64
#: Keywords whose value is one subschema, a list of them, or a map of names to them (draft 4 to 2020-12).
_ONE = frozenset(
    {"additionalItems", "additionalProperties", "contains", "contentSchema", "else", "if", "items", "not"}
    | {"propertyNames", "then", "unevaluatedItems", "unevaluatedProperties"}
)
_MANY = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_MAP = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_CYCLE = (
    "the schema refers to itself (a $ref or allOf cycle) without the value nesting any deeper, so validating "
    "never ends; break the cycle"
)
#: Values every schema is tried on when it is taken, to find such cycles before a run rather than in one.
_PROBES: tuple[Any, ...] = ({}, [], "", 0, None)
#: A registry that knows no documents and retrieves none (jsonschema adds its bundled meta-schemas to it).
_NOTHING_TO_FETCH: Registry[Any] = Registry()


def nesting(value: Any, limit: int = MAX_NESTING) -> int:
    """How many levels of objects and arrays `value` nests (0 for a scalar); counting stops past `limit`."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, level = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        pending.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def too_deep(value: Any, what: str) -> str | None:
    """Why `value` cannot be checked, when it nests past MAX_NESTING; None when it can."""
    return None if nesting(value) <= MAX_NESTING else past_the_limit(what)


def past_the_limit(what: str) -> str:
    return (
        f"{what} nests deeper than {MAX_NESTING} levels of objects and arrays (segue's limit for JSON it "
        "validates); flatten it"
    )


def local_validator(schema: Any, where: str, dialect: type[Validator] | None = None) -> Validator:
    """A validator for `schema` that resolves `$ref` only inside it.

    InputError naming `where` when the schema nests past MAX_NESTING, a `$ref` points outside the document or at
    nothing, or the schema loops on itself without descending into the value; jsonschema's SchemaError when it is
    no valid schema of its dialect (`dialect`, else the one its `$schema` names, else draft 2020-12)."""
    problem = too_deep(schema, f"{where}: the schema")
    if problem is not None:
        raise InputError(problem)
    if dialect is None:
        dialect = validator_for(schema, default=Draft202012Validator)
    specification = specification_with(dialect.META_SCHEMA["$id"], default=DRAFT202012)
    _check_work(schema, where, specification)  # first: the meta-schema check below is validation too
    dialect.check_schema(schema)
    _check_refs(schema, where, specification)
    validator = budgeted(dialect)(schema, registry=_NOTHING_TO_FETCH)
    for probe in _PROBES:  # a cycle met without descending into the value loops on every value that reaches it
        found = errors_of(validator, probe, f"the sample value {probe!r}")
        if isinstance(found, str):
            raise InputError(f"{where}: {found}")
    return validator


def _check_work(schema: Any, where: str, dialect: Specification[Any]) -> None:
    root = _NOTHING_TO_FETCH.combine(SPECIFICATIONS).resolver_with_root(dialect.create_resource(schema))
    try:
        problem = work_problem(schema, root, dialect, levels=MAX_NESTING)
    except InPlaceCycle:
        raise InputError(f"{where}: {_CYCLE}") from None
    if problem is not None:
        raise InputError(f"{where}: the schema cannot be used: {problem}")


def _check_refs(schema: Any, where: str, dialect: Specification[Any]) -> None:
    root = _NOTHING_TO_FETCH.combine(SPECIFICATIONS).resolver_with_root(dialect.create_resource(schema))
    for pointer, contents, resolver in _subschemas(schema, root, dialect):
        for keyword in _REFS:
            ref = contents.get(keyword)
            if not isinstance(ref, str):
                continue
            try:
                resolver.lookup(ref)
            except (referencing.exceptions.PointerToNowhere, referencing.exceptions.NoSuchAnchor):
                raise InputError(
                    f"{where}: {keyword} {ref!r} at {pointer or '/'} points at nothing in the schema; add what it "
                    "names (under $defs) or fix the reference"
                ) from None
            except referencing.exceptions.Unresolvable:
                raise InputError(
                    f"{where}: {keyword} {ref!r} at {pointer or '/'} points outside the schema; segue resolves "
                    "$ref only inside the document and never fetches one: copy the schema it names into $defs "
                    "and refer to it as #/$defs/NAME"
                ) from None


def _subschemas(
    schema: Any, root: Resolver[Any], dialect: Specification[Any]
) -> Iterator[tuple[str, dict[str, Any], Resolver[Any]]]:
    """Every subschema that is an object, with its JSON pointer and the resolver for its base URI ($id)."""
    pending: list[tuple[str, Any, Resolver[Any]]] = [("", schema, root)]
    while pending:
        pointer, contents, resolver = pending.pop()
        if not isinstance(contents, dict):
            continue
        if pointer:
            resolver = resolver.in_subresource(Resource.from_contents(contents, default_specification=dialect))
        yield pointer, contents, resolver
        for keyword, value in contents.items():
            at = f"{pointer}/{_escape(str(keyword))}"
            if keyword in _MAP and isinstance(value, dict):
                pending.extend((f"{at}/{_escape(str(k))}", v, resolver) for k, v in value.items())
            elif keyword in _MANY and isinstance(value, list):
                pending.extend((f"{at}/{i}", v, resolver) for i, v in enumerate(value))
            elif keyword in _ONE and isinstance(value, dict):
                pending.append((at, value, resolver))


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def errors_of(validator: Validator, value: Any, what: str) -> list[ValidationError] | str:
    """The ways `value` fails the schema, or why it cannot be checked at all (a str naming `what` and the limit):
    it nests past MAX_NESTING, its validation ran past its budget (validators from `local_validator` count their
    work), or the schema loops on itself ($ref or allOf cycles) without the value nesting."""
    problem = too_deep(value, what)
    if problem is not None:
        return problem
    try:
        return run_budgeted(lambda: list(validator.iter_errors(value)))
    except TooMuchWork as e:
        return f"{what} could not be checked: {e}; simplify the schema or the value"
    except RecursionError:
        return f"{what} could not be checked: {_CYCLE}"
