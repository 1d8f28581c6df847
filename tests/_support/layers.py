"""The import graph of the runtime and the twin, read from their source with `ast` (imports inside functions and
under TYPE_CHECKING included), and the twin's import rule; tests/project/test_sdk_layers.py and
test_twin_independent.py check it."""

from __future__ import annotations

import ast
from pathlib import Path

from tests._support.environment import REPO

SDK = REPO / "sdk"
PACKAGE = SDK / "segue"
TWIN = SDK / "segue_twin"

#: What the twin may import of segue: the catalog (prices, cache minimums and TTLs), the token counter (with the
#: image-token formulas) and the canonical JSON it counts and signs. Nothing of the drivers' wire code: sharing it
#: would let a driver bug pass as vendor behaviour (issue 15, item 7).
TWIN_MAY_IMPORT = ("segue.catalog", "segue._core.tokens", "segue._core.image_tokens", "segue._core.hashing")
TWIN_FORBIDDEN = ("segue.wire", "segue.providers", "segue.generated.wire", "segue._core.contracts")


def module_name(path: Path) -> str:
    parts = path.relative_to(SDK).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def hand_written() -> dict[str, Path]:
    files = [*PACKAGE.rglob("*.py"), *TWIN.rglob("*.py")]
    return {module_name(p): p for p in sorted(files) if "generated" not in p.parts}


def generated_modules() -> set[str]:
    return {module_name(p) for p in (PACKAGE / "generated").rglob("*.py")}


def node(module: str) -> str:
    """The graph node a module belongs to: generated modules collapse into their two nodes."""
    if module.startswith("segue.generated.wire"):
        return "segue.generated.wire"
    if module.startswith("segue.generated"):
        return "segue.generated"
    return module


def imports(path: Path, known: set[str]) -> set[str]:
    """Every segue module `path` imports, wherever the statement is (functions and TYPE_CHECKING blocks included).
    `from package import name` imports the module package.name when there is one, else the package itself."""
    found: set[str] = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, ast.Import):
            found.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.level:
            raise AssertionError(f"{path}: use absolute imports (segue.x), not relative ones")
        elif isinstance(n, ast.ImportFrom) and n.module:
            for a in n.names:
                sub = f"{n.module}.{a.name}"
                found.add(sub if sub in known else n.module)
    return {m for m in found if m in ("segue", "segue_twin") or m.startswith(("segue.", "segue_twin."))}


def graph() -> dict[str, set[str]]:
    """node -> the nodes it imports (generated modules included, as their nodes)."""
    files = {**hand_written(), **{m: SDK / (m.replace(".", "/") + ".py") for m in generated_modules()}}
    for m in list(files):
        if not files[m].exists():  # a package: its __init__.py
            files[m] = SDK / m.replace(".", "/") / "__init__.py"
    known = set(files)
    deps: dict[str, set[str]] = {}
    for m, path in files.items():
        deps.setdefault(node(m), set()).update(node(d) for d in imports(path, known))
    return {m: d - {m} for m, d in deps.items()}
