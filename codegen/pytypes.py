"""Turn model types into Python annotations, attrs validators and TypeScript types (strings for templates)."""

from __future__ import annotations

import json
from typing import Any

from codegen.model import Field, Model, NamedType, TypeExpr


def literal(values: tuple[Any, ...]) -> str:
    return "Literal[" + ", ".join(repr(v) for v in values) + "]"


def py_type(e: TypeExpr) -> str:
    base = _py_base(e)
    return f"{base} | None" if e.nullable else base


def _py_base(e: TypeExpr) -> str:
    match e.kind:
        case "str" | "int" | "float" | "bool":
            return e.kind
        case "any":
            return "Any"
        case "object":
            return "dict[str, Any]"
        case "map":
            assert e.item is not None
            return f"dict[str, {py_type(e.item)}]"
        case "list":
            assert e.item is not None
            return f"list[{py_type(e.item)}]"
        case "named":
            assert e.name is not None
            return e.name
        case "const" | "enum":
            return literal(e.values)
        case "union":
            return " | ".join(py_type(m) for m in e.members)
    raise AssertionError(e.kind)


def field_annotation(f: Field) -> str:
    t = py_type(attrs_strip_null(f.type))
    if f.required or f.is_const:
        return t
    if f.type.nullable:
        return f"{t} | None | Unset"
    return f"{t} | None"


def attrs_strip_null(e: TypeExpr) -> TypeExpr:
    if not e.nullable:
        return e
    return TypeExpr(
        kind=e.kind, item=e.item, name=e.name, values=e.values, members=e.members, constraints=e.constraints
    )


def shape(e: TypeExpr, model: Model) -> str | None:
    """The `segue._support.checks` shape one value of type `e` must fit (not counting the field's optionality), as
    Python source; None when its own class checks it (an object, a union of objects) or anything goes."""
    c = dict(e.constraints)
    match e.kind:
        case "str":
            return _call("string", min_len=c.get("minLength"), max_len=c.get("maxLength"), pattern=c.get("pattern"))
        case "int":
            return _call("integer", minimum=c.get("minimum"), maximum=c.get("maximum"))
        case "float":
            return _call("number", minimum=c.get("minimum"), maximum=c.get("maximum"))
        case "bool":
            return "_c.boolean()"
        case "const" | "enum":
            return f"_c.one_of({(*e.values, None) if e.nullable else e.values!r})"
        case "named":
            assert e.name is not None
            target = model.types[e.name]
            if target.form == "alias" and target.target is not None:
                return shape(target.target, model)
            return f"_c.one_of({target.values!r})" if target.form == "enum" else None
        case "union":
            members = [shape(m, model) for m in e.members]
            return None if None in members else "_c.any_of(" + ", ".join(str(m) for m in members) + ")"
        case "list" | "map":
            assert e.item is not None
            item = shape(e.item, model) or "_c.anything()"
            if e.item.nullable and item != "_c.anything()":
                item = f"_c.any_of({item}, _c.one_of((None,)))"
            if e.kind == "map":
                return f"_c.map_of({item})"
            return _call("list_of", item, min_items=c.get("minItems"))
        case "object":
            return "_c.map_of(_c.anything())"
    return None  # any


def _call(name: str, *args: str, **kwargs: Any) -> str:
    named = (f"{k}={json.dumps(v) if isinstance(v, str) else repr(v)}" for k, v in kwargs.items() if v is not None)
    given = [*args, *named]
    return f"_c.{name}({', '.join(given)})"


def field_validator(f: Field, model: Model) -> str | None:
    """The field's `_c.field(...)` validator: its shape, its title as the message's gloss, its optionality."""
    checked = shape(f.type, model)
    if checked is None:
        return None
    title = f", title={json.dumps(f.title)}" if f.title else ""
    if f.required:
        return f"_c.field({checked}{title})"
    if f.type.nullable:
        return f"unset_or(_c.field({checked}{title}))"
    return f"_c.field({checked}{title}, optional=True)"


def field_line(f: Field, model: Model) -> str:
    """The attrs attribute for one schema property."""
    ann = field_annotation(f)
    if f.is_const:
        return f"{f.py_name}: {ann} = {f.type.values[0]!r}"
    kwargs = []
    if not f.required:
        kwargs.append("default=UNSET" if f.type.nullable else "default=None")
    validator = field_validator(f, model)
    if validator:
        kwargs.append(f"validator={validator}")
    if f.py_name != f.json_name:
        kwargs.append(f"metadata={{'json': {f.json_name!r}}}")
    if not f.shown:
        kwargs.append("repr=False")
    if not kwargs:
        return f"{f.py_name}: {ann}"
    if kwargs == ["default=None"]:
        return f"{f.py_name}: {ann} = None"
    return f"{f.py_name}: {ann} = attrs.field({', '.join(kwargs)})"


def module_uses(types: tuple[NamedType, ...], model: Model) -> dict[str, bool]:
    """Which helper imports a generated module needs."""
    lines = [field_line(f, model) for t in types for f in t.fields]
    joined = "\n".join(lines) + "\n" + "\n".join(py_type(t.target) for t in types if t.target is not None)
    return {
        "any": "Any" in joined or any(t.extra for t in types),
        "literal": "Literal[" in joined or any(t.form == "enum" for t in types),
        "checks": "_c." in joined,
        "unset": "Unset" in joined or "UNSET" in joined,
        "unset_or": "unset_or(" in joined,
        "attrs_field": "attrs.field(" in joined or any(t.extra for t in types),
    }


# TypeScript -------------------------------------------------------------------------------------------------


def ts_type(e: TypeExpr) -> str:
    base = _ts_base(e)
    return f"{base} | null" if e.nullable else base


def _ts_base(e: TypeExpr) -> str:
    match e.kind:
        case "str":
            return "string"
        case "int" | "float":
            return "number"
        case "bool":
            return "boolean"
        case "any":
            return "unknown"
        case "object":
            return "{ [key: string]: unknown }"
        case "map":
            assert e.item is not None
            return f"{{ [key: string]: {ts_type(e.item)} }}"
        case "list":
            assert e.item is not None
            inner = ts_type(e.item)
            return f"({inner})[]" if "|" in inner else f"{inner}[]"
        case "named":
            assert e.name is not None
            return e.name
        case "const" | "enum":
            return " | ".join(json.dumps(v) for v in e.values)
        case "union":
            return " | ".join(ts_type(m) for m in e.members)
    raise AssertionError(e.kind)


def field_table(t: NamedType) -> str:
    """An object type's fields as a Markdown table (types as in the TypeScript declarations; `?`: optional)."""
    rows = ["| field | type | description |", "|---|---|---|"]
    for f in t.fields:
        name = f.json_name if f.required else f"{f.json_name}?"
        rows.append(f"| `{name}` | `{md_cell(ts_type(f.type))}` | {md_cell(f.description or '')} |")
    return "\n".join(rows)


def md_cell(text: str) -> str:
    """Text for one Markdown table cell: one line, pipes escaped (also inside code spans, as GFM requires)."""
    return " ".join(text.split()).replace("|", "\\|")
