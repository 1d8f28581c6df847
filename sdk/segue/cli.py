"""The `segue` command. Exit codes: 0 ok, 1 the command ran and found a problem, 2 bad input or environment."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def _schema_export(args: argparse.Namespace) -> int:
    from segue.bundle import export_bundle

    dest: Path = args.dir
    if dest.exists() and not dest.is_dir():
        print(f"segue: {dest} exists and is not a folder; pass a folder path", file=sys.stderr)
        return 2
    count = export_bundle(dest, progress=lambda line: print(f"  {line}", file=sys.stderr))
    print(f"exported {count} files to {dest}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="segue", description="Cache-friendly, replayable LLM agent runs.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    schema = commands.add_parser("schema", help="segue's JSON Schemas and TypeScript declarations")
    schema_cmds = schema.add_subparsers(dest="schema_command", required=True, metavar="SUBCOMMAND")
    export = schema_cmds.add_parser("export", help="write the bundle for clients in other languages")
    export.add_argument("dir", type=Path, help="folder to write (created if missing)")
    export.set_defaults(handler=_schema_export)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = args.handler
    result: int = handler(args)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
