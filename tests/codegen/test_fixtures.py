"""Every fixture validates (or not) against its schema, structures (or not) with the converter, and round-trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

import segue.generated as generated
from segue.generated import get_converter

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
_raw = [json.loads(p.read_text()) for p in sorted(SCHEMAS.glob("*.schema.json"))]
_registry: Registry[Any] = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in _raw)
_home = {name: s["$id"] for s in _raw for name in s.get("$defs", {})}


def _cases() -> list[Any]:
    cases = []
    for type_dir in sorted((SCHEMAS / "fixtures").iterdir()):
        for kind in ("valid", "invalid"):
            for f in sorted((type_dir / kind).glob("*.json")):
                cases.append(pytest.param(type_dir.name, kind, f, id=f"{type_dir.name}/{kind}/{f.stem}"))
    return cases


def _validator(type_name: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"{_home[type_name]}#/$defs/{type_name}"}, registry=_registry)


@pytest.mark.parametrize(("type_name", "kind", "path"), _cases())
def test_fixture(type_name: str, kind: str, path: Path) -> None:
    data = json.loads(path.read_text())
    cls = getattr(generated, type_name)
    errors = list(_validator(type_name).iter_errors(data))
    conv = get_converter()
    if kind == "valid":
        assert errors == [], [e.message for e in errors]
        obj = conv.structure(data, cls)
        assert conv.unstructure(obj, cls) == data
    else:
        assert errors, f"{path} should be invalid against the schema"
        with pytest.raises(Exception):  # noqa: B017 - cattrs raises TypeError/ValueError/ClassValidationError
            conv.structure(data, cls)


def test_every_object_type_has_fixtures() -> None:
    """Each object type and object union has valid and invalid examples."""
    from codegen.model import load_model

    model = load_model(SCHEMAS)
    wanted = {t.name for t in model.types.values() if t.form in ("object", "union")}
    have = {d.name for d in (SCHEMAS / "fixtures").iterdir() if d.is_dir()}
    assert wanted - have == set()
    for name in wanted:
        for kind in ("valid", "invalid"):
            assert list((SCHEMAS / "fixtures" / name / kind).glob("*.json")), f"{name}/{kind} has no fixture"
