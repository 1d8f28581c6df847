"""The runtime's modules import down their tiers only, never in a circle (at module level, inside functions or
under TYPE_CHECKING), no hand-written module is over 500 lines, and the twin stays an independent oracle beside
the runtime.

The tiers are the picture in docs/architecture.md ("Layers"). Generated modules take part as two nodes,
`segue.generated` (types and converter) and `segue.generated.wire` (the vendor serializers), so a hand-written
module cannot reach up into them or make a circle through them. The same holds one level up, for folders: a
folder (`segue.run`, `segue.wire`, ...) stands for every module in it, and the folders too import each other
without a circle; generated code imports only the support folder (`segue._support`).

The twin (`segue_twin`, a sibling package of the same distribution) is checked here too: it may import only the
catalog, the token counter and canonical JSON from segue, and no runtime module imports it (issue 25, item 3).
"""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from tests._support.layers import (
    PACKAGE,
    SDK,
    TWIN_FORBIDDEN,
    TWIN_MAY_IMPORT,
    graph,
    hand_written,
    imports,
)

MAX_LINES = 500

#: Tiers, lowest first. A module may import modules of its own tier or a lower one; within a tier the circle test
#: keeps the imports a tree. A module name ending in `.*` stands for every module of that package.
TIERS: list[tuple[str, list[str]]] = [
    ("foundations", ["segue._support", "segue._support.*", "segue.errors"]),
    ("generated types", ["segue.generated"]),
    ("contracts", ["segue._core", "segue._core.hashing", "segue._core.contracts"]),
    (
        "basics",
        [
            "segue._core.tokens",
            "segue._core.identity",
            "segue._core.image_tokens",
            "segue._core.usage",
            "segue._core.run_text",
            "segue._core.json_types",
            "segue._core.json_schema",
            "segue._core.schema_work",
            "segue._core.json_constraints",
            "segue.tool_context",
            "segue.skills",
            "segue.guardrails",
            "segue.tools",
            "segue.telemetry",
            "segue._core.telemetry_content",
            "segue.mcp",
            "segue.mcp.*",
        ],
    ),
    (
        "storage, catalog, wire",
        [
            "segue.store",
            "segue.store.*",
            "segue.catalog",
            "segue.catalog.*",
            "segue.wire",
            "segue.wire.*",
            "segue.generated.wire",
        ],
    ),
    (
        "replay, cache, drivers",
        [
            "segue.replay",
            "segue.replay.*",
            "segue.cache",
            "segue.cache.*",
            "segue.providers",
            "segue.providers.*",
            "segue.testing",
        ],
    ),
    ("run pipeline", ["segue.run", "segue.run.*"]),
    ("agent", ["segue.agent"]),
    # Durable execution engines on top of the agent (segue[dbos]); nothing of the runtime imports them.
    ("engines", ["segue.durable", "segue.durable.*"]),
    # Beside the runtime rather than on it: the twin imports only TWIN_MAY_IMPORT, and nothing below the public
    # faces imports it (test_the_runtime_imports_nothing_of_the_twin); the apps and the demo use it.
    ("the twin (beside the runtime)", ["segue_twin", "segue_twin.*"]),
    (
        "public faces",
        [
            "segue",
            "segue.__main__",
            "segue.twin",
            "segue.twin.*",
            "segue.apps",
            "segue.apps.*",
            "segue.demo",
            "segue.demo.*",
        ],
    ),
]
#: Where a runtime module may sit: below the apps, the demo and the alias.
APPS = ("segue.apps", "segue.demo", "segue.twin")


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


