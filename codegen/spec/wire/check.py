"""Check a merged wire mapping against the canonical model and the vendor SDKs, before anything is rendered.

Every rule is checked against the canonical model (classes, fields and enums exist; required fields are covered;
parameters are declared) and against the SDK types it names: a `vendor_type` TypedDict (every key it has, none
it lacks, nested objects too, constants among its literals), a `vendor_model` response model (every key read is
a field, with a compatible type, nested paths included), the TypedDicts a marker is set on, the Literal a
constant's values must come from. Keys the SDK does not list must be declared in `extra` with a reason. A typo
fails here with the file and JSON pointer, not as a 400 from the vendor or a KeyError in production.
"""

from __future__ import annotations

import string
from typing import Any

from codegen.errors import SchemaError
from codegen.model import Model, NamedType
from codegen.spec.wire.rules import (
    PARAM_KINDS,
    Mapping,
    Param,
    Rule,
    Want,
    canonical_want,
    conditional,
    find_field,
    keys_read,
    model_types,
    params,
    read_expr,
    view_want,
)
from codegen.spec.wire.sdk import (
    SdkLookupError,
    SdkShape,
    accepts,
    admits,
    field_annotation,
    item_annotation,
    literals,
    nested_keys,
    resolve,
    value_source,
)
from codegen.spec.wire.sdk import shape as sdk_shape

#: The kind a canonical field holds, for checking it against an SDK annotation.
_FIELD_KINDS = {"str": "str", "int": "int", "bool": "bool", "float": "float", "object": "object", "enum": "str"}


