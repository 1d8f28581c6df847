"""docs/architecture.md matches the folders: every folder of the package has its reason, every module the "Where
each rule lives" table names exists, and the ten rules issue 25 measured (4.1 files opened on average) each have
a row naming their module, so a reader finds each in at most two files from the table."""

from __future__ import annotations

import re

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


def test_every_module_the_rule_table_names_exists() -> None:
    named = {m for row in rows("Where each rule lives") for m in re.findall(r"`([\w/]+\.py)`", row[1])}
    assert len(named) > 30, "the table's modules were not read"
    missing = sorted(
        m for m in named if not (REPO / "sdk" / m if m.startswith("segue_twin/") else PACKAGE / m).is_file()
    )
    assert missing == []


def test_each_of_the_ten_rules_has_a_row_naming_at_most_two_files_first() -> None:
    table = {row[0].replace("**", ""): row[1] for row in rows("Where each rule lives")}
    for rule in TEN_RULES:
        (cell,) = [cell for name, cell in table.items() if name.startswith(rule)]
        # The owning module first; at most one more file before the cell's first parenthesis or comma ends it.
        head = re.split(r"[;,]", cell)[0]
        files = re.findall(r"`([\w/]+\.py)`", head)
        assert 1 <= len(files) <= 2, (rule, cell)


def test_the_vendor_checklist_names_one_place_of_each_kind() -> None:
    checklist = section("Adding a vendor")
    for place in ("schemas/wire/acme.json", "wire/acme.py", "providers/acme.py", "providers/registry.py"):
        assert place in checklist
    assert "catalogs/vendors.json" in checklist and "catalogs/model_vendors.json" in checklist
