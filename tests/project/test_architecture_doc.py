"""docs/architecture.md matches the folders: every folder of the package has its reason, the run pipeline's modules
are the ones the layer picture lists, every module the "Where each rule lives" table names exists, and the rules
issues 25 and 42 measured (4.1 and 2.6 files opened on average), with those this round added, each have a row
naming their module, so a reader finds each in at most two files from the table; the functions a row names beside
its modules are defined there; every hand-written module over 450 lines says why it is one module."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests._support.environment import REPO

DOC = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
PACKAGE = REPO / "sdk" / "segue"
#: The rules of issue 25's findability review, as their rows begin.
TEN_RULES = [
    "Reasoning keep or drop",
    "Cache breakpoint placement",
    "Catalog cascade order",
    "Auto layout",
    "Turn-1 restore",
    "Idempotency fingerprint",
    "`prompt_cache_key`",
    "Twin lookback",
    "A hanging MCP tool",
    "Run pricing",
]
#: The rules of issue 42's review (2.6 files per rule), and those it found decided twice or outside their room.
ISSUE_42_RULES = [
    "Cost of a call",
    "Tool-result encoding",
    "Run row written and finished",
    "Catalog value through the cascade",
    "Why a request could not use the cache",
    "SDK exceptions as ProviderErrors",
    "What a driver may declare beyond Provider",
    "Model settings a driver cannot send",
    "Replayed runs checked",
    "Argument checks",
]
#: The rules this round added (issues 36-41): the durable loop's steps and recovery, cache diagnostics, compaction,
#: agents calling agents.
ROUND_RULES = [
    "A run's steps",
    "Recovery of a run whose process died",
    "Cache diagnostics asked",
    "The vendor's verdict read",
    "Cache collapse",
    "Client-side compaction due or in use",
    "A compaction made by a run of its own",
    "Every iteration fits the context window",
    "Sub-runs",
    "A run's total cost",
]
RULES = TEN_RULES + ISSUE_42_RULES + ROUND_RULES


def section(title: str) -> str:
    start = DOC.index(f"## {title}")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end != -1 else len(DOC)]


def rows(title: str) -> list[list[str]]:
    table = [line for line in section(title).splitlines() if line.startswith("| ") and not line.startswith("|--")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in table[1:]]


def test_every_folder_of_the_package_says_why_it_exists() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert {"run", "wire", "_support", "apps", "demo"} <= folders
    explained = {re.sub(r"[`/]", "", row[0]) for row in rows("Layers")}
    assert folders - explained == set()
    picture = section("Layers").split("```")[1]
    assert [f for f in sorted(folders) if f"{f}/" not in picture] == []


def test_the_layer_picture_lists_the_run_pipelines_modules_and_no_other() -> None:
    picture = section("Layers").split("```")[1]
    listed = picture[picture.index("run/:") + len("run/:") : picture.index("tier 5")]
    named = set(re.findall(r"\b([a-z_]+)\b", re.sub(r"\([^)]*\)", "", listed))) - {"tier"}
    modules = {p.stem for p in (PACKAGE / "run").glob("*.py") if p.stem != "__init__"}
    assert named == modules


def test_every_module_the_rule_table_names_exists() -> None:
    named = {m for row in rows("Where each rule lives") for m in re.findall(r"`([\w/]+\.py)`", row[1])}
    assert len(named) > 30, "the table's modules were not read"
    missing = sorted(
        m for m in named if not (REPO / "sdk" / m if m.startswith("segue_twin/") else PACKAGE / m).is_file()
    )
    assert missing == []


def test_each_rule_held_here_has_a_row_naming_at_most_two_files_first() -> None:
    table = {row[0].replace("**", ""): row[1] for row in rows("Where each rule lives")}
    assert len(RULES) == len(set(RULES)) >= 30
    for rule in RULES:
        (cell,) = [cell for name, cell in table.items() if name.startswith(rule)]
        # The owning module first; at most one more file before the cell's first parenthesis or comma ends it.
        head = re.split(r"[;,]", cell)[0]
        files = re.findall(r"`([\w/]+\.py)`", head)
        assert 1 <= len(files) <= 2, (rule, cell)


def _module(path: str) -> Path:
    return REPO / "sdk" / path if path.startswith("segue_twin/") else PACKAGE / path


def _defines(module: Path, name: str) -> bool:
    """Whether `module` defines `name` (a function, class or constant) or `Class.member`."""
    scope: list[ast.stmt] = ast.parse(module.read_text(encoding="utf-8")).body
    for part in name.split("."):
        found = [
            node
            for node in scope
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == part)
            or (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == part for t in node.targets))
            or (isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == part)
        ]
        if not found:
            return False
        scope = getattr(found[0], "body", [])
    return True


def test_the_names_a_held_rule_gives_beside_its_modules_are_defined_there() -> None:
    """`module.py` (`name`, `Class.method`, ...): each name in a parenthesis that opens with one, right after a
    module, is one of that module's own definitions, so a row cannot point at a function that moved."""
    table = {row[0].replace("**", ""): row[1] for row in rows("Where each rule lives")}
    checked = 0
    for rule in RULES:
        (cell,) = [cell for name, cell in table.items() if name.startswith(rule)]
        for path, inside in re.findall(r"`([\w/]+\.py)` \((`[^()]*)\)", cell):
            for name in re.findall(r"`([A-Za-z_][\w.]*)`", inside):
                if name.endswith(".py") or not _module(path).is_file():
                    continue
                assert _defines(_module(path), name), f"{rule}: {path} defines no {name}"
                checked += 1
    assert checked >= 25, "the rows' names were not read"


def test_the_vendor_checklist_names_one_place_of_each_kind() -> None:
    checklist = section("Adding a vendor")
    for place in ("schemas/wire/acme.json", "wire/acme.py", "providers/acme.py", "providers/registry.py"):
        assert place in checklist
    assert "catalogs/vendors.json" in checklist and "catalogs/model_vendors.json" in checklist


def test_every_module_over_450_lines_says_why_it_is_one_module() -> None:
    sizes = {}
    for root in (REPO / "sdk", REPO / "codegen"):
        for path in root.rglob("*.py"):
            if "generated" not in path.relative_to(REPO).parts:
                sizes[path] = len(path.read_text(encoding="utf-8").splitlines())
    # Named as the page names paths: under sdk/segue/, else from segue_twin/ or codegen/.
    base = [PACKAGE, REPO / "sdk", REPO]
    over = {str(p.relative_to(next(b for b in base if p.is_relative_to(b)))) for p, n in sizes.items() if n > 450}
    reasons = {row[0].strip("`"): row[1] for row in rows("Modules over 450 lines")}
    assert len(sizes) > 200, "the modules were not read"
    assert over - set(reasons) == set(), "each needs a row saying why it is one module"
    assert set(reasons) - over == set(), "at 450 lines or under now: remove its row"
    assert all(len(reason) > 60 for reason in reasons.values())
