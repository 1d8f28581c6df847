"""The `segue` command: main.py parses and dispatches (`segue = segue.apps.cli.main:main`, or
`python -m segue.apps.cli.main`), render.py draws tables and run text, extra_commands.py holds the commands around
the runtime (demo, twin, catalog). Nothing is imported here, so running main.py as `-m` loads it once."""
