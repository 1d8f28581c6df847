"""python -m codegen: fresh output, --check on a schema edit, and clear failures on bad schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codegen.model import load_model
from codegen.naming import py_field_name, ts_property
from tests._support.codegen_runner import codegen

REPO = Path(__file__).resolve().parents[2]
GENERATED = Path("sdk/segue/generated")


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_write_golden_writes_each_case_as_its_package(tmp_path: Path) -> None:
    """`--write-golden DIR`, what .ci/run type-checks with mypy --strict (the golden diff test, below in
    test_codegen_golden.py, proves the same text is committed as each case's expected/)."""
    from codegen import golden

    done = codegen("--write-golden", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [golden.package(c) for c in golden.cases()]
    assert (tmp_path / "golden_types" / "shapes.py").read_text().startswith("#")


def test_adding_a_field_shows_in_python_and_typescript(workspace: Path) -> None:
    schema_path = workspace / "schemas" / "message.schema.json"
    schema = json.loads(schema_path.read_text())
    schema["$defs"]["TextBlock"]["properties"]["language"] = {"type": "string", "description": "BCP 47 tag."}
    schema_path.write_text(json.dumps(schema, indent=2))
    args = ("--schemas", str(workspace / "schemas"), "--out", str(workspace))

    stale = codegen("--check", *args)
    assert stale.returncode == 1
    assert f"stale: {GENERATED}/message.py" in stale.stderr
    assert f"stale: {GENERATED}/typescript/message.d.ts" in stale.stderr

    assert codegen(*args).returncode == 0
    py = (workspace / GENERATED / "message.py").read_text()
    checked = "validator=_c.field(_c.string(), optional=True)"
    assert f"    language: str | None = attrs.field(default=None, {checked})\n" in py
    ts = (workspace / GENERATED / "typescript" / "message.d.ts").read_text()
    assert "  language?: string;\n" in ts
    assert codegen("--check", *args).returncode == 0


def test_a_map_type_shows_in_python_and_typescript(workspace: Path) -> None:
    """`additionalProperties` holding a schema makes a map: dict[str, T] in Python, an index signature in TS."""
    schema_path = workspace / "schemas" / "message.schema.json"
    schema = json.loads(schema_path.read_text())
    schema["$defs"]["TextBlock"]["properties"]["scores"] = {
        "type": "object",
        "additionalProperties": {"type": ["number", "null"], "minimum": 0},
    }
    schema_path.write_text(json.dumps(schema, indent=2))
    args = ("--schemas", str(workspace / "schemas"), "--out", str(workspace))
    assert codegen(*args).returncode == 0
    py = (workspace / GENERATED / "message.py").read_text()
    assert "    scores: dict[str, float | None] | None = attrs.field(\n" in py
    assert "_c.map_of(_c.any_of(_c.number(minimum=0), _c.one_of((None,))))" in py
    ts = (workspace / GENERATED / "typescript" / "message.d.ts").read_text()
    assert "  scores?: { [key: string]: number | null };\n" in ts


def test_a_hand_written_base_gives_a_generated_class_derived_attributes(workspace: Path) -> None:
    """`x-python-base` on an object type: its class derives from the hand-written class (read-only attributes
    from the fields, no fields of its own); the exported bundle and TypeScript know nothing of it."""
    schema_path = workspace / "schemas" / "runs.schema.json"
    schema = json.loads(schema_path.read_text())
    assert schema["$defs"]["RunCost"]["x-python-base"] == "segue._support.derived:CostSources"
    schema["$defs"]["PriceSource"]["x-python-base"] = "segue._support.derived:CostSources"
    schema_path.write_text(json.dumps(schema, indent=2))
    args = ("--schemas", str(workspace / "schemas"), "--out", str(workspace))
    assert codegen(*args).returncode == 0
    py = (workspace / GENERATED / "runs.py").read_text()
    assert "\nfrom segue._support.derived import CostSources\n" in py
    assert "\nclass RunCost(CostSources):\n" in py and "\nclass PriceSource(CostSources):\n" in py
    assert py.count("import CostSources") == 1
    ts = (workspace / GENERATED / "typescript" / "runs.d.ts").read_text()
    assert "CostSources" not in ts and "x-python-base" not in ts
    bundled = (workspace / GENERATED / "schemas" / "runs.schema.json").read_text()
    assert "x-python-base" not in bundled


BAD_SCHEMAS: dict[str, tuple[dict[str, Any], str, str]] = {
    "untagged_union": (
        {
            "$defs": {
                "A": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": False},
                "B": {"type": "object", "properties": {"y": {"type": "string"}}, "additionalProperties": False},
                "AB": {"oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}]},
            }
        },
        "#/$defs/AB",
        "untagged object union",
    ),
    "dangling_ref": (
        {
            "$defs": {
                "A": {
                    "type": "object",
                    "properties": {"u": {"$ref": "urn:segue:schema:message:1#/$defs/Nope"}},
                    "additionalProperties": False,
                }
            }
        },
        "#/$defs/A/properties/u",
        "dangling $ref",
    ),
    "misspelled_keyword": (
        {
            "$defs": {
                "A": {
                    "type": "object",
                    "properties": {"x": {"type": "string", "minLenght": 1}},
                    "additionalProperties": False,
                }
            }
        },
        "#/$defs/A/properties/x",
        "'minLenght'",
    ),
    "python_base_not_a_class": (
        {
            "$defs": {
                "A": {
                    "type": "object",
                    "x-python-base": "segue._support.derived.CostSources",
                    "properties": {"x": {"type": "string"}},
                    "additionalProperties": False,
                }
            }
        },
        "#/$defs/A/x-python-base",
        "x-python-base must name a class as 'package.module:Name', got 'segue._support.derived.CostSources'",
    ),
    "invalid_type_value": (
        {"$defs": {"A": {"type": "strin"}}},
        "#/$defs/A/type",
        "metaschema",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SCHEMAS))
def test_bad_schema_fails_with_file_pointer_and_reason(workspace: Path, case: str) -> None:
    body, pointer, reason = BAD_SCHEMAS[case]
    bad = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:segue:schema:bad:1", **body}
    (workspace / "schemas" / "bad.schema.json").write_text(json.dumps(bad))
    before = snapshot(workspace / GENERATED)

    result = codegen("--schemas", str(workspace / "schemas"), "--out", str(workspace))

    assert result.returncode == 2
    assert f"schemas/bad.schema.json{pointer}" in result.stderr
    assert reason in result.stderr
    assert snapshot(workspace / GENERATED) == before, "nothing may be written when a schema is bad"


def test_export_bundle_resolves_refs(tmp_path: Path) -> None:
    assert codegen("--export", str(tmp_path / "bundle")).returncode == 0
    runs = json.loads((tmp_path / "bundle" / "schemas" / "runs.schema.json").read_text())
    refs = [v for v in json.dumps(runs).split('"$ref": ')[1:]]
    assert refs and all(r.startswith('"#/$defs/') for r in refs)
    assert {"Usage", "ReplaySummary", "Message", "ContentBlock", "TextBlock"} <= set(runs["$defs"])
    assert (tmp_path / "bundle" / "typescript" / "index.d.ts").exists()
    assert list((tmp_path / "bundle" / "fixtures" / "Message" / "valid").glob("*.json"))


def test_model_types_are_unique_and_tagged() -> None:
    model = load_model(REPO / "schemas")
    unions = [t for t in model.types.values() if t.form == "union"]
    assert {t.name for t in unions} == {"ContentBlock", "ImageSource"}
    for u in unions:
        assert all(tag for tag, _ in u.variants)


@pytest.mark.parametrize(
    ("json_name", "py"), [("$schema", "schema"), ("class", "class_"), ("cacheRead", "cache_read"), ("extra", "extra_")]
)
def test_field_names(json_name: str, py: str) -> None:
    assert py_field_name(json_name) == py


def test_ts_property_quotes_non_identifiers() -> None:
    assert ts_property("$schema") == "$schema"
    assert ts_property("a-b") == '"a-b"'
