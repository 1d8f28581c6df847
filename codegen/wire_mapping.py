"""Stage two for the wire: schemas/wire/<wire>.json mapping files -> checked, merged `Mapping`s.

A mapping file says, field by field, which canonical block becomes which vendor shape (`to_vendor`) and how
response blocks come back (`from_vendor`). Each file is validated against codegen's grammar for mapping files
(schemas/wire/wire-mapping.schema.json), merged with the files it `extends`, then checked against the canonical
model (classes and fields exist, required fields are covered) and against the vendor SDK (the named TypedDict
exists, the shape has all its required keys and no unknown ones), so a typo fails here with the file and JSON
pointer rather than as a 400 from the vendor. codegen/plugins/wire.py renders the checked mappings.
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
from codegen.model import Field, Model, NamedType, SchemaFile, TypeExpr, read_json

MAPPING_SCHEMA = "wire-mapping.schema.json"
#: The grammar of mapping files. It describes what this module understands, so it is read from codegen's own
#: checkout whichever schema folder is being generated (a mapping folder cannot bring a grammar of its own).
GRAMMAR = Path(__file__).resolve().parent.parent / "schemas" / "wire" / MAPPING_SCHEMA


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


def load_mappings(wire_dir: Path, model: Model, display_root: Path | None = None) -> dict[str, Mapping]:
    """Every mapping file in `wire_dir`, merged with its parents and checked; {} when the folder does not exist."""
    root = display_root or wire_dir.parent.parent
    validator = Draft202012Validator(json.loads(GRAMMAR.read_text(encoding="utf-8")))
    raw_files: dict[str, SchemaFile] = {}
    for p in iter_wire_files(wire_dir):
        shown, data, raw = read_json(p, root)
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
            if find_field(t, fname) is None:
                raise self.fail(rule, f"/when/{fname}", _no_field(t, fname))
        if "native" in rule.spec:
            f = find_field(t, rule.spec["native"])
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
                placeholder = None if name is None else find_field(t, name)
                if name is not None and (placeholder is None or not placeholder.required):
                    raise self.fail(rule, f"{ptr}/template", f"placeholder {{{name}}}: {_no_field(t, name, True)}")
        if "field" not in v:
            return
        f = find_field(t, v["field"])
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
            f = find_field(t, fname)
            if f is None:
                raise self.fail(rule, f"/fields/{fname}", _no_field(t, fname))
            if read_expr(f, v) is None:
                raise self.fail(rule, f"/fields/{fname}", f"cannot read {t.name}.{fname} ({_kind(f.type)}) this way")
        missing = [f.py_name for f in t.fields if f.required and not f.is_const and f.py_name not in fields]
        if missing:
            raise self.fail(rule, "/fields", f"{t.name} requires {missing}; say where each comes from")


def find_field(t: NamedType, name: str) -> Field | None:
    return next((f for f in t.fields if f.py_name == name), None)


def _no_field(t: NamedType, name: str, required: bool = False) -> str:
    names = [f.py_name for f in t.fields if f.required or not required]
    return f"{t.name} has no {'required ' if required else ''}field {name!r}; its fields: {names}"


def _kind(e: TypeExpr) -> str:
    if e.kind == "list" and e.item is not None:
        return f"list of {e.item.kind}"
    return e.kind


def _pointer(path: Any) -> str:
    return "/" + "/".join(str(p) for p in path)


# How a canonical field is read from a vendor dict, as Python source. It lives here, not in the wire plugin,
# because the checker's question "can this rule be read?" is answered by trying: read_expr returns None if not.

_READERS = {"str": "str", "bool": "bool", "int": "int", "object": "obj", "enum": "str"}


def read_expr(f: Field, v: dict[str, Any], subject: str = "d") -> str | None:
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
    inner = read_expr(item, v["each"], "as_map(x, w)")
    if inner is None:
        return None
    items = f"[{inner} for x in {{raw}}]"
    value = f"{v['join']!r}.join({items})" if "join" in v else items
    if f.required:
        return value.format(raw=f"req_list({src}, {key!r}, w)")
    raw = f"raw_{f.py_name}"
    return f"None if ({raw} := opt_list({src}, {key!r}, w)) is None else " + value.format(raw=raw)


def iter_wire_files(wire_dir: Path) -> Iterator[Path]:
    """The mapping files: every *.json in `wire_dir` except the grammar (kept beside them for editors)."""
    if not wire_dir.is_dir():
        return iter(())
    return (p for p in sorted(wire_dir.glob("*.json")) if p.name != MAPPING_SCHEMA)
