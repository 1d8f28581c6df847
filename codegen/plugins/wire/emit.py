"""Python source for one checked wire mapping's rules: signatures, bodies, view classes, constants.

codegen/plugins/wire/ decides which rules a module defines; `ModuleBuilder` turns each into what the template
prints and collects what the module must import (canonical classes, SDK types under TYPE_CHECKING, the readers
of segue._support.readers). Keys are written in the mapping's order, so a request body is byte-for-byte the JSON the
mapping describes.
"""

from __future__ import annotations

import string
from typing import Any

from codegen.model import Model, NamedType
from codegen.pytypes import py_type
from codegen.spec.wire.rules import (
    Mapping,
    Param,
    Rule,
    canonical_want,
    conditional,
    find_field,
    params,
    read_expr,
    view_annotation,
    view_want,
)
from codegen.spec.wire.sdk import shape as sdk_shape
from codegen.spec.wire.sdk import value_source

#: The helpers of segue._support.readers a generated body may call, found by name in the rendered expressions.
HELPERS = tuple(
    "req_str opt_str req_int opt_int req_bool opt_bool req_float opt_float req_obj opt_obj req_list opt_list "
    "req_any opt_any req_map opt_map as_map loads_arguments dumps_arguments tokens_by_ttl value_or need known "
    "one_of".split()
)


def typing_names(used: set[str], sdk: bool) -> list[str]:
    return sorted(used | ({"TYPE_CHECKING"} if sdk else set()))


