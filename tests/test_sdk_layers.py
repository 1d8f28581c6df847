"""The runtime's modules import down their tiers only, never in a circle (at module level, inside functions or
under TYPE_CHECKING), no hand-written module is over 500 lines, and the twin stays an independent oracle.

The tiers are the picture in docs/architecture.md ("Layers"). Generated modules take part as two nodes,
`segue.generated` (types and converter) and `segue.generated.wire` (the vendor serializers), so a hand-written
module cannot reach up into them or make a circle through them.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from conftest import REPO

SDK = REPO / "sdk"
PACKAGE = SDK / "segue"
MAX_LINES = 500

#: Tiers, lowest first. A module may import modules of its own tier or a lower one; within a tier the circle test
#: keeps the imports a tree. A module name ending in `.*` stands for every module of that package.
TIERS: list[tuple[str, list[str]]] = [
    ("foundations", ["segue._hooks", "segue._resources", "segue.errors"]),
    ("generated types", ["segue.generated"]),
    ("contracts", ["segue.hashing", "segue.contracts"]),
    (
        "basics",
        [
            "segue.tokens",
            "segue.context",
            "segue.usage",
            "segue.run_text",
            "segue.skills",
            "segue.guardrails",
            "segue.tools",
            "segue.telemetry",
            "segue.telemetry_content",
            "segue.mcp",
            "segue.mcp.*",
            "segue.json_types",
            "segue.json_schema",
            "segue.json_constraints",
            "segue.tool_context",
        ],
    ),
    (
        "storage, catalog, wire",
        [
            "segue.store",
            "segue.store.*",
            "segue.catalog",
            "segue.catalog.*",
            "segue.wire.*",
            "segue.generated.wire",
            "segue.history",
            "segue.conversation",
        ],
    ),
    (
        "replay, layout, drivers, twin",
        [
            "segue.prefix_rule",
            "segue.replay",
            "segue.layout",
            "segue.notes",
            "segue.cache_notes",
            "segue.explain",
            "segue.providers",
            "segue.providers.*",
            "segue.testing",
            "segue.twin",
            "segue.twin.*",
        ],
    ),
    ("run pipeline", ["segue.run", "segue.run.*"]),
    ("agent", ["segue.agent"]),
    (
        "public faces",
        [
            "segue",
            "segue.protocol",
            "segue.protocol.*",
            "segue.dashboard",
            "segue.dashboard.*",
            "segue.cli",
            "segue.cli_render",
            "segue.cli_tools",
            "segue.demo",
            "segue.bundle",
        ],
    ),
]
#: What the twin must never import: it emulates the vendors, so sharing the drivers' wire code would let a driver
#: bug pass as vendor behaviour (issue 15, item 7).
TWIN_FORBIDDEN = ("segue.wire", "segue.providers", "segue.generated.wire", "segue.contracts")


def module_name(path: Path) -> str:
    parts = path.relative_to(SDK).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def hand_written() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "generated" not in p.parts}


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
    return {m for m in found if m == "segue" or m.startswith("segue.")}


def graph() -> dict[str, set[str]]:
    """node -> the nodes it imports (generated modules included, as their nodes)."""
    files = {**hand_written(), **{m: PACKAGE.parent / (m.replace(".", "/") + ".py") for m in generated_modules()}}
    for m in list(files):
        if not files[m].exists():  # a package: its __init__.py
            files[m] = PACKAGE.parent / m.replace(".", "/") / "__init__.py"
    known = set(files)
    deps: dict[str, set[str]] = {}
    for m, path in files.items():
        deps.setdefault(node(m), set()).update(node(d) for d in imports(path, known))
    return {m: d - {m} for m, d in deps.items()}


def tier_of(module: str) -> int:
    for i, (_, patterns) in enumerate(TIERS):
        for p in patterns:
            if module == p or (p.endswith(".*") and module.startswith(p[:-1])):
                return i
    raise AssertionError(f"{module} has no tier: add it to TIERS here and to docs/architecture.md")


def test_every_module_has_a_tier() -> None:
    for m in graph():
        tier_of(m)


def test_imports_point_down_the_tiers() -> None:
    upward = [
        f"{m} ({TIERS[tier_of(m)][0]}) imports {d} ({TIERS[tier_of(d)][0]})"
        for m, deps in sorted(graph().items())
        for d in sorted(deps)
        if tier_of(d) > tier_of(m)
    ]
    assert upward == []


def test_there_is_no_import_circle() -> None:
    try:
        tuple(TopologicalSorter(graph()).static_order())
    except CycleError as e:
        raise AssertionError("import circle: " + " -> ".join(reversed(e.args[1]))) from None


def test_the_twin_imports_nothing_of_the_drivers_wire() -> None:
    twin = {m: d for m, d in graph().items() if m == "segue.twin" or m.startswith("segue.twin.")}
    assert twin, "the twin's modules were not found"
    found = sorted(f"{m} imports {d}" for m, deps in twin.items() for d in deps if d.startswith(TWIN_FORBIDDEN))
    assert found == []


def test_the_checks_see_imports_inside_functions_and_type_checking(tmp_path: Path) -> None:
    """The graph is only as good as its reader: a function-level and a TYPE_CHECKING import both count."""
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from segue.agent import Agent\n"
        "def f():\n    from segue.store import run_store\n    import segue.replay\n",
        encoding="utf-8",
    )
    assert imports(source, {"segue.store.run_store"}) == {"segue.agent", "segue.store.run_store", "segue.replay"}


def test_no_hand_written_module_is_over_500_lines() -> None:
    """A module past ~500 lines owns two things: split it by what each part owns."""
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in hand_written().items()}
    assert {m: n for m, n in sizes.items() if n > MAX_LINES} == {}
    assert max(sizes.values()) > MAX_LINES // 2, "the sizes were not read"
