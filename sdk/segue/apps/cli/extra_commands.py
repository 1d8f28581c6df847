"""`segue demo`, `segue twin serve` and `segue catalog explain|check`: commands around the runtime.

Registered by segue.apps.cli.main.build_parser through `add_commands`; each is one handler returning an exit code
(0 ok, 1 found a problem, 2 bad input or environment).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from segue.apps.cli.arguments import store_url

EXIT_OK, EXIT_PROBLEM, EXIT_BAD_INPUT = 0, 1, 2


def _demo(args: argparse.Namespace) -> int:
    from segue.demo.chat import TurnReport, format_report, run_chat, uses_real_vendor
    from segue.store import RunStore
    from segue_twin import Twin

    logging.getLogger("segue.replay").setLevel(logging.ERROR)  # the report lists every replay warning
    real = uses_real_vendor(args.vendor) and not args.twin
    twin = None if real else Twin()
    why = "--twin" if args.twin else "no API key set"
    where = "the real vendor (--twin uses the offline twin)" if real else f"the twin (offline; {why})"
    print(f"segue demo: 5-turn database chat, setting {args.setting!r}, {args.vendor} via {where}", file=sys.stderr)

    def progress(report: TurnReport) -> None:
        calls = ", ".join(report.tool_calls) or "no tool calls"
        print(f"  turn {report.turn}/5: {calls}; {report.cached_share:.0%} of input read from cache", file=sys.stderr)

    store = RunStore(args.db)
    try:
        reports = asyncio.run(run_chat(args.setting, vendor=args.vendor, store=store, twin=twin, on_turn=progress))
    except RuntimeError as e:  # a turn did not succeed: the vendor failed, or the network is down
        hint = "; run `segue demo --twin` to use the offline twin" if real else ""
        print(f"segue: the demo stopped: {' '.join(str(e).split())}{hint}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        store.close()
    print(format_report(reports, title=f"setting={args.setting} vendor={args.vendor}"))
    print(f"\nruns recorded in {args.db} (tenant 'demo'): segue runs list --db {args.db} --tenant demo")
    return EXIT_OK


def _twin_serve(args: argparse.Namespace) -> int:
    from segue_twin.server import run_server

    try:
        run_server(args.host, args.port)
    except OSError as e:
        print(f"segue: cannot listen on {args.host}:{args.port}: {e.strerror or e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


def _catalog_explain(args: argparse.Namespace) -> int:
    from segue.catalog import Catalog, CatalogError

    try:
        catalog = Catalog.load(args.catalog_dir or ())
        print(catalog.explain_text(args.model, args.vendor))
    except CatalogError as e:
        print(f"segue: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


def _catalog_check(args: argparse.Namespace) -> int:
    from segue.catalog import check_dir

    directory: Path = args.dir
    if not directory.is_dir():
        print(f"segue: {directory} is not a folder; pass the folder holding your catalog files", file=sys.stderr)
        return EXIT_BAD_INPUT
    errors = check_dir(directory)
    for error in errors:
        print(str(error), file=sys.stderr)
    if errors:
        print(f"{len(errors)} problem(s) in {directory}", file=sys.stderr)
        return EXIT_PROBLEM
    print(f"{directory}: every catalog file is valid and resolves over the packaged catalog")
    return EXIT_OK


def add_commands(commands: Any, command: Callable[..., argparse.ArgumentParser], port: Callable[[str], int]) -> None:
    p = command(commands, "demo", _demo, "run the headline demo: a 5-turn replayed database chat (twin by default)")
    p.add_argument("--vendor", choices=["anthropic", "openai"], default="anthropic")
    p.add_argument(
        "--setting",
        choices=["all", "last3", "none", "history", "tool_added"],
        default="all",
        help="how each turn carries the earlier ones (default: all = runs=..., replay_last='all')",
    )
    p.add_argument(
        "--db", type=store_url, default="sqlite:///segue-demo.db", help="where runs are recorded (URL or SQLite path)"
    )
    p.add_argument("--twin", action="store_true", help="use the offline twin even when an API key is set")

    twin = command(commands, "twin", None, "segue's offline emulator of the vendors' APIs and caches")
    twin_cmds = twin.add_subparsers(dest="twin_command", required=True, metavar="SUBCOMMAND")
    p = command(twin_cmds, "serve", _twin_serve, "serve the twin over HTTP on loopback (Anthropic and OpenAI wire)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=port, default=8765, help="port (default: 8765; 0 = any free port)")

    catalog = command(commands, "catalog", None, "the model / vendor catalog and its cascade")
    catalog_cmds = catalog.add_subparsers(dest="catalog_command", required=True, metavar="SUBCOMMAND")
    p = command(
        catalog_cmds, "explain", _catalog_explain, "every resolved key of a serving path and where it came from"
    )
    p.add_argument("model", metavar="MODEL", help="catalog model id or the vendor's API name")
    p.add_argument("--vendor", help="inference vendor id (default: the model's own layers only)")
    p.add_argument("--catalog-dir", action="append", type=Path, help="an app catalog folder layered on top")
    p = command(catalog_cmds, "check", _catalog_check, "validate an app's catalog folder")
    p.add_argument("dir", type=Path, metavar="DIR", help="the folder to check")
