"""Vendor wire serializers: schemas/wire/<wire>.json mapping files -> sdk/segue/generated/wire/<wire>.py.

A mapping file says, field by field, which canonical block becomes which vendor shape (`to_vendor`) and how
response blocks come back (`from_vendor`). Each file is validated against schemas/wire/wire-mapping.schema.json,
then checked against the canonical model (classes and fields exist, required fields are covered) and against the
vendor SDK (the named TypedDict exists, the shape has all its required keys and no unknown ones), so a typo fails
here with the file and JSON pointer rather than as a 400 from the vendor. The generated functions are annotated
with the SDK TypedDicts (imported only under TYPE_CHECKING), so mypy --strict checks them too.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import string
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import typing_extensions
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from codegen.errors import SchemaError
from codegen.model import Field, Model, NamedType, SchemaFile, TypeExpr
from codegen.render import GENERATED_DIR, REPO_ROOT, header, template_env

WIRE_DIR = REPO_ROOT / "schemas" / "wire"
MAPPING_SCHEMA = "wire-mapping.schema.json"
OUT_DIR = f"{GENERATED_DIR}/wire"

_env = template_env()


@attrs.frozen(kw_only=True)
class Rule:
    """One to_vendor or from_vendor rule, with the file that defined it (for error pointers)."""

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


def render_wire(model: Model, wire_dir: Path = WIRE_DIR) -> dict[str, str]:
    """Every generated wire module, keyed by path. Empty when the model has no canonical Message (a test model)."""
    if "Message" not in model.types or not wire_dir.is_dir():
        return {}
    mappings = load_mappings(wire_dir, model)
    out = {f"{OUT_DIR}/{m.wire}.py": _render_module(m, mappings, model) for m in mappings.values()}
    files = [f for m in mappings.values() for f in m.chain[:1]]
    out[f"{OUT_DIR}/__init__.py"] = _env.get_template("wire_init.py.jinja").render(
        header=header(files), wires=sorted(mappings)
    )
    return out


def load_mappings(wire_dir: Path, model: Model) -> dict[str, Mapping]:
    schema_path = wire_dir / MAPPING_SCHEMA
    validator = Draft202012Validator(json.loads(schema_path.read_text(encoding="utf-8")))
    raw_files: dict[str, SchemaFile] = {}
    for p in sorted(wire_dir.glob("*.json")):
        if p.name == MAPPING_SCHEMA:
            continue
        shown = _shown(p)
        data = p.read_bytes()
        try:
            raw = json.loads(data)
        except json.JSONDecodeError as e:
            raise SchemaError(shown, "/", f"not valid JSON: {e}") from None
        err = best_match(validator.iter_errors(raw))
        if err is not None:
            raise SchemaError(shown, _pointer(err.absolute_path), f"invalid wire mapping: {err.message}")
        if raw["wire"] != p.stem:
            raise SchemaError(shown, "/wire", f"wire {raw['wire']!r} must equal the file name {p.stem!r}")
        sha = hashlib.sha256(data).hexdigest()
        raw_files[p.stem] = SchemaFile(
            path=shown, id=f"urn:segue:wire:{p.stem}", module=p.stem, sha256=sha, raw=raw, types=()
        )
    mappings = {wire: _merge(wire, raw_files) for wire in raw_files}
    for m in mappings.values():
        _Checker(m, model).check()
    return mappings


def _merge(wire: str, files: dict[str, SchemaFile]) -> Mapping:
    chain: list[SchemaFile] = []
    name: str | None = wire
    while name is not None:
        if name not in files:
            raise SchemaError(chain[-1].path, "/extends", f"extends unknown wire {name!r}; known: {sorted(files)}")
        if files[name] in chain:
            raise SchemaError(files[wire].path, "/extends", f"wires extend each other in a cycle through {name!r}")
        chain.append(files[name])
        name = files[name].raw.get("extends")
    sections: dict[str, dict[str, Rule]] = {}
    for section in ("to_vendor", "dispatch", "from_vendor", "parse_dispatch"):
        merged: dict[str, Rule] = {}
        for f in reversed(chain):  # the farthest ancestor first, so nearer files replace its rules
            for rule_name, spec in f.raw.get(section, {}).items():
                merged[rule_name] = Rule(
                    name=rule_name, spec=spec, file=f.path, pointer=f"/{section}/{rule_name}", wire=f.module
                )
        sections[section] = merged
    return Mapping(
        wire=wire,
        file=chain[0],
        chain=tuple(chain),
        parent=chain[0].raw.get("extends"),
        to_vendor=sections["to_vendor"],
        dispatch=sections["dispatch"],
        from_vendor=sections["from_vendor"],
        parse_dispatch=sections["parse_dispatch"],
    )


class _Checker:
    """Cross-checks a merged mapping against the canonical model and the vendor SDK's TypedDicts."""

    def __init__(self, m: Mapping, model: Model) -> None:
        self.m, self.types = m, model.types

    def fail(self, rule: Rule, sub: str, reason: str) -> SchemaError:
        return SchemaError(rule.file, rule.pointer + sub, reason)

    def canonical(self, rule: Rule) -> NamedType:
        name = rule.spec["canonical"]
        t = self.types.get(name)
        if t is None or t.form != "object":
            known = sorted(n for n, t in self.types.items() if t.form == "object")
            raise self.fail(rule, "/canonical", f"{name!r} is not a canonical object type; known: {known}")
        return t

    def check(self) -> None:
        for rule in self.m.to_vendor.values():
            self.check_to(rule)
        for rule in self.m.dispatch.values():
            self.check_dispatch(rule, self.m.to_vendor, "to_vendor")
        for rule in self.m.from_vendor.values():
            self.check_from(rule)
        for rule in self.m.parse_dispatch.values():
            self.check_dispatch(rule, self.m.from_vendor, "from_vendor")

    def check_to(self, rule: Rule) -> None:
        t = self.canonical(rule)
        for fname in rule.spec.get("when", {}):
            if _field(t, fname) is None:
                raise self.fail(rule, f"/when/{fname}", _no_field(t, fname))
        if "native" in rule.spec:
            f = _field(t, rule.spec["native"])
            if f is None or f.type.kind != "object":
                raise self.fail(rule, "/native", f"native must name a dict field of {t.name}: {_no_field(t, '')}")
            return
        if "value" in rule.spec:
            self.check_value(rule, t, rule.spec["value"], "/value", top=False, in_each=False)
            return
        for key, value in rule.spec["shape"].items():
            self.check_value(rule, t, value, f"/shape/{key}", top=True, in_each=False)
        if "vendor_type" in rule.spec:
            self.check_vendor_type(rule, set(rule.spec["shape"]))

    def check_value(self, rule: Rule, t: NamedType, v: dict[str, Any], ptr: str, *, top: bool, in_each: bool) -> None:
        if "item" in v and not in_each:
            raise self.fail(rule, ptr, '{"item": true} is only meaningful inside "each"')
        if "object" in v:
            for key, sub in v["object"].items():
                self.check_value(rule, t, sub, f"{ptr}/object/{key}", top=False, in_each=in_each)
        if "template" in v:
            for _, name, _, _ in string.Formatter().parse(v["template"]):
                placeholder = None if name is None else _field(t, name)
                if name is not None and (placeholder is None or not placeholder.required):
                    raise self.fail(rule, f"{ptr}/template", f"placeholder {{{name}}}: {_no_field(t, name, True)}")
        if "field" not in v:
            return
        f = _field(t, v["field"])
        if f is None:
            raise self.fail(rule, f"{ptr}/field", _no_field(t, v["field"]))
        if v.get("omit_if_none") and not top:
            raise self.fail(rule, ptr, "omit_if_none works on top-level shape keys only; use default inside objects")
        if sum(k in v for k in ("rule", "each", "encode")) > 1:
            raise self.fail(rule, ptr, "use at most one of rule, each and encode on a field")
        if "rule" in v and v["rule"] not in self.m.to_vendor and v["rule"] not in self.m.dispatch:
            raise self.fail(rule, f"{ptr}/rule", f"no to_vendor rule or dispatch named {v['rule']!r}")
        if "each" in v:
            if f.type.kind != "list":
                raise self.fail(rule, f"{ptr}/each", f"each needs a list field; {t.name}.{f.py_name} is not one")
            self.check_value(rule, t, v["each"], f"{ptr}/each", top=False, in_each=True)

    def check_vendor_type(self, rule: Rule, keys: set[str]) -> None:
        path = rule.spec["vendor_type"]
        module, _, name = path.rpartition(".")
        try:
            td = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            reason = f"cannot import {path!r}: is the SDK installed and the name right?"
            raise self.fail(rule, "/vendor_type", reason) from None
        if not typing_extensions.is_typeddict(td):
            raise self.fail(rule, "/vendor_type", f"{path} is not a TypedDict")
        hints = typing.get_type_hints(td, include_extras=True)
        known = set(hints)
        # With postponed annotations __required_keys__ can miss Required[...] markers: read them from the hints.
        required = set(td.__required_keys__) | {
            k for k, h in hints.items() if typing_extensions.get_origin(h) is typing_extensions.Required
        }
        if keys - known:
            raise self.fail(rule, "/shape", f"keys {sorted(keys - known)} are not in {path} (it has {sorted(known)})")
        if required - keys:
            raise self.fail(rule, "/shape", f"{path} requires keys {sorted(required - keys)} the shape does not set")

    def check_dispatch(self, rule: Rule, rules: dict[str, Rule], section: str) -> None:
        seen_plain: set[str] = set()
        for i, name in enumerate(rule.spec):
            if name not in rules:
                raise self.fail(rule, f"/{i}", f"no {section} rule named {name!r}")
            target = rules[name].spec
            if section == "from_vendor" and "tag" not in target:
                raise self.fail(rule, f"/{i}", f"rule {name!r} has no tag, so it cannot be picked by the vendor's type")
            if section == "to_vendor" and "when" not in target:
                if target["canonical"] in seen_plain:
                    raise self.fail(rule, f"/{i}", f"two rules without `when` for {target['canonical']}")
                seen_plain.add(target["canonical"])
        if section == "from_vendor":
            tags = [rules[n].spec["tag"] for n in rule.spec]
            if len(set(tags)) != len(tags):
                raise self.fail(rule, "", f"two rules share a tag: {tags}")

    def check_from(self, rule: Rule) -> None:
        t = self.canonical(rule)
        fields = rule.spec["fields"]
        for fname, v in fields.items():
            f = _field(t, fname)
            if f is None:
                raise self.fail(rule, f"/fields/{fname}", _no_field(t, fname))
            if _read(f, v) is None:
                raise self.fail(rule, f"/fields/{fname}", f"cannot read {t.name}.{fname} ({_kind(f.type)}) this way")
        missing = [f.py_name for f in t.fields if f.required and not f.is_const and f.py_name not in fields]
        if missing:
            raise self.fail(rule, "/fields", f"{t.name} requires {missing}; say where each comes from")


