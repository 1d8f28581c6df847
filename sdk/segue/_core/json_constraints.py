"""`Annotated[...]` metadata as JSON Schema keywords: the constraints and descriptions an app writes on its types.

Two spellings reach here, both without segue importing their libraries (they are the app's, and optional):
annotated-types' constraints (`Annotated[int, Ge(1)]`, `Interval(gt=0, lt=1)`, `MinLen(2)`), and pydantic's
`Field(...)` (`Annotated[int, Field(ge=1, description="...")]`), whose constraints are the same annotated-types
objects plus a `pattern`. A constraint JSON Schema cannot say (annotated-types' `Predicate`, `Timezone`) is refused
with the type it sits on, never dropped: a model that is not told a limit breaks it, and the tool then refuses the
call. Metadata of other libraries (markers that are not constraints) is left alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

#: annotated-types' constraint attribute -> the JSON Schema keyword for a number, a string and an array.
_NUMBER = {"gt": "exclusiveMinimum", "ge": "minimum", "lt": "exclusiveMaximum", "le": "maximum"}
_LENGTH = {
    "string": ("minLength", "maxLength"),
    "array": ("minItems", "maxItems"),
    "object": ("minProperties", "maxProperties"),
}
#: pydantic's own metadata (`_PydanticGeneralMetadata`) keys that only change how pydantic validates, not the shape.
_VALIDATION_ONLY = frozenset({"strict", "allow_inf_nan", "coerce_numbers_to_str", "union_mode", "fail_fast"})


def annotated_keywords(schema: dict[str, Any], metadata: Iterable[Any], where: str) -> dict[str, Any]:
    """`schema` (the annotated type's) with the keywords the metadata implies; TypeError naming `where` and the
    constraint for one JSON Schema cannot express."""
    out = dict(schema)
    for item in _flatten(metadata):
        if _is_field_info(item):
            if item.description:
                out["description"] = item.description
            out = annotated_keywords(out, item.metadata, where)
        elif _is_annotated_types(item) or _is_pydantic(item):
            out = _apply(item, out, where)
    return out


def _apply(item: Any, schema: dict[str, Any], where: str) -> dict[str, Any]:
    """A constraint on `X | None` constrains X (None has nothing to constrain)."""
    if "anyOf" in schema:
        members = [m if m.get("type") == "null" else _apply(item, m, where) for m in schema["anyOf"]]
        return {**schema, "anyOf": members}
    return {**schema, **_constraint(item, schema, where)}


def _flatten(metadata: Iterable[Any]) -> Iterator[Any]:
    """annotated-types' grouped metadata (`Interval`, `Len`) is a sequence of single constraints."""
    for item in metadata:
        if _is_annotated_types(item) and type(item).__name__ in ("Interval", "Len"):
            yield from item
        else:
            yield item


def _constraint(item: Any, schema: dict[str, Any], where: str) -> dict[str, Any]:
    name = type(item).__name__
    kind = schema.get("type")
    if name in ("Gt", "Ge", "Lt", "Le"):
        attr = name.lower()
        _expect(kind in ("integer", "number"), item, kind, where, "a number")
        return {_NUMBER[attr]: getattr(item, attr)}
    if name == "MultipleOf":
        _expect(kind in ("integer", "number"), item, kind, where, "a number")
        return {"multipleOf": item.multiple_of}
    if name in ("MinLen", "MaxLen"):
        _expect(kind in _LENGTH, item, kind, where, "a string, a list or a dict")
        low, high = _LENGTH[str(kind)]
        return {low: item.min_length} if name == "MinLen" else {high: item.max_length}
    if _is_pydantic(item):  # pydantic's general metadata: `pattern` is the one keyword it carries for a schema
        values = {k: v for k, v in vars(item).items() if v is not None and k not in _VALIDATION_ONLY}
        pattern = values.pop("pattern", None)
        if values:
            raise TypeError(f"{where}: cannot describe the constraint(s) {sorted(values)} as JSON Schema; drop them")
        if pattern is None:
            return {}
        _expect(kind == "string", item, kind, where, "a string")
        return {"pattern": pattern if isinstance(pattern, str) else pattern.pattern}
    raise TypeError(
        f"{where}: cannot describe the constraint {item!r} as JSON Schema (a model would not see it); use Gt, Ge, "
        "Lt, Le, Interval, MultipleOf, MinLen, MaxLen or Len, or check the value inside the function"
    )


def _expect(ok: bool, item: Any, kind: Any, where: str, what: str) -> None:
    if not ok:
        raise TypeError(f"{where}: the constraint {item!r} applies to {what}, not to a value of JSON type {kind!r}")


def _is_annotated_types(item: Any) -> bool:
    return type(item).__module__ == "annotated_types"


def _is_pydantic(item: Any) -> bool:
    return type(item).__module__.startswith("pydantic.") and type(item).__name__ == "_PydanticGeneralMetadata"


def _is_field_info(item: Any) -> bool:
    return type(item).__module__ == "pydantic.fields" and type(item).__name__ == "FieldInfo"
