"""codegen's modules import down their layers only: no import circle (at module level or inside functions),
plugins never import each other, only the driver knows the plugins (as modules with `generate`), and no module is
over 500 lines."""

from __future__ import annotations

import ast
from pathlib import Path

from tests._support.environment import REPO

CODEGEN = REPO / "codegen"
#: Each hand-written module's layer, lowest first; a module may import only modules of a lower layer.
#: This is the picture in docs/codegen.md ("Module layout").
LAYERS: dict[str, int] = {
    "codegen": 0,
    "codegen.errors": 0,
    "codegen.naming": 0,
    "codegen.schema_cycles": 0,
    "codegen.model": 1,
    "codegen.spec.wire": 0,
    "codegen.spec.wire.sdk": 1,
    "codegen.spec.wire.rules": 2,
    "codegen.spec.protocol": 2,
    "codegen.pytypes": 2,
    "codegen.emit": 2,
    "codegen.spec.wire.check": 3,
    "codegen.plugins.wire.emit": 3,
    "codegen.spec.wire.mapping": 4,
    "codegen.spec": 5,
    "codegen.plugins": 6,
    "codegen.plugins.python_types": 6,
    "codegen.plugins.converter": 6,
    "codegen.plugins.typescript": 6,
    "codegen.plugins.bundle": 6,
    "codegen.plugins.wire": 6,
    "codegen.plugins.protocol": 6,
    "codegen.plugins.reference": 6,
    "codegen.driver": 7,
    "codegen.docs": 7,
    "codegen.golden": 8,
    "codegen.__main__": 9,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def codegen_imports(path: Path) -> set[str]:
    """Every codegen module `path` imports, wherever the import statement is (functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # `from codegen.plugins import wire` imports the module codegen.plugins.wire.
            found.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in LAYERS)
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: use absolute imports (codegen.x), not relative ones")
    return {m for m in found if m == "codegen" or m.startswith("codegen.")}


def graph() -> dict[str, set[str]]:
    return {module_name(p): codegen_imports(p) for p in sorted(CODEGEN.rglob("*.py"))}


def test_every_module_has_a_layer() -> None:
    assert set(graph()) == set(LAYERS), "add the new module to LAYERS here and to docs/codegen.md"


def test_imports_point_down_the_layers() -> None:
    upward = [
        f"{m} (layer {LAYERS[m]}) imports {d} (layer {LAYERS[d]})"
        for m, deps in graph().items()
        for d in sorted(deps - {m})
        if LAYERS[d] >= LAYERS[m] and not (d == "codegen.plugins" and m.startswith("codegen.plugins."))
    ]
    assert upward == []


def test_there_is_no_import_circle() -> None:
    deps = graph()
    done: set[str] = set()

    def visit(m: str, chain: tuple[str, ...]) -> None:
        assert m not in chain, "import circle: " + " -> ".join([*chain, m])
        if m in done:
            return
        for d in sorted(deps.get(m, set()) - {"codegen", "codegen.plugins"}):
            visit(d, (*chain, m))
        done.add(m)

    for m in sorted(deps):
        visit(m, ())


def test_only_the_driver_knows_the_plugins() -> None:
    plugins = {m for m in LAYERS if m.startswith("codegen.plugins.")}
    importers = {m for m, deps in graph().items() if deps & plugins and not m.startswith("codegen.plugins.")}
    assert importers == {"codegen.driver"}
    tree = ast.parse((CODEGEN / "driver.py").read_text(encoding="utf-8"))
    names = [
        (node.module, a.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("codegen.plugins")
        for a in node.names
    ]
    # Whole plugin modules, never a name from inside one.
    assert names and all(mod == "codegen.plugins" and f"{mod}.{name}" in plugins for mod, name in names)


def test_a_plugins_input_lives_in_the_spec_folder_named_for_it() -> None:
    """A plugin's two halves sit in the folders of their tiers: what reads and checks its input in
    codegen/spec/<plugin>(.py or /) below the spec, what renders it in codegen/plugins/<plugin>/; codegen's top level
    keeps what every tier shares, nothing named for one plugin."""
    plugins = {p.name for p in (CODEGEN / "plugins").iterdir() if (p / "__init__.py").is_file()}
    inputs = {
        module_name(p).split(".")[2] for p in (CODEGEN / "spec").rglob("*.py") if p != CODEGEN / "spec" / "__init__.py"
    }
    assert inputs == {"wire", "protocol"} and inputs <= plugins
    top = {p.stem for p in CODEGEN.glob("*.py")}
    assert {t for t in top for plugin in plugins if t.startswith(f"{plugin}_")} == set()
    assert all(LAYERS[module_name(p)] < LAYERS["codegen.plugins"] for p in (CODEGEN / "spec").rglob("*.py"))


def test_no_codegen_module_is_over_500_lines() -> None:
    """The runtime's limit (tests/project/test_sdk_layers.py) holds for codegen too: past ~500 lines a module owns
    two things."""
    sizes = {module_name(p): len(p.read_text(encoding="utf-8").splitlines()) for p in CODEGEN.rglob("*.py")}
    assert {m: n for m, n in sizes.items() if n > 500} == {}
    assert max(sizes.values()) > 250, "the sizes were not read"
