"""`python -m codegen` for tests, run in the test's own process.

Each `python -m codegen` subprocess paid a fresh interpreter and the vendor SDKs' imports (the wire check reads
their types), most of a run's time; a test that runs codegen five times paid it five times. `main(argv)` is the
same code the command runs, so the tests keep asserting the exit code and the stdout / stderr lines a user sees.
The real `python -m codegen --check` over the repository is a step of .ci/run (and of the brief's standards), not a
test: it ran twice in CI when it was both.
"""

from __future__ import annotations

import io
import subprocess
from contextlib import redirect_stderr, redirect_stdout


def codegen(*args: str) -> subprocess.CompletedProcess[str]:
    """What `python -m codegen ARGS` would return: its exit code, stdout and stderr."""
    from codegen.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse's own exits (bad arguments, --help)
            code = e.code if isinstance(e.code, int) else 2
    return subprocess.CompletedProcess(["python", "-m", "codegen", *args], code, out.getvalue(), err.getvalue())
