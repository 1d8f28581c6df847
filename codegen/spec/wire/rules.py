"""The wire mapping's data: merged rules, parameter types, and how a vendor value is read as Python source.

codegen/spec/wire/mapping.py loads and merges the mapping files into `Mapping`s of `Rule`s; codegen/spec/wire/check.py
checks them; codegen/plugins/wire/ renders them. What all three need to agree on lives here: the rule records,
the meaning of a parameter type (`str?`, `list`, `TextBlock`, `anthropic.types.TextBlockParam[]`), and the
expression that reads one field from a vendor dict. Reading is answered by trying: `read_expr` returns None when
a field cannot be read the way the mapping says, and the checker turns that into an error.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from codegen.model import Field, Model, NamedType, SchemaFile

PRIMITIVE_PARAMS = {
    "str": "str",
    "int": "int",
    "bool": "bool",
    "float": "float",
    "object": "Mapping[str, Any]",
    "list": "list[Any]",
    "any": "Any",
}
#: The kind each parameter primitive checks as against an SDK annotation.
PARAM_KINDS = {"str": "str", "int": "int", "bool": "bool", "float": "float", "object": "object", "list": "list"}
_TYPE = re.compile(r"^(?P<base>[^\[?]+)(?P<many>\[\])?(?P<optional>\?)?$")


@attrs.frozen(kw_only=True)
class Rule:
    """One rule of a mapping section, with the file that defined it (for error pointers)."""

    name: str
    spec: dict[str, Any]
    file: str
    pointer: str
    wire: str  # the wire whose file defined it (differs from the module's wire when inherited)


@attrs.frozen(kw_only=True)
class Mapping:
    wire: str
    file: SchemaFile
    chain: tuple[SchemaFile, ...]  # this file and the files it extends, nearest first
    parent: str | None
    to_vendor: dict[str, Rule]
    dispatch: dict[str, Rule]
    from_vendor: dict[str, Rule]
    parse_dispatch: dict[str, Rule]
    constants: dict[str, Rule]


@attrs.frozen(kw_only=True)
class Param:
    """A keyword parameter of a generated to_vendor function."""

    name: str
    base: str  # a primitive, a canonical class, or an SDK dotted path
    many: bool
    optional: bool

    @property
    def sdk(self) -> bool:
        return "." in self.base

    @property
    def canonical(self) -> bool:
        return self.base[:1].isupper() and not self.sdk

    def annotation(self, local: str | None = None) -> str:
        """The Python annotation; `local` is the name an SDK type is imported as."""
        base = local or PRIMITIVE_PARAMS.get(self.base, self.base)
        if self.many:
            base = f"list[{base}]"
        return f"{base} | None" if self.optional else base


def params(rule: Rule) -> dict[str, Param]:
    """The rule's keyword parameters, in declaration order."""
    out = {}
    for name, text in rule.spec.get("params", {}).items():
        m = _TYPE.match(text)
        assert m is not None, "the grammar's ParamType pattern admits only this form"
        out[name] = Param(name=name, base=m["base"], many=bool(m["many"]), optional=bool(m["optional"]))
    return out


def find_field(t: NamedType, name: str) -> Field | None:
    return next((f for f in t.fields if f.py_name == name), None)


def conditional(v: dict[str, Any]) -> bool:
    """Whether a top-level shape key is sent only sometimes."""
    return bool(v.get("omit_if_none") or "if" in v)


def rule_refs(spec: Any) -> set[str]:
    """Names of the rules a rule's values call (`rule` anywhere inside), for inheritance and checking."""
    found: set[str] = set()
    if isinstance(spec, dict):
        if isinstance(spec.get("rule"), str):
            found.add(spec["rule"])
        for value in spec.values():
            found |= rule_refs(value)
    elif isinstance(spec, list):
        for value in spec:
            found |= rule_refs(value)
    return found


# How a field is read from a vendor dict, as Python source. The checker's question "can this field be read this
# way?" is answered by trying: read_expr returns None when it cannot.

#: Reader suffix per kind: req_<suffix> / opt_<suffix> in segue._support.readers.
READERS = {"str": "str", "bool": "bool", "int": "int", "float": "float", "object": "obj", "list": "list", "any": "any"}


@attrs.frozen(kw_only=True)
class Want:
    """What a field needs: its kind, whether it may be None, and for nested rules the parse function."""

    kind: str  # a READERS kind, "enum", "map_int" (collect), "list_str", or "rule"
    required: bool
    parse: str | None = None  # parse_<rule> for kind "rule" (and lists of them: kind "list" with parse)
    values: tuple[Any, ...] = ()  # kind "enum": the values the canonical field admits
    known: str | None = None  # kind "rule" into a canonical field: the type left once Unknown is an error


def canonical_want(f: Field, v: dict[str, Any], parse_names: dict[str, str], model: Model) -> Want | None:
    """What a canonical field needs, or None for a type the grammar cannot read."""
    e = f.type
    if e.kind == "named" and e.name is not None and model.types[e.name].form == "enum":
        e = attrs.evolve(e, kind="enum", values=model.types[e.name].values)
    if "rule" in v:
        parse = parse_names.get(v["rule"])
        if parse is None or e.kind != "named":
            return None
        return Want(kind="rule", required=f.required, parse=parse, known=e.name)
    if e.kind == "enum":
        return Want(kind="enum", required=f.required, values=e.values)
    kind = {"str": "str", "int": "int", "bool": "bool", "float": "float", "object": "object"}.get(e.kind)
    if e.kind == "map" and e.item is not None and e.item.kind == "int":
        kind = "map_int"
    if e.kind == "list" and e.item is not None and e.item.kind == "str":
        kind = "list_str"
    return None if kind is None else Want(kind=kind, required=f.required)


