"""The driver: load and check every input once, run each plugin on it, format the Python, then write or compare.

Data moves one way: schema folder -> `Spec` (codegen/spec/) -> each plugin's `generate(spec, package)`, a
mapping of paths inside the generated package to file contents -> ruff -> disk. The driver calls nothing of a
plugin but `generate`, and plugins never import each other or the driver.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Protocol

from ruff import find_ruff_bin

from codegen.plugins import bundle, converter, protocol, python_types, reference, typescript, wire
from codegen.spec import Spec, load_spec

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The real generated package: its import name, and its folder relative to the repository root.
PACKAGE = "segue.generated"
GENERATED_DIR = "sdk/segue/generated"


class Plugin(Protocol):
    """What the driver needs of a plugin module: one function from the checked spec to the plugin's files."""

    def generate(self, spec: Spec, package: str) -> dict[str, str]:
        """File contents keyed by path relative to the generated package's folder, e.g. `typescript/x.d.ts`."""
        ...


#: One plugin per output, run in this order (the order only matters for the error naming a path clash).
PLUGINS: tuple[Plugin, ...] = (python_types, converter, typescript, bundle, wire, protocol, reference)
#: Sub-folders of the generated package that make up the bundle for clients in other languages.
EXPORTED = ("schemas/", "typescript/")


def generate(schema_dir: Path, *, package: str = PACKAGE, lives_in: str = GENERATED_DIR) -> dict[str, str]:
    """Every generated file for the schemas in `schema_dir`, keyed by path inside the generated package, sorted.

    `package` is the import name the generated modules use for each other; `lives_in` is where the package is
    committed, relative to the repository root (ruff picks its configuration by that path). Raises SchemaError,
    before any plugin runs, when an input is bad.
    """
    spec = load_spec(schema_dir, display_root=schema_dir.parent)
    return format_python(run_plugins(spec, package), lives_in)


def run_plugins(spec: Spec, package: str) -> dict[str, str]:
    files: dict[str, str] = {}
    for plugin in PLUGINS:
        for rel, text in plugin.generate(spec, package).items():
            if rel in files:
                raise RuntimeError(f"two codegen plugins write {rel}; the second is {plugin}")
            files[rel] = text
    return files


def format_python(files: dict[str, str], lives_in: str) -> dict[str, str]:
    """Apply ruff's safe fixes and format to each .py file, with the repository's configuration for its path,
    so `ruff check` and `ruff format --check` stay clean on the committed output."""
    out = {}
    for rel, text in sorted(files.items()):
        if rel.endswith(".py"):
            path = f"{lives_in}/{rel}"
            text = _ruff(["format", "-q"], path, _ruff(["check", "--fix-only", "--exit-zero", "-q"], path, text))
        out[rel] = text.replace("\r\n", "\n")
    return out


def _ruff(args: list[str], path: str, text: str) -> str:
    # The ruff binary itself, as `python -m ruff` would exec it: without the interpreter start-up in front, which
    # was most of the time of a run's 36 calls.
    cmd = [find_ruff_bin(), *args, "--stdin-filename", path, "-"]
    proc = subprocess.run(cmd, input=text, capture_output=True, text=True, cwd=REPO_ROOT, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"ruff failed on generated {path}: {proc.stderr.strip()}")
    return proc.stdout


def stale_files(files: dict[str, str], out_dir: Path) -> tuple[list[str], list[str]]:
    """(files whose committed text differs or is missing, files in `out_dir` that no plugin generates)."""
    stale = [rel for rel, text in files.items() if _read(out_dir / rel) != text]
    return stale, [rel for rel in _existing(out_dir) if rel not in files]


def write(files: dict[str, str], out_dir: Path) -> list[str]:
    """Write changed files atomically (temp file + rename) and delete the files no plugin generates any more."""
    changed = []
    for rel, text in files.items():
        target = out_dir / rel
        if _read(target) == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".codegen-")
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files: keep generated code readable like its sources
        os.replace(tmp, target)
        changed.append(rel)
    for rel in _existing(out_dir):
        if rel not in files:
            (out_dir / rel).unlink()
            changed.append(f"{rel} (removed)")
    return changed


def export(files: dict[str, str], schema_dir: Path, dest: Path) -> None:
    """The bundle: schemas with $refs resolved, TypeScript declarations, the method table and its reference, and
    the fixtures."""
    for rel, text in files.items():
        if rel.startswith(EXPORTED) or rel in ("protocol.json", "protocol.md"):
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8", newline="\n")
    fixtures = schema_dir / "fixtures"
    if fixtures.is_dir():
        shutil.copytree(fixtures, dest / "fixtures", dirs_exist_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _existing(out_dir: Path) -> list[str]:
    if not out_dir.is_dir():
        return []
    return sorted(
        p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )


def _read(p: Path) -> str | None:
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