def _field(t: NamedType, name: str) -> Field | None:
    return next((f for f in t.fields if f.py_name == name), None)


def _no_field(t: NamedType, name: str, required: bool = False) -> str:
    names = [f.py_name for f in t.fields if f.required or not required]
    return f"{t.name} has no {'required ' if required else ''}field {name!r}; its fields: {names}"


def _kind(e: TypeExpr) -> str:
    if e.kind == "list" and e.item is not None:
        return f"list of {e.item.kind}"
    return e.kind


def _shown(p: Path) -> str:
    try:
        return p.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return p.as_posix()


def _pointer(path: Any) -> str:
    return "/" + "/".join(str(p) for p in path)


# ---- code generation: expressions as Python source, kept out of the templates ----

_READERS = {"str": "str", "bool": "bool", "int": "int", "object": "obj", "enum": "str"}


def _read(f: Field, v: dict[str, Any], subject: str = "d") -> str | None:
    """The expression reading canonical field `f` from the vendor dict `subject`; None when the spec cannot."""
    if "const" in v:
        return repr(v["const"])
    if "context" in v:
        return "model"
    if "whole" in v:
        return f"dict({subject})" if f.type.kind == "object" else None
    *parents, key = v["key"].split(".")
    src = subject
    for part in parents:
        src = f"req_map({src}, {part!r}, w)"
    if "each" in v:
        return _read_each(f, v, src, key)
    if "decode" in v:
        ok = f.type.kind == "object" and f.required
        return f"loads_arguments(req_str({src}, {key!r}, w), w)" if ok else None
    kind = _READERS.get(f.type.kind)
    if kind is None or (f.required and kind not in ("str", "obj")):
        return None
    return f"{'req' if f.required else 'opt'}_{kind}({src}, {key!r}, w)"