class Checker:
    """Cross-checks one merged mapping; `check()` raises SchemaError at the first problem."""

    def __init__(self, m: Mapping, model: Model) -> None:
        self.m, self.model, self.types = m, model, model.types
        self.parse_names = {n: f"parse_{n}" for n in [*m.from_vendor, *m.parse_dispatch]}

    def fail(self, rule: Rule, sub: str, reason: str) -> SchemaError:
        return SchemaError(rule.file, rule.pointer + sub, reason)

    def check(self) -> None:
        for rule in self.m.to_vendor.values():
            self.check_to(rule)
        for rule in self.m.dispatch.values():
            self.check_dispatch(rule, self.m.to_vendor, "to_vendor")
        for rule in self.m.from_vendor.values():
            self.check_from(rule)
        for rule in self.m.parse_dispatch.values():
            self.check_dispatch(rule, self.m.from_vendor, "from_vendor")
        for rule in self.m.constants.values():
            self.check_constant(rule)

    # -- shared ------------------------------------------------------------------------------------------------

    def canonical(self, rule: Rule, key: str = "canonical") -> NamedType:
        name = rule.spec[key]
        t = self.types.get(name)
        if t is None or t.form != "object":
            known = model_types(self.model, "object")
            raise self.fail(rule, f"/{key}", f"{name!r} is not a canonical object type; known: {known}")
        return t

    def sdk(self, rule: Rule, key: str, *, typeddict: bool = False) -> SdkShape:
        try:
            found = sdk_shape(rule.spec[key])
        except SdkLookupError as e:
            raise self.fail(rule, f"/{key}", str(e)) from None
        if typeddict and not found.typeddict:
            raise self.fail(rule, f"/{key}", f"{found.path} is not a TypedDict")
        return found

    def check_extra(self, rule: Rule, sdk: SdkShape, used: set[str]) -> set[str]:
        extra = set(rule.spec.get("extra", {}))
        for key in sorted(extra):
            if key in sdk.keys:
                raise self.fail(rule, f"/extra/{key}", f"{key!r} is a key of {sdk.path}: it needs no reason")
            if key not in used:
                raise self.fail(rule, f"/extra/{key}", f"{key!r} is not used by this rule")
        return extra

    # -- to_vendor ---------------------------------------------------------------------------------------------

    def check_to(self, rule: Rule) -> None:
        spec = rule.spec
        t = self.canonical(rule) if "canonical" in spec else None
        for fname in spec.get("when", {}):
            if t is None:
                raise self.fail(rule, "/when", "when needs a canonical class to look at")
            if find_field(t, fname) is None:
                raise self.fail(rule, f"/when/{fname}", _no_field(t, fname))
        ps = params(rule)
        for p in ps.values():
            self.check_param(rule, p)
        if "extra" in spec and not ("vendor_type" in spec or "vendor_model" in spec):
            raise self.fail(rule, "/extra", "extra names keys outside vendor_type or vendor_model; name one of them")
        if "copy_of" in spec:
            base = ps.get(spec["copy_of"])
            if base is None or base.base != "object" or base.many or "shape" not in spec:
                raise self.fail(rule, "/copy_of", "copy_of must name an object parameter of a shape rule")
        if "sets" in spec:
            self.check_sets(rule)
        if "native" in spec:
            f = None if t is None else find_field(t, spec["native"])
            if t is None or f is None or f.type.kind != "object":
                raise self.fail(rule, "/native", "native must name a dict field of the canonical class")
            return
        if "value" in spec:
            self.check_value(rule, t, ps, spec["value"], "/value", top=False, in_each=False)
            return
        annotations = self.vendor_keys(rule)
        for key, value in spec["shape"].items():
            self.check_value(rule, t, ps, value, f"/shape/{key}", top=True, in_each=False, sdk=annotations.get(key))
        if "prompt" in spec:
            self.check_prompt(rule)

    def check_param(self, rule: Rule, p: Param) -> None:
        ptr = f"/params/{p.name}"
        if p.canonical and p.base not in self.types:
            raise self.fail(rule, ptr, f"{p.base!r} is not a canonical type; known: {sorted(self.types)}")
        if p.sdk:
            try:
                value_source(p.base)
            except SdkLookupError as e:
                raise self.fail(rule, ptr, str(e)) from None

    def vendor_keys(self, rule: Rule) -> dict[str, Any]:
        """Check the shape's keys against vendor_type / vendor_model; the SDK annotation of each key."""
        spec = rule.spec
        shape = spec["shape"]
        if "vendor_type" in spec:
            sdk = self.sdk(rule, "vendor_type", typeddict=True)
        elif "vendor_model" in spec:
            sdk = self.sdk(rule, "vendor_model")
        else:
            return {}
        extra = self.check_extra(rule, sdk, set(shape))
        unknown = set(shape) - set(sdk.keys) - extra
        if unknown:
            raise self.fail(rule, "/shape", f"keys {sorted(unknown)} are not in {sdk.path} (it has {sorted(sdk.keys)})")
        if "vendor_type" in spec and "copy_of" not in spec:
            missing = sdk.required - set(shape)
            if missing:
                raise self.fail(rule, "/shape", f"{sdk.path} requires keys {sorted(missing)} the shape does not set")
            for key in sorted(sdk.required):
                if conditional(shape[key]):
                    raise self.fail(rule, f"/shape/{key}", f"{sdk.path} requires {key!r}: it cannot be left out")
        return {k: sdk.keys[k] for k in shape if k in sdk.keys}

    def check_sets(self, rule: Rule) -> None:
        sets = rule.spec["sets"]
        if "canonical" in rule.spec:
            raise self.fail(rule, "/sets", "a marker rule takes parameters, not a canonical block")
        for i, path in enumerate(sets.get("on", ())):
            try:
                target = sdk_shape(path)
            except SdkLookupError as e:
                raise self.fail(rule, f"/sets/on/{i}", str(e)) from None
            if not target.typeddict or sets["key"] not in target.keys:
                raise self.fail(rule, f"/sets/on/{i}", f"{path} is not a TypedDict with the key {sets['key']!r}")

    def check_prompt(self, rule: Rule) -> None:
        prompt = rule.spec["prompt"]
        enum = self.types.get(prompt["enum"])
        if enum is None or enum.form != "enum":
            raise self.fail(rule, "/prompt/enum", f"{prompt['enum']!r} is not a canonical enum")
        for key, section in prompt["keys"].items():
            if key not in rule.spec["shape"]:
                raise self.fail(rule, f"/prompt/keys/{key}", f"{key!r} is not a key of the shape")
            if section not in enum.values:
                raise self.fail(rule, f"/prompt/keys/{key}", f"{section!r} is not one of {list(enum.values)}")

    def check_value(
        self,
        rule: Rule,
        t: NamedType | None,
        ps: dict[str, Param],
        v: dict[str, Any],
        ptr: str,
        *,
        top: bool,
        in_each: bool,
        sdk: Any = None,
    ) -> None:
        if "item" in v and not in_each:
            raise self.fail(rule, ptr, '{"item": true} is only meaningful inside "each"')
        if "if" in v:
            if not top:
                raise self.fail(rule, f"{ptr}/if", "if works on top-level shape keys only")
            if v["if"] not in ps:
                raise self.fail(rule, f"{ptr}/if", f"no parameter named {v['if']!r}; parameters: {sorted(ps)}")
        if "const" in v and sdk is not None and not admits(sdk, v["const"]):
            raise self.fail(rule, f"{ptr}/const", f"{v['const']!r} is not a value the SDK allows here ({sdk})")
        if "object" in v and sdk is not None and not accepts(sdk, "object"):
            raise self.fail(rule, ptr, f"an object does not fit the SDK's type here ({sdk})")
        if "items" in v:
            if sdk is not None and not accepts(sdk, "list"):
                raise self.fail(rule, ptr, f"a list does not fit the SDK's type here ({sdk})")
            item = None if sdk is None else item_annotation(sdk)
            for i, sub in enumerate(v["items"]):
                self.check_value(rule, t, ps, sub, f"{ptr}/items/{i}", top=False, in_each=in_each, sdk=item)
        if "object" in v:
            nested = nested_keys(sdk)
            for key, sub in v["object"].items():
                if nested is not None and key not in nested:
                    raise self.fail(rule, f"{ptr}/object/{key}", f"{key!r} is not a key here (known: {sorted(nested)})")
                inner = None if nested is None else nested[key]
                self.check_value(rule, t, ps, sub, f"{ptr}/object/{key}", top=False, in_each=in_each, sdk=inner)
        if "template" in v:
            self.check_template(rule, t, ps, v["template"], f"{ptr}/template")
        if "field" in v or "param" in v:
            self.check_ref(rule, t, ps, v, ptr, top=top, sdk=sdk)

    def check_template(self, rule: Rule, t: NamedType | None, ps: dict[str, Param], text: str, ptr: str) -> None:
        for _, name, _, _ in string.Formatter().parse(text):
            if name is None:
                continue
            f = None if t is None else find_field(t, name)
            p = ps.get(name)
            if (f is None or not f.required) and (p is None or p.optional):
                where = _no_field(t, name, True) if t is not None else f"no parameter named {name!r}"
                raise self.fail(rule, ptr, f"placeholder {{{name}}}: {where}")

    def check_ref(
        self, rule: Rule, t: NamedType | None, ps: dict[str, Param], v: dict[str, Any], ptr: str, *, top: bool, sdk: Any
    ) -> None:
        kind: str | None
        if "field" in v:
            if t is None:
                raise self.fail(rule, f"{ptr}/field", "field needs a canonical class; use param for parameters")
            f = find_field(t, v["field"])
            if f is None:
                raise self.fail(rule, f"{ptr}/field", _no_field(t, v["field"]))
            is_list = f.type.kind == "list"
            kind = _FIELD_KINDS.get(f.type.kind, "list" if is_list else None)
        else:
            p = ps.get(v["param"])
            if p is None:
                raise self.fail(rule, f"{ptr}/param", f"no parameter named {v['param']!r}; parameters: {sorted(ps)}")
            is_list = p.many or p.base == "list"
            kind = "list" if p.many else PARAM_KINDS.get(p.base)
        if v.get("omit_if_none") and not top:
            raise self.fail(rule, ptr, "omit_if_none works on top-level shape keys only; use default inside objects")
        if sum(k in v for k in ("rule", "each", "encode")) > 1:
            raise self.fail(rule, ptr, "use at most one of rule, each and encode on a value")
        if "rule" in v and v["rule"] not in self.m.to_vendor and v["rule"] not in self.m.dispatch:
            raise self.fail(rule, f"{ptr}/rule", f"no to_vendor rule or dispatch named {v['rule']!r}")
        if "each" in v:
            if not is_list:
                name = v.get("field") or v.get("param")
                raise self.fail(rule, f"{ptr}/each", f"each needs a list; {name} is not one")
            item = None if sdk is None else item_annotation(sdk)
            self.check_value(rule, t, ps, v["each"], f"{ptr}/each", top=False, in_each=True, sdk=item)
            return
        if v.get("encode") == "json":
            kind = "str"
        if sdk is not None and kind is not None and "rule" not in v and not accepts(sdk, kind):
            raise self.fail(rule, ptr, f"a {kind} value does not fit the SDK's type here ({sdk})")

    def check_dispatch(self, rule: Rule, rules: dict[str, Rule], section: str) -> None:
        seen_plain: set[str] = set()
        for i, name in enumerate(rule.spec):
            if name not in rules:
                raise self.fail(rule, f"/{i}", f"no {section} rule named {name!r}")
            target = rules[name].spec
            if section == "from_vendor" and "tag" not in target:
                raise self.fail(rule, f"/{i}", f"rule {name!r} has no tag, so it cannot be picked by the vendor's type")
            if section == "to_vendor" and "canonical" not in target:
                raise self.fail(rule, f"/{i}", f"rule {name!r} converts no canonical class, so nothing picks it")
            if section == "to_vendor" and "when" not in target:
                if target["canonical"] in seen_plain:
                    raise self.fail(rule, f"/{i}", f"two rules without `when` for {target['canonical']}")
                seen_plain.add(target["canonical"])
        if section == "from_vendor":
            tags = [rules[n].spec["tag"] for n in rule.spec]
            if len(set(tags)) != len(tags):
                raise self.fail(rule, "", f"two rules share a tag: {tags}")

    # -- from_vendor -------------------------------------------------------------------------------------------

    def check_from(self, rule: Rule) -> None:
        spec = rule.spec
        fields = spec["fields"]
        t = self.canonical(rule) if "canonical" in spec else None
        wants: dict[str, Want] = {}
        for fname, v in fields.items():
            ptr = f"/fields/{fname}"
            if t is not None:
                f = find_field(t, fname)
                if f is None:
                    raise self.fail(rule, ptr, _no_field(t, fname))
                want = canonical_want(f, v, self.parse_names, self.model)
                what = f"{t.name}.{fname} ({f.type.kind})"
            else:
                if "rule" in v and v["rule"] not in self.parse_names:
                    raise self.fail(rule, f"{ptr}/rule", f"no from_vendor rule or parse_dispatch named {v['rule']!r}")
                want = view_want(v, self.parse_names)
                if want is None:
                    raise self.fail(rule, ptr, "a view field needs a type, a rule or equals")
                what = f"{spec['view']}.{fname}"
            if want is None or read_expr(want, v, "_v") is None:
                raise self.fail(rule, ptr, f"cannot read {what} this way")
            wants[fname] = want
        if t is not None:
            missing = [f.py_name for f in t.fields if f.required and not f.is_const and f.py_name not in fields]
            if missing:
                raise self.fail(rule, "/fields", f"{t.name} requires {missing}; say where each comes from")
        if "vendor_model" in spec:
            self.check_reads(rule, wants)
        elif "extra" in spec:
            raise self.fail(rule, "/extra", "extra names keys outside vendor_model; name it")

    def check_reads(self, rule: Rule, wants: dict[str, Want]) -> None:
        """Every key read is a field of vendor_model (or declared extra), nested paths included, types compatible."""
        sdk = self.sdk(rule, "vendor_model")
        top = {path[0] for v in rule.spec["fields"].values() for path in keys_read(v)}
        extra = self.check_extra(rule, sdk, top)
        for fname, v in rule.spec["fields"].items():
            for path in keys_read(v):
                if path[0] in extra:
                    continue
                annotation = self.walk(rule, sdk.keys, sdk.path, path, f"/fields/{fname}")
                leaf_kind = _leaf_kind(wants[fname], v)
                if "each" in v:
                    item = item_annotation(annotation)
                    if item is not None:
                        nested = nested_keys(item)
                        for inner in keys_read(v["each"]):
                            if nested is not None:
                                self.walk(rule, nested, f"{sdk.path} {'.'.join(path)}[]", inner, f"/fields/{fname}")
                elif leaf_kind is not None and not accepts(annotation, leaf_kind):
                    where = f"{sdk.path}.{'.'.join(path)}"
                    raise self.fail(rule, f"/fields/{fname}", f"{where} is {annotation}, which holds no {leaf_kind}")

    def walk(self, rule: Rule, keys: dict[str, Any], owner: str, path: list[str], ptr: str) -> Any:
        annotation: Any = None
        for i, part in enumerate(path):
            if part not in keys:
                where = owner if i == 0 else f"{owner}.{'.'.join(path[:i])}"
                raise self.fail(rule, ptr, f"{part!r} is not a field of {where} (it has {sorted(keys)})")
            annotation = keys[part]
            if i < len(path) - 1:
                nested = nested_keys(annotation)
                if nested is None:
                    raise self.fail(rule, ptr, f"{'.'.join(path[: i + 1])} of {owner} is not an object")
                keys = nested
        return annotation

    def check_constant(self, rule: Rule) -> None:
        spec = rule.spec
        if "values_of" in spec:
            self.check_values_of(rule)
        if "literal_of" not in spec:
            return
        value = spec["value"]
        self.check_literals(rule, "literal_of", [value] if isinstance(value, str) else list(value))

    def check_values_of(self, rule: Rule) -> None:
        value = rule.spec["value"]
        if not isinstance(value, dict):
            raise self.fail(rule, "/values_of", "values_of checks the values of a table; this constant is no table")
        self.check_literals(rule, "values_of", list(value.values()))

    def check_literals(self, rule: Rule, key: str, names: list[str]) -> None:
        path = rule.spec[key]
        try:
            allowed = _literals_at(path)
        except SdkLookupError as e:
            raise self.fail(rule, f"/{key}", str(e)) from None
        unknown = [n for n in names if n not in allowed]
        if unknown:
            shown = sorted(a for a in allowed if isinstance(a, str))
            raise self.fail(rule, "/value", f"{unknown} are not values of {path} ({shown})")


def _no_field(t: NamedType, name: str, required: bool = False) -> str:
    names = [f.py_name for f in t.fields if f.required or not required]
    return f"{t.name} has no {'required ' if required else ''}field {name!r}; its fields: {names}"


def _literals_at(path: str) -> set[Any]:
    """The literal values a dotted path admits: a Literal alias itself, or a model field / TypedDict key."""
    try:
        found = literals(resolve(path))
    except SdkLookupError:
        found = set()
    return found or literals(field_annotation(path))


def _leaf_kind(want: Want, v: dict[str, Any]) -> str | None:
    """The kind the SDK value at the read key must admit (None: not checked)."""
    if "equals" in v or "decode" in v:
        return "str"
    if "collect" in v or want.kind == "rule":
        return "object"
    if want.kind in ("map_int",):
        return "object"
    if want.kind == "list_str":
        return "list"
    return want.kind if want.kind in ("str", "int", "bool", "float", "object", "list") else None
