"""Plugin: the schema bundle -> schemas/<file>.json, each schema with its external `$ref`s resolved.

Clients in other languages validate against these files (`python -m codegen --export DIR`,
`segue schema export DIR`), so each must stand alone: referenced types are copied into its own `$defs`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from codegen.model import Model, SchemaFile
from codegen.spec import Spec


def generate(spec: Spec, package: str) -> dict[str, str]:
    return {
        f"schemas/{Path(f.path).name}": json.dumps(bundle_schema(spec.model, f), indent=2) + "\n"
        for f in spec.model.files
    }


def bundle_schema(model: Model, f: SchemaFile) -> dict[str, Any]:
    """The schema with every external `$ref` resolved: referenced types are copied into its own `$defs`.

    Only JSON Schema keywords stay at the root: a validator in strict mode (ajv's default) refuses others, so the
    method table of the `protocol` keyword is bundled as a document of its own (the protocol plugin), and codegen's
    `x-repr` and `x-python-base` annotations are left out."""
    by_id = {s.id: s for s in model.files}
    result = {k: copy.deepcopy(v) for k, v in f.raw.items() if k in _SCHEMA_ROOT_KEYWORDS}
    defs: dict[str, Any] = result.setdefault("$defs", {})
    pending = [result]
    while pending:
        node = pending.pop()
        for value in _walk(node):
            ref = value.get("$ref")
            if not isinstance(ref, str) or ref.startswith("#"):
                continue
            base, _, frag = ref.partition("#")
            name = frag.removeprefix("/$defs/")
            value["$ref"] = f"#/$defs/{name}"
            if name not in defs:
                defs[name] = copy.deepcopy(by_id[base].raw["$defs"][name])
                # The copied type's own local refs point into its home file: make them absolute first.
                for inner in _walk(defs[name]):
                    inner_ref = inner.get("$ref")
                    if isinstance(inner_ref, str) and inner_ref.startswith("#"):
                        inner["$ref"] = base + inner_ref
                pending.append(defs[name])
    for node in _walk(result):  # codegen's own annotations (`x-repr`, `x-python-base`) are no JSON Schema keyword
        if isinstance(node.get("x-repr"), bool):
            del node["x-repr"]
        if isinstance(node.get("x-python-base"), str):
            del node["x-python-base"]
    return result


_SCHEMA_ROOT_KEYWORDS = frozenset({"$schema", "$id", "$comment", "title", "description", "$defs"})


def _walk(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            found.append(n)
            stack.extend(n.values())
        elif isinstance(n, list):
            stack.extend(n)
    return found
