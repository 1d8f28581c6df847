"""`python -m codegen`: regenerate, `--check` for staleness, `--export DIR` for the cross-language bundle."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from codegen.errors import SchemaError
from codegen.model import load_model
from codegen.render import GENERATED_DIR, REPO_ROOT, render_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codegen", description=__doc__)
    parser.add_argument("--schemas", type=Path, default=REPO_ROOT / "schemas", help="schema folder (default: schemas/)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT, help="root that generated paths are relative to")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 naming each stale generated file; write nothing")
    mode.add_argument("--export", type=Path, metavar="DIR", help="write the bundle for clients in other languages")
    args = parser.parse_args(argv)

    try:
        model = load_model(args.schemas, display_root=args.schemas.parent)
        files = render_all(model)
    except SchemaError as e:
        print(f"codegen: {e}", file=sys.stderr)
        return 2
    if args.check:
        return check(files, args.out)
    if args.export:
        export(files, args.schemas, args.export)
        print(f"codegen: wrote the bundle to {args.export}")
        return 0
    changed = write(files, args.out)
    print(f"codegen: {len(files)} files, {len(changed)} changed" + "".join(f"\n  {c}" for c in changed))
    return 0


def check(files: dict[str, str], root: Path) -> int:
    stale = [p for p, text in files.items() if _read(root / p) != text]
    extra = sorted(
        p.relative_to(root).as_posix()
        for p in (root / GENERATED_DIR).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.relative_to(root).as_posix() not in files
    )
    for p in stale:
        print(f"stale: {p}", file=sys.stderr)
    for p in extra:
        print(f"not generated (remove it): {p}", file=sys.stderr)
    if stale or extra:
        print("codegen: generated code is out of date; run `python -m codegen`", file=sys.stderr)
        return 1
    print(f"codegen: {len(files)} generated files are up to date")
    return 0


def write(files: dict[str, str], root: Path) -> list[str]:
    """Write changed files atomically (temp file + rename) and delete generated files no schema produces."""
    changed = []
    for rel, text in files.items():
        target = root / rel
        if _read(target) == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".codegen-")
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files: keep generated code readable like its sources
        os.replace(tmp, target)
        changed.append(rel)
    for p in sorted((root / GENERATED_DIR).rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and "__pycache__" not in p.parts and rel not in files:
            p.unlink()
            changed.append(f"{rel} (removed)")
    return changed


def export(files: dict[str, str], schema_dir: Path, dest: Path) -> None:
    """The bundle: schemas with $refs resolved, TypeScript declarations, and the fixtures."""
    prefix = f"{GENERATED_DIR}/"
    for rel, text in files.items():
        if rel.startswith((prefix + "schemas/", prefix + "typescript/")) or rel == prefix + "protocol.json":
            target = dest / rel.removeprefix(prefix)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8", newline="\n")
    fixtures = schema_dir / "fixtures"
    if fixtures.is_dir():
        shutil.copytree(fixtures, dest / "fixtures", dirs_exist_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _read(p: Path) -> str | None:
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
