"""Golden records: small, fixed schemas whose generated output is committed, so a template change is a readable diff.

Each case is a folder tests/codegen_golden/<case>/ holding `schemas/` (input laid out like the repository's
schemas/ folder, with `wire/` mapping files if any) and `expected/` (every file the plugins generate from it, as
the package `golden_<case>`). `python -m codegen --update-golden` rewrites each `expected/`;
tests/codegen/test_codegen_golden.py regenerates every case into a temporary folder, compares it file by file with
`expected/`, and type-checks the result (mypy --strict, tsc --strict).
"""

from __future__ import annotations

from pathlib import Path

from codegen.driver import REPO_ROOT, generate, write

GOLDEN = "tests/codegen_golden"
GOLDEN_DIR = REPO_ROOT / GOLDEN


def cases(root: Path = GOLDEN_DIR) -> list[str]:
    return sorted(p.parent.name for p in root.glob("*/schemas"))


def package(case: str) -> str:
    """The import name of a case's generated package (what its modules call each other)."""
    return f"golden_{case}"


def generate_case(case: str, root: Path = GOLDEN_DIR) -> dict[str, str]:
    """A case's generated files, keyed by path in its package, formatted as the committed `expected/` is."""
    return generate(root / case / "schemas", package=package(case), lives_in=f"{GOLDEN}/{case}/expected")


def update(root: Path = GOLDEN_DIR) -> list[str]:
    """Regenerate every case's `expected/`; the changed files, relative to `root`."""
    changed = []
    for case in cases(root):
        changed += [f"{case}/expected/{rel}" for rel in write(generate_case(case, root), root / case / "expected")]
    return changed
