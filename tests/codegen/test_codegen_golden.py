"""Golden records: codegen's plugins on small fixed schemas (tests/codegen_golden/<case>/schemas/), regenerated into
a temporary folder and compared file by file with the committed tests/codegen_golden/<case>/expected/, then
type-checked. A template or plugin change shows up here as a diff of the generated code; when it is intended, run
`python -m codegen --update-golden` and commit the new expected files with the change. mypy --strict over the
generated Python is a step of .ci/run (`python -m codegen --write-golden DIR`, then mypy), not a test here: it
spawned mypy in every test run, and CI ran it as a step of its own already.
"""

from __future__ import annotations

import difflib
import filecmp
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from codegen import golden
from codegen.driver import PLUGINS, write
from codegen.spec import load_spec
from tests._support.environment import NODE_INSTALL, require_tool


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every case regenerated into <tmp>/golden_<case>/, a package named as its generated imports expect."""
    root = tmp_path_factory.mktemp("golden")
    for case in golden.cases():
        write(golden.generate_case(case), root / golden.package(case))
    return root


def differences(actual: Path, expected: Path) -> list[str]:
    """File-by-file comparison of two trees: missing and extra files, and a unified diff for each changed file."""
    problems: list[str] = []
    pending = [filecmp.dircmp(expected, actual, ignore=["__pycache__"])]
    while pending:
        cmp = pending.pop()
        where = Path(cmp.left).relative_to(expected)
        problems += [f"missing (the generator no longer writes it): {where / n}" for n in sorted(cmp.left_only)]
        problems += [f"new (not in the golden record): {where / n}" for n in sorted(cmp.right_only)]
        _, mismatch, errors = filecmp.cmpfiles(cmp.left, cmp.right, cmp.common_files, shallow=False)
        for name in sorted(mismatch + errors):
            old = (Path(cmp.left) / name).read_text(encoding="utf-8").splitlines(keepends=True)
            new = (Path(cmp.right) / name).read_text(encoding="utf-8").splitlines(keepends=True)
            rel = (where / name).as_posix()
            problems.append("".join(difflib.unified_diff(old, new, f"expected/{rel}", f"generated/{rel}")))
        pending += cmp.subdirs.values()
    return problems


def test_there_are_golden_cases_for_every_plugin() -> None:
    assert {"protocol", "types", "wire"} <= set(golden.cases())
    specs = [load_spec(golden.GOLDEN_DIR / case / "schemas") for case in golden.cases()]
    for plugin in PLUGINS:
        assert any(plugin.generate(spec, "pkg") for spec in specs), f"no golden case exercises {plugin}"


@pytest.mark.parametrize("case", golden.cases())
def test_generated_code_matches_the_golden_record(generated: Path, case: str) -> None:
    problems = differences(generated / golden.package(case), golden.GOLDEN_DIR / case / "expected")
    assert not problems, (
        "\n".join(problems) + "\nIf this change is intended, run `python -m codegen --update-golden` and commit it."
    )


def test_a_changed_file_shows_as_a_readable_diff(generated: Path, tmp_path: Path) -> None:
    """The comparison itself can fail: an edited, a missing and an extra file are each reported."""
    actual = tmp_path / "actual"
    shutil.copytree(generated / "golden_types", actual)
    shapes = actual / "shapes.py"
    shapes.write_text(shapes.read_text().replace("radius: float", "radius: int"))
    (actual / "typescript" / "index.d.ts").unlink()
    (actual / "stray.py").write_text("")

    problems = differences(actual, golden.GOLDEN_DIR / "types" / "expected")

    assert len(problems) == 3
    diff = next(p for p in problems if p.startswith("---"))
    assert "--- expected/shapes.py\n+++ generated/shapes.py\n" in diff
    assert "-    radius: float = attrs.field(validator=_c.field(_c.number(minimum=0)))\n" in diff
    assert "+    radius: int = attrs.field(validator=_c.field(_c.number(minimum=0)))\n" in diff
    assert "missing (the generator no longer writes it): typescript/index.d.ts" in problems
    assert "new (not in the golden record): stray.py" in problems


def test_golden_typescript_compiles_under_strict(generated: Path) -> None:
    tsc = require_tool("tsc", "TypeScript compiler for the golden records' declarations", NODE_INSTALL)
    declarations = sorted(p.relative_to(generated).as_posix() for p in generated.rglob("*.d.ts"))
    config = {
        "compilerOptions": {
            "strict": True,
            "noEmit": True,
            "target": "ES2022",
            "module": "ES2022",
            "moduleResolution": "bundler",
            "skipLibCheck": False,
        },
        "files": declarations,
    }
    (generated / "tsconfig.json").write_text(json.dumps(config))
    result = subprocess.run(
        [tsc, "-p", str(generated), "--listFiles"], capture_output=True, text=True, check=False, cwd=generated
    )
    assert result.returncode == 0, result.stdout + result.stderr
    compiled = {Path(line).resolve() for line in result.stdout.splitlines()}
    assert {(generated / d).resolve() for d in declarations} <= compiled
    assert "golden_protocol/typescript/protocol-client.d.ts" in declarations


def test_the_golden_packages_work_outside_segue_generated(generated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The package name is a parameter: golden_types' converter structures and unstructures its own classes."""
    monkeypatch.syspath_prepend(str(generated))
    from golden_types import Canvas, Circle, Square, get_converter  # type: ignore[import-not-found]

    conv = get_converter()
    data = {
        "name": "sketch",
        "layers": {"a": {"type": "circle", "radius": 1.5}, "b": {"type": "square", "side": 3, "cornerRadius": None}},
        "class": "wide",
        "note": None,
        "x-unknown": [1],
    }
    canvas = conv.structure(data, Canvas)
    assert canvas.layers == {"a": Circle(radius=1.5), "b": Square(side=3, corner_radius=None)}
    assert (canvas.class_, canvas.note, canvas.extra) == ("wide", None, {"x-unknown": [1]})
    assert conv.unstructure(canvas, Canvas) == data


def test_update_golden_rewrites_a_stale_record(tmp_path: Path) -> None:
    """`python -m codegen --update-golden` brings an edited expected/ back and removes files nobody generates."""
    shutil.copytree(golden.GOLDEN_DIR / "types", tmp_path / "types")
    expected = tmp_path / "types" / "expected"
    (expected / "shapes.py").write_text("stale\n")
    (expected / "stray.d.ts").write_text("")

    changed = golden.update(tmp_path)

    assert changed == ["types/expected/shapes.py", "types/expected/stray.d.ts (removed)"]
    assert differences(expected, golden.GOLDEN_DIR / "types" / "expected") == []