def _read_each(f: Field, v: dict[str, Any], src: str, key: str) -> str | None:
    if "join" in v and f.type.kind == "str":
        item = attrs.evolve(f, required=True)
    elif "join" not in v and f.type.kind == "list" and f.type.item is not None and f.type.item.kind == "str":
        item = attrs.evolve(f, type=f.type.item, required=True)
    else:
        return None
    inner = _read(item, v["each"], "as_map(x, w)")
    if inner is None:
        return None
    items = f"[{inner} for x in {{raw}}]"
    value = f"{v['join']!r}.join({items})" if "join" in v else items
    if f.required:
        return value.format(raw=f"req_list({src}, {key!r}, w)")
    raw = f"raw_{f.py_name}"
    return f"None if ({raw} := opt_list({src}, {key!r}, w)) is None else " + value.format(raw=raw)


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
        f = _field(t, v["field"])
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
        for fname, v in rule.spec["fields"].items():
            f = _field(t, fname)
            expr = None if f is None else _read(f, v)
            assert expr is not None, "checked by _Checker.check_from"
            args.append((fname, expr))
            self.helpers.update(h for h in _PARSE_HELPERS if h + "(" in expr)
        where = f"{self.m.wire} {rule.spec['tag']!r} item" if "tag" in rule.spec else f"{self.m.wire} {rule.name}"
        return {
            "name": f"parse_{rule.name}",
            "returns": t.name,
            "where": where,
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


def _inherited(m: Mapping, mappings: dict[str, Mapping]) -> tuple[set[str], set[str]]:
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


def _render_module(m: Mapping, mappings: dict[str, Mapping], model: Model) -> str:
    b = _ModuleBuilder(m, model)
    inherited_to, inherited_from = _inherited(m, mappings)
    to_fns = [b.to_fn(r) for n, r in m.to_vendor.items() if n not in inherited_to]
    dispatches = [b.dispatch_fn(r) for n, r in m.dispatch.items() if n not in inherited_to]
    from_fns = [b.from_fn(r) for n, r in m.from_vendor.items() if f"parse_{n}" not in inherited_from]
    parse_dispatches = [
        b.parse_dispatch_fn(r) for n, r in m.parse_dispatch.items() if f"parse_{n}" not in inherited_from
    ]
    if from_fns or parse_dispatches:
        b.helpers.add("Any")
    owner = {t.name: t.module for t in model.types.values()}
    canonical_imports: dict[str, list[str]] = {}
    for name in sorted(b.canonical):
        canonical_imports.setdefault(owner[name], []).append(name)
    sdk_imports: dict[str, list[str]] = {}
    for path, local in sorted(b.sdk.items()):
        module, _, name = path.rpartition(".")
        sdk_imports.setdefault(module, []).append(name if name == local else f"{name} as {local}")
    sources = [*m.chain, *(f for f in model.files if f.module in canonical_imports)]
    return _env.get_template("wire.py.jinja").render(
        header=header(sources),
        m=m,
        description=m.file.raw["description"],
        canonical_imports=sorted(canonical_imports.items()),
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


def iter_wire_files(wire_dir: Path = WIRE_DIR) -> Iterator[Path]:
    """The mapping files (for tests and tools): every *.json in schemas/wire/ except the mapping schema."""
    return (p for p in sorted(wire_dir.glob("*.json")) if p.name != MAPPING_SCHEMA)
