"""Plugin: the reference of the types an app handles at run time -> `runtime.md`, which `python -m codegen` also
writes into docs/api.md (codegen/docs.py): what `agent.run` returns, what `agent.stream` yields, and the types
those carry, each with its fields and descriptions as the schemas give them.
"""

from __future__ import annotations

from codegen.emit import header
from codegen.model import Model, NamedType, referenced_names
from codegen.pytypes import field_table, md_cell, ts_type
from codegen.spec import Spec

#: The types the runtime API hands an app, in the order a reader meets them; the section lists these and the
#: object and enum types they use, each once.
ROOTS = ("RunResult", "RunEvent", "RunSummary")


def generate(spec: Spec, package: str) -> dict[str, str]:
    """{} for a schema set without the run types (the codegen golden cases)."""
    model = spec.model
    if not all(name in model.types for name in ROOTS):
        return {}
    return {"runtime.md": reference(model)}


def reference(model: Model) -> str:
    names = _closure(model)
    sources = [f for f in model.files if any(model.owner[n] == f.module for n in names)]
    lines = [
        "<!--",
        header(sources, "").replace("\n ", "\n").strip(),
        "-->",
        "Each type as the schemas define it (the Python attrs classes in `segue.generated` have the same fields; "
        "types are written as in the TypeScript declarations, and a `?` marks an optional field, None in Python).",
    ]
    for name in names:
        t = model.types[name]
        lines += ["", f"### `{name}`", ""]
        if t.description:
            lines += [" ".join(t.description.split()), ""]
        lines.append(_body(t))
    return "\n".join(lines) + "\n"


def _body(t: NamedType) -> str:
    if t.form == "object":
        return field_table(t) if t.fields else "An object with no fields."
    if t.form == "enum":
        return "One of " + ", ".join(f"`{md_cell(str(v))}`" for v in t.values) + "."
    if t.form == "union":
        return "One of " + ", ".join(f"`{member}`" for _, member in t.variants) + "."
    assert t.target is not None
    return f"`{md_cell(ts_type(t.target))}`"


def _closure(model: Model) -> list[str]:
    """ROOTS, then every named type their fields use, breadth first, each once."""
    seen: list[str] = []
    pending = list(ROOTS)
    while pending:
        name = pending.pop(0)
        if name in seen:
            continue
        seen.append(name)
        pending += sorted(referenced_names(model.types[name]))
    return seen
