"""Child processes forked from a parent that has imported their modules already (multiprocessing's fork server,
started once per test process with its modules preloaded). A child is still a process of its own, with its own
pid, memory and database connections, that a test can SIGKILL; it only skips re-importing segue, the vendor SDKs
and DBOS, which is most of what a fresh `python script.py` costs (seconds per child on two cores)."""

from __future__ import annotations

import importlib
import multiprocessing
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

_CONTEXT = multiprocessing.get_context("forkserver")
_preloaded: list[str] | None = None


def run(
    script: Path, args: Sequence[str], *, preload: Sequence[str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run `main(args)` of the module `script` (a file) in a child forked from a parent that imported
    `preload` (the installed modules it needs), as `python script *args` would run it: its stdout and stderr
    captured, its return code negative when a signal ended it. The first call starts the fork server, with that
    call's `preload`. (Python 3.11's fork server imports them before it sets the test's sys.path, so they are
    installed packages, not the script; one that fails to import is imported by each child instead.)"""
    global _preloaded
    if _preloaded is None:
        _preloaded = list(preload)
        _CONTEXT.set_forkserver_preload(_preloaded)
    with tempfile.TemporaryDirectory(prefix="segue-child-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        # The environment as it is now: the fork server kept the one it started with, and a test may have set more
        # since (monkeypatch.setenv), which a `python script` started now would inherit.
        env = dict(os.environ)
        child = _CONTEXT.Process(target=_child, args=(script, list(args), cwd, out, err, env))
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise subprocess.TimeoutExpired([str(script), *args], timeout)
        code = child.exitcode
        return subprocess.CompletedProcess([str(script), *args], code, out.read_text(), err.read_text())


def _child(script: Path, args: list[str], cwd: Path, out: Path, err: Path, env: dict[str, str]) -> None:
    os.environ.clear()
    os.environ.update(env)
    # Output goes to files at the descriptor level, so what a library writes to fd 1 or 2 is captured too; a child
    # killed by SIGKILL loses what it had not flushed, as a `python script` writing to a pipe would.
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)
    os.chdir(cwd)
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.parent))  # as `python script` puts the script's folder first
    importlib.import_module(script.stem).main(args)
