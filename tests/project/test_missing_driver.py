"""A PostgreSQL store without its driver says which package to install, in the API and on the command line."""

from __future__ import annotations

import subprocess
import sys

BLOCK = "import sys; sys.modules.update(dict.fromkeys(['psycopg2', 'psycopg2.extensions', 'psycopg2.extras']))\n"
URL = "postgresql://segue@127.0.0.1:1/nowhere"  # never reached: the driver is missing before any connection


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True, timeout=60)


def test_run_store_names_the_extra_to_install() -> None:
    done = _python(
        "from segue import RunStore\n"
        "from segue.errors import StoreError\n"
        f"try:\n    RunStore({URL!r})\n"
        "except StoreError as e:\n    print(e)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "the PostgreSQL driver (psycopg2) is not installed" in done.stdout
    assert done.stdout.rstrip().endswith("install it with pip install 'segue[postgres]'")


def test_cli_prints_one_line_naming_the_extra_and_exits_2() -> None:
    done = _python(f"from segue.apps.cli.main import main\nraise SystemExit(main(['db', 'migrate', '--db', {URL!r}]))")
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("segue: cannot open the run store at postgresql://segue@127.0.0.1:1/nowhere: ")
    assert line.endswith("install it with pip install 'segue[postgres]'")