def view_want(v: dict[str, Any], parse_names: dict[str, str]) -> Want | None:
    """What a view field declares (`type`, `optional`, `rule`), or None when the declaration is incomplete."""
    required = not v.get("optional")
    if "whole" in v:
        return Want(kind="object", required=True)
    if "equals" in v:
        return Want(kind="bool", required=True)
    if "rule" in v:
        parse = parse_names.get(v["rule"])
        if parse is None:
            return None
        return Want(kind="list" if v.get("type") == "list" else "rule", required=required, parse=parse)
    if "type" not in v:
        return None
    return Want(kind=v["type"], required=required)


def read_expr(want: Want, v: dict[str, Any], var: str, subject: str = "d") -> str | None:
    """The expression reading a value from the vendor dict `subject`; None when the spec cannot give `want`.

    `var` names the walrus variable an optional nested read needs (unique within one generated call)."""
    if "const" in v:
        return repr(v["const"])
    if "context" in v:
        return "model"
    if "whole" in v:
        return f"dict({subject})" if want.kind == "object" else None
    if "sum" in v:
        if want.kind != "int":
            return None
        parts = [read_expr(Want(kind="int", required=False), item, var, subject) for item in v["sum"]]
        if any(p is None or "key" not in item for p, item in zip(parts, v["sum"], strict=True)):
            return None
        return " + ".join(f"value_or({p}, 0)" for p in parts)
    *parents, key = v["key"].split(".")
    src = subject
    for part in parents:
        src = f"{'req' if want.required else 'opt'}_map({src}, {part!r}, w)"
    return _read_key(want, v, src, key, var)


def _read_key(want: Want, v: dict[str, Any], src: str, key: str, var: str) -> str | None:
    if "each" in v:
        return _read_each(want, v, src, key, var)
    if "collect" in v:
        if want.kind != "map_int":
            return None
        prefix, _, suffix = v["collect"].partition("{}")
        return f"tokens_by_ttl(opt_map({src}, {key!r}, w), {prefix!r}, {suffix!r}, w)"
    if "equals" in v:
        return f"opt_str({src}, {key!r}, w) == {v['equals']!r}" if want.kind == "bool" else None
    if "decode" in v:
        ok = want.kind == "object" and want.required
        return f"loads_arguments(req_str({src}, {key!r}, w), w)" if ok else None
    if want.parse is not None and want.kind == "rule":
        wrap = f'cast("{want.known}", known({{}}, w))' if want.known else "{}"
        if want.required:
            return wrap.format(f"{want.parse}(req_map({src}, {key!r}, w), model)")
        parsed = wrap.format(f"{want.parse}({var}, model)")
        return f"None if ({var} := opt_map({src}, {key!r}, w)) is None else {parsed}"
    if want.kind == "enum":
        read = f"{'req' if want.required else 'opt'}_str({src}, {key!r}, w)"
        return f"one_of({read}, {want.values!r}, {key!r}, w)"
    if want.parse is not None and want.kind == "list":
        items = f"[{want.parse}(as_map(x, w), model) for x in {{raw}}]"
        if want.required:
            return items.format(raw=f"req_list({src}, {key!r}, w)")
        return f"None if ({var} := opt_list({src}, {key!r}, w)) is None else " + items.format(raw=var)
    reader = READERS.get(want.kind)
    if reader is None:
        return None
    if "default" in v:
        return f"value_or(opt_{reader}({src}, {key!r}, w), {v['default']!r})"
    return f"{'req' if want.required else 'opt'}_{reader}({src}, {key!r}, w)"


def _read_each(want: Want, v: dict[str, Any], src: str, key: str, var: str) -> str | None:
    if "join" in v and want.kind == "str":
        pass
    elif "join" not in v and want.kind == "list_str":
        pass
    else:
        return None
    inner = read_expr(Want(kind="str", required=True), v["each"], var, "as_map(x, w)")
    if inner is None:
        return None
    items = f"[{inner} for x in {{raw}}]"
    value = f"{v['join']!r}.join({items})" if "join" in v else items
    if want.required:
        return value.format(raw=f"req_list({src}, {key!r}, w)")
    return f"None if ({var} := opt_list({src}, {key!r}, w)) is None else " + value.format(raw=var)


def view_annotation(want: Want, returns: dict[str, str]) -> str:
    """The Python annotation of a view field."""
    if want.parse is not None:
        inner = returns[want.parse]
        base = f"list[{inner}]" if want.kind == "list" else inner
    else:
        base = {"object": "dict[str, Any]", "list": "list[Any]", "any": "Any"}.get(want.kind, want.kind)
    return base if want.required or base == "Any" else f"{base} | None"


def keys_read(v: dict[str, Any]) -> list[list[str]]:
    """The vendor key paths a FromValue reads (a sum reads several), each split at its dots."""
    if "sum" in v:
        return [p for item in v["sum"] for p in keys_read(item)]
    return [v["key"].split(".")] if "key" in v else []


def model_types(model: Model, kind: str) -> list[str]:
    return sorted(n for n, t in model.types.items() if t.form == kind)
