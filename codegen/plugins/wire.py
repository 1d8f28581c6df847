"""Plugin: vendor wire serializers, one module per mapping file -> wire/<wire>.py and wire/__init__.py.

The mappings arrive checked (codegen/wire_mapping.py). Each generated function is annotated with the vendor
SDK's TypedDict (imported only under TYPE_CHECKING), so mypy --strict checks the shapes against the SDK too.
"""

from __future__ import annotations

import string
from typing import Any

from codegen.emit import header, imports_by_module, render
from codegen.model import Model, NamedType
from codegen.spec import Spec
from codegen.wire_mapping import Mapping, Rule, find_field, read_expr


def generate(spec: Spec, package: str) -> dict[str, str]:
    """Every wire module, keyed by its path in the generated package; {} when there are no mapping files."""
    if not spec.wires:
        return {}
    out = {f"wire/{m.wire}.py": _render_module(m, spec.model, package) for m in spec.wires.values()}
    out["wire/__init__.py"] = render(
        "wire_init.py.jinja",
        header=header(m.file for m in spec.wires.values()),
        package=package,
        wires=sorted(spec.wires),
    )
    return out


_PARSE_HELPERS = tuple(
    "req_str opt_str req_obj opt_obj opt_bool opt_int req_map as_map req_list opt_list loads_arguments".split()
)


class _ModuleBuilder:
    """Collects what one generated module needs: canonical classes, SDK types and helper names."""

    def __init__(self, m: Mapping, model: Model) -> None:
        self.m, self.model = m, model
        self.canonical: set[str] = set()
        self.sdk: dict[str, str] = {}  # dotted path -> local name
        self.helpers: set[str] = set()

    def sdk_name(self, path: str) -> str:
        if path not in self.sdk:
            module, _, name = path.rpartition(".")
            taken = set(self.sdk.values())
            self.sdk[path] = name if name not in taken else f"{module.rpartition('.')[2]}_{name}"
        return self.sdk[path]

    def return_type(self, rule: Rule) -> str:
        spec = rule.spec
        if "native" in spec:
            self.helpers.add("Any")
            return "dict[str, Any]"
        if "value" in spec:
            return "str"
        if "vendor_type" in spec:
            return self.sdk_name(spec["vendor_type"])
        return "dict[str, Any]"

    def value(self, t: NamedType, rule: Rule, v: dict[str, Any], subject: str, depth: int = 0) -> str:
        if "const" in v:
            return repr(v["const"])
        if "item" in v:
            return f"x{depth - 1}"
        if "object" in v:
            inner = ", ".join(f"{k!r}: {self.value(t, rule, s, subject, depth)}" for k, s in v["object"].items())
            return "{" + inner + "}"
        if "template" in v:
            out = []
            for lit, name, _, _ in string.Formatter().parse(v["template"]):
                out.append(lit.replace("\\", "\\\\").replace('"', '\\"').replace("{", "{{").replace("}", "}}"))
                if name is not None:
                    out.append("{" + f"{subject}.{name}" + "}")
            return 'f"' + "".join(out) + '"'
        f = find_field(t, v["field"])
        assert f is not None
        expr = f"{subject}.{f.py_name}"
        if not f.required and not v.get("omit_if_none"):
            if "default" in v:
                expr = f"({expr} if {expr} is not None else {v['default']!r})"
            else:
                expr = self.need(expr, t, rule, f.py_name)
        if "each" in v:
            return f"[{self.value(t, rule, v['each'], subject, depth + 1)} for x{depth} in {expr}]"
        if "rule" in v:
            return f"{v['rule']}({expr})"
        if v.get("encode") == "json":
            self.helpers.add("dumps_arguments")
            return f"dumps_arguments({expr})"
        return expr

    def need(self, expr: str, t: NamedType, rule: Rule, field: str) -> str:
        """`expr` narrowed from Optional, failing with a WireError that names the block and the wire."""
        self.helpers.add("need")
        what = t.name + "".join(f"({k}={c!r})" for k, c in rule.spec.get("when", {}).items())
        return f"need({expr}, {what!r}, {field!r}, {self.m.wire!r})"

    def to_fn(self, rule: Rule) -> dict[str, Any]:
        t = self.model.types[rule.spec["canonical"]]
        self.canonical.add(t.name)
        fn: dict[str, Any] = {"name": rule.name, "param": t.name, "returns": self.return_type(rule), "wire": rule.wire}
        fn["doc"] = f"{t.name} -> {rule.spec.get('vendor_type', 'vendor value')} ({rule.file}#{rule.pointer})."
        if "native" in rule.spec:
            fn["kind"] = "native"
            fn["expr"] = self.need(f"b.{rule.spec['native']}", t, rule, rule.spec["native"])
            return fn
        if "value" in rule.spec:
            fn["kind"] = "value"
            fn["expr"] = self.value(t, rule, rule.spec["value"], "b")
            return fn
        fn["kind"] = "shape"
        fn["required"] = []
        fn["optional"] = []
        for key, v in rule.spec["shape"].items():
            if v.get("omit_if_none"):
                fn["optional"].append((repr(key), f"b.{v['field']}", self.value(t, rule, v, "b")))
            else:
                fn["required"].append((repr(key), self.value(t, rule, v, "b")))
        return fn

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
            rt = self.return_type(target)
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

    def from_fn(self, rule: Rule) -> dict[str, Any]:
        t = self.model.types[rule.spec["canonical"]]
        self.canonical.add(t.name)
        args: list[tuple[str, str]] = []
        helpers: set[str] = set()
        for fname, v in rule.spec["fields"].items():
            f = find_field(t, fname)
            expr = None if f is None else read_expr(f, v)
            assert expr is not None, "checked by _Checker.check_from"
            args.append((fname, expr))
            helpers.update(h for h in _PARSE_HELPERS if h + "(" in expr)
        self.helpers |= helpers
        where = f"{self.m.wire} {rule.spec['tag']!r} item" if "tag" in rule.spec else f"{self.m.wire} {rule.name}"
        return {
            "name": f"parse_{rule.name}",
            "returns": t.name,
            # What a parse error names (`w`); only the helpers read it, so a rule that uses none has no `w`.
            "where": where if helpers else None,
            "args": args,
            "doc": f"Vendor dict -> {t.name} ({rule.file}#{rule.pointer}).",
        }

    def parse_dispatch_fn(self, rule: Rule) -> dict[str, Any]:
        returns: list[str] = []
        table = []
        for name in rule.spec:
            target = self.m.from_vendor[name]
            if target.spec["canonical"] not in returns:
                returns.append(target.spec["canonical"])
            table.append((target.spec["tag"], f"parse_{name}"))
        return {
            "name": f"parse_{rule.name}",
            "returns": " | ".join(returns),
            "table": table,
            "doc": f"Parse by the vendor's `type` tag; None for tags it does not know ({rule.file}#{rule.pointer}).",
        }


