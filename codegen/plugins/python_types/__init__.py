"""Plugin: Python types -> one module of frozen attrs classes per schema file, and the package's __init__.py.

The package `__init__` re-exports every type and `get_converter` (from the converter plugin's `converter.py`:
the generated files depend on each other by module name, the plugins do not).
"""

from __future__ import annotations

from codegen import pytypes
from codegen.emit import header, render, schema_imports
from codegen.model import Model, SchemaFile
from codegen.spec import Spec


def generate(spec: Spec, package: str) -> dict[str, str]:
    model = spec.model
    out = {f"{f.module}.py": _render_module(model, f, package) for f in model.files}
    out["__init__.py"] = render(
        "init.py.jinja",
        header=header(model.files),
        package=package,
        files=model.files,
        all_names=sorted(model.types),
    )
    return out


def _render_module(model: Model, f: SchemaFile, package: str) -> str:
    types = f.types
    uses = pytypes.module_uses(types, model)
    typing_imports = sorted(
        ({"TypeAlias"} if any(t.form in ("enum", "alias", "union") for t in types) else set())
        | ({"Any"} if uses["any"] else set())
        | ({"Literal"} if uses["literal"] else set())
    )
    hook_imports = sorted(
        ({"UNSET", "Unset"} if uses["unset"] else set()) | ({"unset_or"} if uses["unset_or"] else set())
    )
    support: dict[str, set[str]] = {"segue._support.hooks": set(hook_imports)} if hook_imports else {}
    for t in types:
        if t.base is not None:  # the hand-written base classes (`x-python-base`)
            support.setdefault(t.base[0], set()).add(t.base[1])
    return render(
        "module.py.jinja",
        support_imports=[(mod, sorted(names)) for mod, names in sorted(support.items())],
        header=header([f]),
        package=package,
        file=f,
        types=types,
        uses=uses,
        typing_imports=typing_imports,
        imports=schema_imports(model, f),
        literal=pytypes.literal,
        py_type=pytypes.py_type,
        field_line=lambda fld: pytypes.field_line(fld, model),
    )