class ModuleBuilder:
    """Collects what one generated module needs while rendering its rules."""

    def __init__(self, m: Mapping, model: Model) -> None:
        self.m, self.model = m, model
        self.canonical: set[str] = set()
        self.sdk: dict[str, str] = {}  # dotted path -> local name
        self.helpers: set[str] = set()
        self.typing: set[str] = set()  # names from typing: Any, Final, cast
        self.abc: set[str] = set()  # names from collections.abc
        self.parse_names = {n: f"parse_{n}" for n in [*m.from_vendor, *m.parse_dispatch]}
        self.returns = {f"parse_{n}": self._parse_returns(n) for n in self.parse_names}

    # -- bookkeeping -------------------------------------------------------------------------------------------

    def sdk_name(self, path: str) -> str:
        if path not in self.sdk:
            module, _, name = path.rpartition(".")
            # The module's own views and the canonical classes keep their names; an SDK type is renamed instead.
            views = {r.spec["view"] for r in self.m.from_vendor.values() if "view" in r.spec}
            taken = set(self.sdk.values()) | views | set(self.model.types)
            self.sdk[path] = name if name not in taken else f"{module.rpartition('.')[2]}_{name}"
        return self.sdk[path]

    def use(self, expr: str) -> str:
        """Note the helpers an expression calls; the expression unchanged."""
        self.helpers.update(h for h in HELPERS if h + "(" in expr)
        for name in ("Any", "Mapping"):
            if name in expr:
                (self.typing if name == "Any" else self.abc).add(name)
        if "cast(" in expr:
            self.typing.add("cast")
        return expr

    def doc(self, rule: Rule, default: str) -> str:
        where = f"({rule.file}#{rule.pointer})"
        text = rule.spec.get("description") or default
        return f"{text.rstrip('.')} {where}."

    # -- constants ---------------------------------------------------------------------------------------------

    def constant(self, rule: Rule) -> dict[str, Any]:
        value = rule.spec["value"]
        self.typing.add("Final")
        if isinstance(value, str):
            annotation, text = "Final", repr(value)
        elif isinstance(value, list):
            annotation, text = "Final[frozenset[str]]", "frozenset({" + ", ".join(map(repr, sorted(value))) + "})"
        else:
            self.abc.add("Mapping")
            self.typing.add("Literal")
            # Typed with the table's own values, so a value goes where the SDK wants one of its literals.
            values = ", ".join(repr(v) for v in dict.fromkeys(value.values()))
            annotation = f"Final[Mapping[str, Literal[{values}]]]" if value else "Final[Mapping[str, str]]"
            text = "{" + ", ".join(f"{k!r}: {v!r}" for k, v in value.items()) + "}"
        return {"name": rule.name, "annotation": annotation, "value": text, "doc": self.doc(rule, rule.name)}

    def envelope(self, rule: Rule) -> dict[str, Any]:
        """The key sets and prompt order of a request envelope, for readers of stored requests."""
        spec = rule.spec
        upper = rule.name.upper()
        required = sdk_shape(spec["vendor_type"]).required if "vendor_type" in spec else frozenset()
        enum = spec["prompt"]["enum"]
        self.canonical.add(enum)
        self.typing.add("Final")
        return {
            "keys_name": f"{upper}_KEYS",
            "required_name": f"{upper}_REQUIRED",
            "extra_name": f"{upper}_EXTRA",
            "prompt_name": f"{upper}_PROMPT",
            "keys_value": _frozenset(spec["shape"]),
            "required_value": _frozenset(required),
            "extra_value": _frozenset(spec.get("extra", {})),
            "prompt_value": "(" + "".join(f"({k!r}, {s!r}), " for k, s in spec["prompt"]["keys"].items()) + ")",
            "enum": enum,
            "rule": rule.name,
        }

    # -- to_vendor ---------------------------------------------------------------------------------------------

    def to_fn(self, rule: Rule) -> dict[str, Any]:
        spec = rule.spec
        t = self.model.types[spec["canonical"]] if "canonical" in spec else None
        ps = params(rule)
        args = []
        if "sets" in spec and "on" in spec["sets"]:
            args.append("target: " + " | ".join(self.sdk_name(p) for p in spec["sets"]["on"]))
        elif "sets" in spec:
            self.abc.add("MutableMapping")
            self.typing.add("Any")
            args.append("target: MutableMapping[str, Any]")
        if t is not None:
            self.canonical.add(t.name)
            args.append(f"b: {t.name}")
        if ps:
            args.append("*")
            args += [f"{p.name}: {self.param_annotation(p)}" + (" = None" if p.optional else "") for p in ps.values()]
        returns = "None" if "sets" in spec else self.return_type(rule, t, ps)
        target = spec.get("vendor_type", "vendor value")
        name = f"{t.name} -> {target}" if t is not None else target
        if "native" in spec:
            assert t is not None
            native = spec["native"]
            body = [f"return dict({self.need(f'b.{native}', t, rule, native)})"]
        elif "value" in spec:
            body = [f"return {self.value(t, ps, rule, spec['value'], typed=False)}"]
        else:
            body = self.shape_body(rule, t, ps, self.return_type(rule, t, ps))
        return {
            "name": rule.name,
            "signature": f"def {rule.name}({', '.join(args)}) -> {returns}:",
            "doc": self.doc(rule, name),
            "body": [self.use(line) for line in body],
        }

    def param_annotation(self, p: Param) -> str:
        if p.sdk:
            source = value_source(p.base)
            if source is not None:  # a key's own type: its literals (e.g. the TTLs a cache marker takes)
                if source.startswith("Literal"):
                    self.typing.add("Literal")
                return p.annotation(source)
            return p.annotation(self.sdk_name(p.base))
        if p.canonical:
            self.canonical.add(p.base)
        return self.use(p.annotation())

    def return_type(self, rule: Rule, t: NamedType | None, ps: dict[str, Param]) -> str:
        spec = rule.spec
        if "native" in spec:
            self.typing.add("Any")
            return "dict[str, Any]"
        if "value" in spec:
            v = spec["value"]
            if "param" in v and "rule" not in v and "encode" not in v:
                return self.param_annotation(ps[v["param"]])
            if "field" in v and t is not None and "rule" not in v and "encode" not in v:
                f = find_field(t, v["field"])
                assert f is not None
                return py_type(f.type)
            return "str"
        if "vendor_type" in spec and "copy_of" not in spec and not sdk_shape(spec["vendor_type"]).union:
            return self.sdk_name(spec["vendor_type"])
        self.typing.add("Any")
        return "dict[str, Any]"

    def shape_body(self, rule: Rule, t: NamedType | None, ps: dict[str, Param], returns: str) -> list[str]:
        """Statements building the shape in key order; the last one returns it or sets it on `target`."""
        spec = rule.spec
        # A union of TypedDicts cannot type a dict whose tag is a parameter: those are checked at generation only.
        typed = "vendor_type" in spec and "copy_of" not in spec and not sdk_shape(spec["vendor_type"]).union
        extra = set(spec.get("extra", {}))
        items = list(spec["shape"].items())
        lead = 0
        if "copy_of" not in spec:
            while lead < len(items) and not conditional(items[lead][1]) and items[lead][0] not in extra:
                lead += 1
        literal = "{" + ", ".join(f"{k!r}: {self.value(t, ps, rule, v, typed=typed)}" for k, v in items[:lead]) + "}"
        sets = spec.get("sets")
        if sets is None and lead == len(items):
            return [f"return {literal}"]
        lines = []
        if sets is not None and sets.get("if_absent"):
            lines += [f"if {sets['key']!r} in target:", "    return"]  # keep the value the object has
        if "copy_of" in spec:
            lines += [f"out: {returns} = dict({spec['copy_of']})"]
        else:
            covered = {k for k, _ in items[:lead]}
            if typed and not sdk_shape(spec["vendor_type"]).required <= covered:
                literal = f'cast("{returns}", {literal})'
            lines += [f"out: {returns} = {literal}"]
        last = None  # the condition of the previous statement: keys under the same one share its `if`
        for key, v in items[lead:]:
            into = 'cast("dict[str, Any]", out)' if typed and key in extra else "out"
            stmt = f"{into}[{key!r}] = {self.value(t, ps, rule, v, typed=typed and key not in extra)}"
            condition = self.condition(v, ps)
            if condition is None:
                lines.append(stmt)
            elif condition == last:
                lines.append(f"    {stmt}")
            else:
                lines += [f"if {condition}:", f"    {stmt}"]
            last = condition
        return [*lines, "return out" if sets is None else f"target[{sets['key']!r}] = out"]

    def condition(self, v: dict[str, Any], ps: dict[str, Param]) -> str | None:
        if v.get("omit_if_none"):
            return f"{self.ref(v)} is not None"
        if "if" in v:
            p = ps[v["if"]]
            return p.name if p.base == "bool" and not p.many and not p.optional else f"{p.name} is not None"
        return None

    def ref(self, v: dict[str, Any]) -> str:
        return f"b.{v['field']}" if "field" in v else str(v["param"])

    def value(
        self, t: NamedType | None, ps: dict[str, Param], rule: Rule, v: dict[str, Any], *, typed: bool, depth: int = 0
    ) -> str:
        if "const" in v:
            return repr(v["const"])
        if "item" in v:
            return f"x{depth - 1}"
        if "items" in v:
            return "[" + ", ".join(self.value(t, ps, rule, s, typed=typed, depth=depth) for s in v["items"]) + "]"
        if "object" in v:
            inner = ", ".join(
                f"{k!r}: {self.value(t, ps, rule, s, typed=typed, depth=depth)}" for k, s in v["object"].items()
            )
            return "{" + inner + "}"
        if "template" in v:
            out = []
            for lit, name, _, _ in string.Formatter().parse(v["template"]):
                out.append(lit.replace("\\", "\\\\").replace('"', '\\"').replace("{", "{{").replace("}", "}}"))
                if name is not None:
                    field = t is not None and find_field(t, name) is not None
                    out.append("{" + (f"b.{name}" if field else name) + "}")
            return 'f"' + "".join(out) + '"'
        expr = self.ref(v)
        optional = self.optional(t, ps, v)
        if optional and not v.get("omit_if_none"):
            if "default" in v:
                expr = f"({expr} if {expr} is not None else {v['default']!r})"
            elif "field" in v and t is not None:
                expr = self.need(expr, t, rule, v["field"])
        if "each" in v:
            return f"[{self.value(t, ps, rule, v['each'], typed=typed, depth=depth + 1)} for x{depth} in {expr}]"
        if "rule" in v:
            return f"{v['rule']}({expr})"
        if v.get("encode") == "json":
            return f"dumps_arguments({expr})"
        if typed and "param" in v and ps[v["param"]].base == "object" and not ps[v["param"]].many:
            return f'cast("Any", {expr})'  # the caller's own JSON object (a configuration), sent as given
        return expr

    def optional(self, t: NamedType | None, ps: dict[str, Param], v: dict[str, Any]) -> bool:
        if "param" in v:
            return ps[v["param"]].optional
        f = None if t is None else find_field(t, v["field"])
        return f is not None and not f.required

    def need(self, expr: str, t: NamedType, rule: Rule, field: str) -> str:
        """`expr` narrowed from Optional, failing with a WireError that names the block and the wire."""
        what = t.name + "".join(f"({k}={c!r})" for k, c in rule.spec.get("when", {}).items())
        return f"need({expr}, {what!r}, {field!r}, {self.m.wire!r})"

    def dispatch_fn(self, rule: Rule) -> dict[str, Any]:
        branches: dict[str, dict[str, Any]] = {}
        returns: list[str] = []
        for name in rule.spec:
            target = self.m.to_vendor[name]
            canonical = target.spec["canonical"]
            self.canonical.add(canonical)
            br = branches.setdefault(canonical, {"cls": canonical, "cases": [], "plain": None, "known": []})
            when = target.spec.get("when")
            if when:
                br.setdefault("err_field", next(iter(when)))
                cond = " and ".join(f"b.{k} == {c!r}" for k, c in when.items())
                br["cases"].append((cond, name))
                br["known"].append(", ".join(f"{k}={c!r}" for k, c in when.items()))
            else:
                br["plain"] = name
            t = self.model.types[canonical]
            rt = self.return_type(target, t, params(target))
            if rt not in returns:
                returns.append(rt)
        self.helpers.add("WireError")
        return {
            "name": rule.name,
            "params": " | ".join(branches),
            "returns": " | ".join(returns),
            "branches": list(branches.values()),
            "wire": self.m.wire,
            "doc": f"Pick the rule for a block by its class ({rule.file}#{rule.pointer}).",
        }

    # -- from_vendor -------------------------------------------------------------------------------------------

    def _parse_returns(self, name: str) -> str:
        if name in self.m.parse_dispatch:
            members = [self._parse_returns(n) for n in self.m.parse_dispatch[name].spec]
            return " | ".join(dict.fromkeys([*members, "Unknown"]))
        spec = self.m.from_vendor[name].spec
        return str(spec.get("canonical") or spec["view"])

    def view_class(self, rule: Rule) -> dict[str, Any]:
        fields = []
        for fname, v in rule.spec["fields"].items():
            want = view_want(v, self.parse_names)
            assert want is not None, "checked by wire_check"
            fields.append((fname, self.use(view_annotation(want, self.returns))))
            if want.parse is not None:
                self.note_returns(self.returns[want.parse])
        vendor = rule.spec.get("vendor_model", "the vendor's JSON")
        return {"name": rule.spec["view"], "doc": self.doc(rule, f"A typed view of {vendor}"), "fields": fields}

    def note_returns(self, returns: str) -> None:
        for name in returns.split(" | "):
            if name in self.model.types:
                self.canonical.add(name)
            elif name == "Unknown":
                self.helpers.add("Unknown")

    def from_fn(self, rule: Rule) -> dict[str, Any]:
        spec = rule.spec
        t = self.model.types[spec["canonical"]] if "canonical" in spec else None
        returns = self.returns[f"parse_{rule.name}"]
        self.note_returns(returns)
        self.abc.add("Mapping")
        self.typing.add("Any")
        args: list[tuple[str, str]] = []
        for fname, v in spec["fields"].items():
            if t is not None:
                f = find_field(t, fname)
                want = None if f is None else canonical_want(f, v, self.parse_names, self.model)
            else:
                want = view_want(v, self.parse_names)
            expr = None if want is None else read_expr(want, v, f"_{fname}")
            assert want is not None and expr is not None, "checked by wire_check"
            if want.known is not None:
                self.canonical.add(want.known)
            args.append((fname, self.use(expr)))
        if "tag" in spec:
            where = f"{self.m.wire} {spec['tag']!r} item"
        else:
            where = f"{self.m.wire} {rule.name.replace('_', ' ')}"
        uses_where = any("w)" in expr or "w, " in expr for _, expr in args)
        return {
            "name": f"parse_{rule.name}",
            "returns": returns,
            "where": where if uses_where else None,
            "args": args,
            "doc": self.doc(rule, f"Vendor dict -> {returns}"),
        }

    def parse_dispatch_fn(self, rule: Rule) -> dict[str, Any]:
        table = [(self.m.from_vendor[name].spec["tag"], f"parse_{name}") for name in rule.spec]
        returns = self.returns[f"parse_{rule.name}"]
        self.note_returns(returns)
        self.abc.add("Mapping")
        self.typing.add("Any")
        return {
            "name": f"parse_{rule.name}",
            "returns": returns,
            "table": table,
            "doc": f"Parse by the vendor's `type` tag; Unknown for tags it does not know ({rule.file}#{rule.pointer}).",
        }


def _frozenset(keys: Any) -> str:
    names = sorted(keys)
    return "frozenset({" + ", ".join(map(repr, names)) + "})" if names else "frozenset()"
