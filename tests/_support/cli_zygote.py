"""The fork server of tests/_support/warm_cli.py: a Python process that imported segue's CLI and what its commands
load (the store, the protocol server, the vendor SDKs, the twin) and ran nothing, then forks one child per launch
that runs the CLI as `python -m segue.apps.cli.main ARGS` would.

Run as `python cli_zygote.py FD` with FD a SOCK_SEQPACKET socket: each message is a JSON launch request with four
descriptors (a status socket, the child's stdin, stdout and stderr). For each, a helper is forked that forks the
child, writes the child's pid and then its wait status to the status socket, and exits; the server waits for its
helpers (so the children's CPU time is accounted to the test process, as a subprocess's is). End of file on FD ends
the server.

The child gets what a fresh interpreter would have: descriptors 0, 1 and 2 and no other, standard streams built as
Python builds them (PYTHONUNBUFFERED honoured), the request's environment, working directory, argv and
`sys.path[0]`, Python's own signal dispositions and an empty signal mask, a new session or process group when asked,
and Python's own exit: SystemExit's code, KeyboardInterrupt ending it by SIGINT, non-daemon threads joined, atexit
handlers run, a failed flush of stdout exiting 120.
"""

from __future__ import annotations

import gc
import importlib
import io
import json
import locale
import os
import signal
import socket
import sys
from typing import Any

#: What a command's first call would import; importing them is most of a fresh `python -m segue...`'s cost.
PRELOAD = [
    "anthropic",
    "openai",
    "segue.apps.cli.main",
    "segue.apps.cli.extra_commands",
    "segue.apps.protocol.stdio",
    "segue.apps.protocol.http",
    "segue.apps.protocol.web",
    "segue.apps.dashboard.server",
    "segue.agent",
    "segue.store.run_store",
    "segue.providers.anthropic",
    "segue.providers.openai_chat",
    "segue.providers.openai_responses",
    "segue_twin",
    "segue_twin.server",
    "segue_twin.transport",
    "segue.demo.chat",
    "segue.demo.shop_db",
]


def _preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # a module this checkout does not have; the child imports what it needs itself


def _serve(control: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """Fork a helper per request; return (request, descriptors) in the helper. Every helper is waited for (at the
    latest at the end, for up to a minute), so the CPU time of the children counts in the test run's own, as a
    `python -m segue` started by subprocess would."""
    control.send(b"ready")
    while True:
        data, fds, _, _ = socket.recv_fds(control, 1 << 20, 8)
        if not data:
            signal.alarm(60)  # a child still running then (a server a test left behind) is not waited for
            _reap(block=True)
            os._exit(0)
        if os.fork() == 0:
            control.close()
            return json.loads(data), fds
        for fd in fds:
            os.close(fd)
        _reap(block=False)


def _reap(*, block: bool) -> None:
    """Wait for the helpers that have exited; `block`: for all of them."""
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _stream(fd: int, *, write: bool, unbuffered: bool, errors: str) -> io.TextIOWrapper:
    """A standard stream as Python's start-up makes it (Python/pylifecycle.c create_stdio)."""
    encoding = locale.getencoding()
    if not write:
        return io.TextIOWrapper(
            io.BufferedReader(io.FileIO(fd, "r", closefd=False)),
            encoding=encoding,
            errors=errors,
            line_buffering=os.isatty(fd),
        )
    raw = io.FileIO(fd, "w", closefd=False)
    buffer: Any = raw if unbuffered else io.BufferedWriter(raw)
    return io.TextIOWrapper(
        buffer,
        encoding=encoding,
        errors=errors,
        line_buffering=os.isatty(fd) or fd == 2,
        write_through=unbuffered,
    )


def _become_child(request: dict[str, Any], fds: list[int]) -> None:
    """In the helper: fork the child, report its pid and wait status, exit; in the child: set it up and return."""
    status, stdio = fds[0], fds[1:4]
    pid = os.fork()
    if pid:
        for fd in set(stdio):
            os.close(fd)
        os.write(status, b"%d\n" % pid)
        _, sts = os.waitpid(pid, 0)
        os.write(status, b"%d\n" % sts)
        os._exit(0)
    if request["new_session"]:
        os.setsid()
    elif request["process_group"] >= 0:
        os.setpgid(0, request["process_group"])
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = sys.__stdin__ = _stream(0, write=False, unbuffered=unbuffered, errors="strict")
    sys.stdout = sys.__stdout__ = _stream(1, write=True, unbuffered=unbuffered, errors="strict")
    sys.stderr = sys.__stderr__ = _stream(2, write=True, unbuffered=unbuffered, errors="backslashreplace")
    cli = sys.modules["segue.apps.cli.main"]
    sys.argv = [str(cli.__file__), *request["args"]]
    sys.path[0] = os.getcwd()  # as `python -m` puts the working directory first
    importlib.invalidate_caches()


if __name__ == "__main__":
    _preload()
    # What the server imported stays out of the children's garbage collections: a collection touching it would
    # copy every page of it into each child (copy-on-write), which costs more than the imports saved.
    gc.freeze()
    _become_child(*_serve(socket.socket(fileno=int(sys.argv[1]))))
    from segue.apps.cli.main import main

    raise SystemExit(main())
