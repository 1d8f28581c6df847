"""`python -m segue.apps.cli.main ...` (or `python -m segue ...`) started from a warm fork server instead of a fresh
interpreter: `Popen` and `run` take the same arguments as subprocess's and return the same objects, and the child is
a process of its own (its own pid, descriptors, environment, working directory, session when asked) that runs the
CLI as the command would; it only skips importing segue, its SDKs and the twin again, which is most of what a fresh
`python -m segue` costs (about a second of CPU each, and tests start hundreds).

One fork server per test process (tests/_support/cli_zygote.py), started at the first launch and ended with the
test process. What a fork cannot give falls back to a real `subprocess.Popen`: another command, `preexec_fn`,
`pass_fds`, `user`/`group`, or an environment whose interpreter settings (`PYTHON*` other than PYTHONUNBUFFERED,
the locale) differ from the server's. SEGUE_TEST_FRESH_CLI=1 in the test run's environment makes every launch a
real subprocess, to tell whether a failure comes from the fork server. Tests whose point is the real start-up
(import cost, a fresh interpreter's modules, a driver missing from the environment) start `sys.executable` with
subprocess themselves.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ZYGOTE = Path(__file__).with_name("cli_zygote.py")
#: The modules `python -m` may name: both run segue.apps.cli.main's `main()`.
MODULES = ("segue.apps.cli.main", "segue")
#: Environment variables read once at interpreter start-up: a child whose values differ starts fresh.
_STARTUP = ("PYTHON", "LANG", "LC_")


class _Zygote:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner = os.getpid()
        self.env = dict(os.environ)
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, str(ZYGOTE), str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        ready = self.control.recv(16)
        if ready != b"ready":
            raise RuntimeError(f"the CLI fork server did not start (exit code {self.process.wait()})")

    def fits(self, env: dict[str, str]) -> bool:
        def startup(e: dict[str, str]) -> dict[str, str]:
            return {k: v for k, v in e.items() if k.startswith(_STARTUP) and k != "PYTHONUNBUFFERED"}

        return startup(env) == startup(self.env)

    def launch(self, request: dict[str, Any], fds: list[int]) -> None:
        with self.lock:
            socket.send_fds(self.control, [json.dumps(request).encode()], fds)

    def close(self) -> None:
        self.control.close()
        try:
            self.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_zygote: _Zygote | None = None
_zygote_lock = threading.Lock()


def shutdown() -> None:
    """End this process's fork server and wait for it (tests/conftest.py, at the end of the session)."""
    global _zygote
    with _zygote_lock:
        if _zygote is not None and _zygote.owner == os.getpid():
            _zygote.close()
        _zygote = None


def _server() -> _Zygote:
    global _zygote
    with _zygote_lock:
        # A new one in a forked test process (the socket is its parent's), or when the last one has died.
        if _zygote is None or _zygote.owner != os.getpid() or _zygote.process.poll() is not None:
            _zygote = _Zygote()
        return _zygote


def cli_args(args: Any) -> list[str] | None:
    """The CLI's arguments when `args` is `[sys.executable, "-m", MODULE, *ARGS]`, else None."""
    if isinstance(args, (str, bytes, os.PathLike)) or len(args) < 3:
        return None
    head = [os.fspath(a) for a in args[:3]]
    if head[0] != sys.executable or head[1] != "-m" or head[2] not in MODULES:
        return None
    return [os.fspath(a) for a in args[3:]]


class Popen(subprocess.Popen[Any]):
    """subprocess.Popen, with the CLI forked from the warm server (see the module's docstring)."""

    _status: socket.socket | None = None

    def _execute_child(  # type: ignore[override]
        self,
        args: Any,
        executable: Any,
        preexec_fn: Any,
        close_fds: bool,
        pass_fds: Sequence[int],
        cwd: Any,
        env: Any,
        startupinfo: Any,
        creationflags: int,
        shell: bool,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        restore_signals: bool,
        gid: Any,
        gids: Any,
        uid: Any,
        umask: int,
        start_new_session: bool,
        process_group: int,
    ) -> None:
        argv = cli_args(args)
        environment = dict(os.environ if env is None else env)
        plain = (preexec_fn, executable, gid, gids, uid, pass_fds, shell) == (None, None, None, None, None, (), False)
        fresh = argv is None or not plain or umask >= 0 or os.environ.get("SEGUE_TEST_FRESH_CLI") == "1"
        fresh = fresh or (cwd is not None and not os.path.isdir(cwd))  # subprocess raises in the caller, as it should
        if fresh or not _server().fits(environment):
            return super()._execute_child(  # type: ignore[misc]
                args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo, creationflags, shell,
                p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite, restore_signals, gid, gids, uid, umask,
                start_new_session, process_group,
            )  # fmt: skip
        status, theirs = socket.socketpair()
        stdio = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1, errwrite if errwrite != -1 else 2]
        request = {
            "args": argv,
            "cwd": os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd()),
            "env": {os.fsdecode(k): os.fsdecode(v) for k, v in environment.items()},
            "new_session": bool(start_new_session),
            "process_group": process_group,
        }
        try:
            _server().launch(request, [theirs.fileno(), *stdio])
        finally:
            theirs.close()
        self._status = status
        self._status_data = b""
        self.pid = int(self._status_line())
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # type: ignore[attr-defined]

    def _status_line(self) -> bytes:
        assert self._status is not None
        while b"\n" not in self._status_data:
            chunk = self._status.recv(64)
            if not chunk:
                raise ChildProcessError(f"the CLI fork server lost the child of {self.args!r}")
            self._status_data += chunk
        line, _, self._status_data = self._status_data.partition(b"\n")
        return line

    def _finish(self) -> None:
        assert self._status is not None
        sts = int(self._status_line())
        self._status.close()
        self.returncode = -os.WSTOPSIG(sts) if os.WIFSTOPPED(sts) else os.waitstatus_to_exitcode(sts)

    def _internal_poll(self, _deadstate: int | None = None, **_: Any) -> int | None:  # type: ignore[override]
        if self._status is None:
            return super()._internal_poll(_deadstate)  # type: ignore[misc, no-any-return]
        if self.returncode is None and self._waitpid_lock.acquire(False):  # type: ignore[attr-defined]
            try:
                if self.returncode is None and select.select([self._status], [], [], 0)[0]:
                    self._finish()
            finally:
                self._waitpid_lock.release()  # type: ignore[attr-defined]
        return self.returncode

    def _wait(self, timeout: float | None) -> int:  # type: ignore[override]
        if self._status is None:
            return super()._wait(timeout)  # type: ignore[misc, no-any-return]
        with self._waitpid_lock:  # type: ignore[attr-defined]
            if self.returncode is None:
                if not select.select([self._status], [], [], timeout)[0]:
                    raise subprocess.TimeoutExpired(self.args, timeout)  # type: ignore[arg-type]
                self._finish()
        assert self.returncode is not None
        return self.returncode


def run(
    args: Sequence[Any],
    *,
    input: Any = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """subprocess.run with the warm Popen."""
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with Popen(args, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            process.kill()
            exc.stdout, exc.stderr = process.communicate()
            raise
        except BaseException:
            process.kill()
            raise
        code = process.poll()
        assert code is not None
        if check and code:
            raise subprocess.CalledProcessError(code, process.args, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(process.args, code, stdout, stderr)
