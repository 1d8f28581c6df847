"""`python -m codegen`: regenerate (and the generated sections of docs, codegen/docs.py), `--check` for staleness,
`--export DIR` for the cross-language bundle, `--update-golden` to rewrite the golden records under
tests/codegen_golden/, `--write-golden DIR` to write each golden case as its package (golden_<case>) for mypy
(a step of .ci/run)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from codegen import docs, golden
from codegen.driver import GENERATED_DIR, REPO_ROOT, export, generate, stale_files, write
from codegen.errors import SchemaError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codegen", description=__doc__)
    parser.add_argument("--schemas", type=Path, default=REPO_ROOT / "schemas", help="schema folder (default: schemas/)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT, help="root that generated paths are relative to")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 naming each stale generated file; write nothing")
    mode.add_argument("--export", type=Path, metavar="DIR", help="write the bundle for clients in other languages")
    mode.add_argument(
        "--update-golden",
        action="store_true",
        help="regenerate the expected output of the golden-record cases in tests/codegen_golden/",
    )
    mode.add_argument(
        "--write-golden",
        type=Path,
        metavar="DIR",
        help="write each golden case's generated package (DIR/golden_<case>), to type-check it with mypy",
    )
    args = parser.parse_args(argv)

    try:
        if args.update_golden:
            changed = golden.update()
            print(f"codegen: {len(golden.cases())} golden cases, {len(changed)} files changed" + _lines(changed))
            return 0
        if args.write_golden:
            for case in golden.cases():
                write(golden.generate_case(case), args.write_golden / golden.package(case))
            print(f"codegen: wrote {len(golden.cases())} golden packages to {args.write_golden}")
            return 0
        files = generate(args.schemas)
        if args.export:
            export(files, args.schemas, args.export)
            print(f"codegen: wrote the bundle to {args.export}")
            return 0
        doc_texts = docs.render(files, args.out)
    except (SchemaError, docs.DocsError) as e:
        print(f"codegen: {e}", file=sys.stderr)
        return 2
    out_dir = args.out / GENERATED_DIR
    if args.check:
        stale, extra = stale_files(files, out_dir)
        stale_docs = docs.stale(doc_texts, args.out)
        for rel in stale:
            print(f"stale: {GENERATED_DIR}/{rel}", file=sys.stderr)
        for rel in extra:
            print(f"not generated (remove it): {GENERATED_DIR}/{rel}", file=sys.stderr)
        for doc in stale_docs:
            print(f"stale: {doc} (its generated section)", file=sys.stderr)
        if stale or extra or stale_docs:
            print("codegen: generated code is out of date; run `python -m codegen`", file=sys.stderr)
            return 1
        print(f"codegen: {len(files)} generated files and {len(doc_texts)} generated doc section(s) are up to date")
        return 0
    changed = [f"{GENERATED_DIR}/{c}" for c in write(files, out_dir)] + docs.write(doc_texts, args.out)
    print(f"codegen: {len(files)} files, {len(changed)} changed" + _lines(changed))
    return 0


def _lines(paths: Iterable[str]) -> str:
    return "".join(f"\n  {p}" for p in paths)


if __name__ == "__main__":
    raise SystemExit(main())
