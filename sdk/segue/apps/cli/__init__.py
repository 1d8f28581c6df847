"""The `segue` command: `main` parses and dispatches (main.py), render.py draws tables and run text,
extra_commands.py holds the commands around the runtime (demo, twin, catalog)."""

from segue.apps.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
