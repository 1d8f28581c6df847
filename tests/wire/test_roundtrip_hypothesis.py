"""Hypothesis: for every generated type, schema-valid JSON structures and unstructures back unchanged.

Strategies are derived from the same codegen model the classes were generated from, so a new schema type is
covered without touching this file.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

import segue.generated as generated
from codegen.model import Field, Model, NamedType, TypeExpr, load_model
from segue.generated import get_converter

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
MODEL: Model = load_model(SCHEMAS)
_raw = [f.raw for f in MODEL.files]
_registry: Registry[Any] = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in _raw)
_home = {t.name: f.id for f in MODEL.files for t in f.types}

json_leaf = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def expr_strategy(e: TypeExpr, depth: int) -> st.SearchStrategy[Any]:
    c = dict(e.constraints)
    match e.kind:
        case "str":
            if "pattern" in c:
                return st.from_regex(c["pattern"], fullmatch=True)
            return st.text(min_size=c.get("minLength", 0), max_size=12)
        case "int":
            return st.integers(min_value=c.get("minimum", -(2**31)), max_value=c.get("maximum", 2**31))
        case "float":
            return st.floats(
                min_value=c.get("minimum"), max_value=c.get("maximum"), allow_nan=False, allow_infinity=False, width=32
            )
        case "bool":
            return st.booleans()
        case "any":
            return json_value
        case "object":
            return st.dictionaries(st.text(max_size=6), json_value, max_size=3)
        case "map":
            assert e.item is not None
            value = expr_strategy(e.item, depth + 1)
            return st.dictionaries(st.text(max_size=6), (st.none() | value) if e.item.nullable else value, max_size=3)
        case "list":
            assert e.item is not None
            return st.lists(expr_strategy(e.item, depth + 1), min_size=c.get("minItems", 0), max_size=2 if depth else 3)
        case "const" | "enum":
            return st.sampled_from(e.values)
        case "union":
            return st.one_of([expr_strategy(m, depth) for m in e.members])
        case "named":
            assert e.name is not None
            return named_strategy(e.name, depth + 1)
    raise AssertionError(e.kind)


@functools.cache
def named_strategy(name: str, depth: int = 0) -> st.SearchStrategy[Any]:
    t: NamedType = MODEL.types[name]
    if t.form == "enum":
        return st.sampled_from(t.values)
    if t.form == "alias":
        assert t.target is not None
        return expr_strategy(t.target, depth)
    if t.form == "union":
        return st.one_of([named_strategy(member, depth) for _, member in t.variants])
    return st.fixed_dictionaries(
        {f.json_name: field_strategy(f, depth) for f in t.fields if f.required},
        optional={f.json_name: field_strategy(f, depth) for f in t.fields if not f.required and depth < 3},
    )


def field_strategy(f: Field, depth: int) -> st.SearchStrategy[Any]:
    value = expr_strategy(f.type, depth)
    if f.type.kind == "any" and not f.required:
        # An optional field of any JSON value (RunResult.output): the converter omits None, so a JSON null there
        # reads back as absent, which is what it means.
        return value.filter(lambda v: v is not None)
    return (st.none() | value) if f.type.nullable else value


TYPES = sorted(t.name for t in MODEL.types.values() if t.form in ("object", "union"))


@pytest.mark.parametrize("type_name", TYPES)
def test_round_trip(type_name: str) -> None:
    cls = getattr(generated, type_name)
    conv = get_converter()
    validator = Draft202012Validator({"$ref": f"{_home[type_name]}#/$defs/{type_name}"}, registry=_registry)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(named_strategy(type_name))
    def check(data: dict[str, Any]) -> None:
        assert not list(validator.iter_errors(data)), "the strategy must only make schema-valid data"
        obj = conv.structure(data, cls)
        out = conv.unstructure(obj, cls)
        assert json.loads(json.dumps(out)) == data
        assert conv.structure(out, cls) == obj

    check()
