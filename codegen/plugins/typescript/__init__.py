"""Plugin: TypeScript declarations -> typescript/<schema>.d.ts per schema file and typescript/index.d.ts."""

from __future__ import annotations

from codegen import pytypes
from codegen.emit import header, render, schema_imports
from codegen.naming import ts_property
from codegen.spec import Spec


def generate(spec: Spec, package: str) -> dict[str, str]:
    model = spec.model
    out = {
        f"typescript/{f.module}.d.ts": render(
            "types.d.ts.jinja",
            header=header([f], "//"),
            file=f,
            types=f.types,
            imports=schema_imports(model, f),
            ts_type=pytypes.ts_type,
            ts_property=ts_property,
        )
        for f in model.files
    }
    out["typescript/index.d.ts"] = render("index.d.ts.jinja", header=header(model.files, "//"), files=model.files)
    return out
