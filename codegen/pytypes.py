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


def _constraint_validators(constraints: tuple[tuple[str, Any], ...], is_number: bool) -> list[str]:
    out = []
    for key, value in constraints:
        if key == "minimum":
            out.append(f"_v.ge({value!r})")
        elif key == "maximum":
            out.append(f"_v.le({value!r})")
        elif key in ("minLength", "minItems"):
            out.append(f"_v.min_len({value!r})")
        elif key == "maxLength":
            out.append(f"_v.max_len({value!r})")
        elif key == "pattern":
            out.append(f"_v.matches_re({json.dumps(value)}, func=re.search)")
    return out


def expr_validators(e: TypeExpr, model: Model) -> list[str]:
    """Validators for one value of type `e` (not counting optionality)."""
    if e.kind == "named":
        assert e.name is not None
        target = model.types[e.name]
        if target.form == "alias" and target.target is not None:
            return expr_validators(target.target, model)
        return []
    if e.kind == "union" and any(m.constraints for m in e.members):
        return ["_v.or_(" + ", ".join(_member_check(m, model) for m in e.members) + ")"]
    out = _constraint_validators(e.constraints, e.kind in ("int", "float"))
    if e.kind in ("list", "map") and e.item is not None:
        inner = expr_validators(e.item, model)
        if inner:
            member = inner[0] if len(inner) == 1 else "_v.and_(" + ", ".join(inner) + ")"
            if e.item.nullable:
                member = f"_v.optional({member})"
            # The container validator pins attrs' type variables, so mypy accepts it inside optional().
            if e.kind == "list":
                out.append(f"_v.deep_iterable(member_validator={member}, iterable_validator=_v.instance_of(list))")
            else:
                out.append(
                    f"_v.deep_mapping(key_validator=_v.instance_of(str), value_validator={member}, "
                    "mapping_validator=_v.instance_of(dict))"
                )
    return out


def _member_check(e: TypeExpr, model: Model) -> str:
    """One union member as a validator that passes only for values of that member."""
    if e.kind in ("const", "enum"):
        return f"_v.in_({e.values!r})"
    checks = [f"_v.instance_of({_py_base(e)})", *expr_validators(e, model)]
    return checks[0] if len(checks) == 1 else "_v.and_(" + ", ".join(checks) + ")"


def field_validator(f: Field, model: Model) -> str | None:
    vs = expr_validators(f.type, model)
    if not vs:
        return None
    one = vs[0] if len(vs) == 1 else "_v.and_(" + ", ".join(vs) + ")"
    if f.required:
        return one
    if f.type.nullable:
        return f"unset_or({one})"
    if one.startswith("_v.or_("):
        # attrs types or_() as a validator of Never, which optional() refuses under mypy; None joins the or_.
        return "_v.or_(_v.in_((None,)), " + one.removeprefix("_v.or_(")
    return f"_v.optional({one})"


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
        "validators": "_v." in joined,
        "re": "re.search" in joined,
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