def folder(module: str) -> str:
    """The folder a module lives in: `segue.run.loop` -> `segue.run`; a module of segue's top level is its own."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "segue" else parts[0]


def folder_graph() -> dict[str, set[str]]:
    deps: dict[str, set[str]] = {}
    for m, ds in graph().items():
        deps.setdefault(folder(m), set()).update(folder(d) for d in ds)
    return {f: d - {f} for f, d in deps.items()}


def test_there_is_no_folder_circle() -> None:
    """Folders import each other down the tiers too: no two folders import each other, however indirectly."""
    folders = folder_graph()
    assert {"segue.run", "segue.wire", "segue._support", "segue.generated", "segue_twin"} <= set(folders)
    try:
        tuple(TopologicalSorter(folders).static_order())
    except CycleError as e:
        raise AssertionError("folder circle: " + " -> ".join(reversed(e.args[1]))) from None


def test_generated_code_imports_only_the_support_folder() -> None:
    """Generated modules call hand-written code only in segue._support (the converter hooks, the wire readers), so
    nothing generated depends on a folder that depends on generated types."""
    files = [p for p in (PACKAGE / "generated").rglob("*.py")]
    outside = {
        f"{p.relative_to(SDK)}: {d}" for p in files for d in imports(p, set()) if not d.startswith("segue.generated")
    }
    assert len(outside) > 5, "the generated modules' imports were not read"
    assert sorted(x for x in outside if not x.split(": ")[1].startswith("segue._support")) == []


def test_the_twin_imports_only_the_catalog_and_the_token_counter() -> None:
    twin = {m: d for m, d in graph().items() if m == "segue_twin" or m.startswith("segue_twin.")}
    assert len(twin) > 10, "the twin's modules were not found"
    found = sorted(
        f"{m} imports {d}"
        for m, deps in twin.items()
        for d in deps
        if (d.startswith("segue.") and not d.startswith(TWIN_MAY_IMPORT)) or d.startswith(TWIN_FORBIDDEN)
    )
    assert found == []


def test_the_runtime_imports_nothing_of_the_twin() -> None:
    """Only the apps, the demo and the `segue.twin` alias import segue_twin; a runtime module never does."""
    importers = {
        m
        for m, deps in graph().items()
        if m.startswith("segue")
        and not m.startswith(("segue_twin", *APPS))
        and any(d.startswith("segue_twin") for d in deps)
    }
    assert importers == set(), "a driver without a key refuses; nothing of the runtime talks to the twin"


def test_segue_twin_re_exports_the_twin_without_aliasing_modules() -> None:
    """`segue.twin` (the import path the docs teach) re-exports segue_twin: the same objects by either name, each
    submodule the docs import a real module file, and nothing written into sys.modules under a second name."""
    import sys

    import segue.twin
    import segue_twin
    import segue_twin.server
    from segue.demo import sample_tools, shop_db
    from segue.twin import Twin, sample_db
    from segue.twin.server import serve
    from segue.twin.testing import FakeClock

    assert Twin is segue_twin.Twin and serve is segue_twin.server.serve
    assert sample_db.describe_table is shop_db.describe_table and FakeClock is sample_tools.FakeClock
    assert set(segue_twin.__all__) <= set(segue.twin.__all__)
    files = {f"segue.twin.{p.stem}" for p in (SDK / "segue" / "twin").glob("*.py") if p.stem != "__init__"}
    loaded = {name for name in sys.modules if name.startswith("segue.twin.")}
    assert loaded <= files, f"modules under segue.twin with no file of their own: {sorted(loaded - files)}"
    for name in files:
        module = sys.modules[name]
        assert module.__file__ is not None and module.__file__.startswith(str(SDK / "segue" / "twin")), name


def test_the_checks_see_imports_inside_functions_and_type_checking(tmp_path: Path) -> None:
    """The graph is only as good as its reader: a function-level and a TYPE_CHECKING import both count."""
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from segue.agent import Agent\n"
        "def f():\n    from segue.store import run_store\n    import segue.cache.layout\n",
        encoding="utf-8",
    )
    assert imports(source, {"segue.store.run_store"}) == {"segue.agent", "segue.store.run_store", "segue.cache.layout"}


def test_no_hand_written_module_is_over_500_lines() -> None:
    """A module past ~500 lines owns two things: split it by what each part owns."""
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in hand_written().items()}
    assert {m: n for m, n in sizes.items() if n > MAX_LINES} == {}
    assert max(sizes.values()) > MAX_LINES // 2, "the sizes were not read"


def test_the_top_level_is_the_authoring_surface() -> None:
    """segue/ itself holds only what a user imports (issue 25: at most ~12 modules); everything else has a folder
    that says its tier (docs/architecture.md, "Why each folder exists")."""
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert "agent" in top and len(top) <= 12, top