def _inherited(m: Mapping) -> tuple[set[str], set[str]]:
    """Names this module imports from its parent: inherited rules, and dispatches none of whose rules changed."""
    if m.parent is None:
        return set(), set()
    own_to = {n for n, r in m.to_vendor.items() if r.wire == m.wire}
    own_from = {n for n, r in m.from_vendor.items() if r.wire == m.wire}
    to_names = {n for n, r in m.to_vendor.items() if r.wire != m.wire}
    from_names = {f"parse_{n}" for n, r in m.from_vendor.items() if r.wire != m.wire}
    for n, r in m.dispatch.items():
        if r.wire != m.wire and not set(r.spec) & own_to:
            to_names.add(n)
    for n, r in m.parse_dispatch.items():
        if r.wire != m.wire and not set(r.spec) & own_from:
            from_names.add(f"parse_{n}")
    return to_names, from_names


def _render_module(m: Mapping, model: Model, package: str) -> str:
    b = _ModuleBuilder(m, model)
    inherited_to, inherited_from = _inherited(m)
    to_fns = [b.to_fn(r) for n, r in m.to_vendor.items() if n not in inherited_to]
    dispatches = [b.dispatch_fn(r) for n, r in m.dispatch.items() if n not in inherited_to]
    from_fns = [b.from_fn(r) for n, r in m.from_vendor.items() if f"parse_{n}" not in inherited_from]
    parse_dispatches = [
        b.parse_dispatch_fn(r) for n, r in m.parse_dispatch.items() if f"parse_{n}" not in inherited_from
    ]
    if from_fns or parse_dispatches:
        b.helpers.add("Any")
    canonical_imports = imports_by_module(b.canonical, model.owner)
    sdk_imports: dict[str, list[str]] = {}
    for path, local in sorted(b.sdk.items()):
        module, _, name = path.rpartition(".")
        sdk_imports.setdefault(module, []).append(name if name == local else f"{name} as {local}")
    sources = [*m.chain, *(f for f in model.files if f.module in dict(canonical_imports))]
    return render(
        "wire.py.jinja",
        header=header(sources),
        package=package,
        m=m,
        description=m.file.raw["description"],
        canonical_imports=canonical_imports,
        sdk_imports=sorted(sdk_imports.items()),
        helpers=sorted(h for h in b.helpers if h != "Any"),
        uses_any="Any" in b.helpers,
        uses_mapping=bool(from_fns or parse_dispatches),
        inherited=sorted(inherited_to | inherited_from),
        to_fns=to_fns,
        dispatches=dispatches,
        from_fns=from_fns,
        parse_dispatches=parse_dispatches,
        exported=sorted(
            [f["name"] for f in to_fns + dispatches + from_fns + parse_dispatches] + list(inherited_to | inherited_from)
        ),
    )
