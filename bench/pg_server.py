"""A throwaway PostgreSQL server for benchmarks that restart it: initdb into a temporary folder, start it on a
free loopback port, restart it on demand, remove it at the end. Never touches a server someone else uses.

PostgreSQL refuses to run as root, so as root (CI) every server command runs as the `postgres` user, as .ci/run
does. The binaries are those of the newest installed PostgreSQL (Debian's /usr/lib/postgresql/*/bin), or
`pg_config --bindir`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class NoPostgres(Exception):
    """No PostgreSQL server binaries on this machine (or no `postgres` user to run them as root)."""


def _bindir() -> Path:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0
    )
    if found:
        return found[-1]
    pg_config = shutil.which("pg_config")
    if pg_config:
        return Path(subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True).stdout.strip())
    raise NoPostgres("no PostgreSQL server binaries (install Debian's postgresql package)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One server: `url` to connect, `restart()` to restart it (fast shutdown: sessions are terminated)."""

    def __init__(self, folder: Path) -> None:
        self.bin = _bindir()
        self.root = os.geteuid() == 0
        if self.root and shutil.which("su") is None:
            raise NoPostgres("running as root needs `su` to start PostgreSQL as the postgres user")
        self.folder = folder
        self.data = folder / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._options = f"-k {folder} -h 127.0.0.1 -p {self.port}"

    def _run(self, *argv: str) -> None:
        command = [str(self.bin / argv[0]), *argv[1:]]
        if self.root:
            command = ["su", "postgres", "-c", shlex.join(command)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise NoPostgres(f"{argv[0]} failed: {(done.stderr or done.stdout).strip()[-300:]}")

    def init(self) -> None:
        if self.root:
            shutil.chown(self.folder, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8")

    def start(self) -> None:
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", self._options, "-l", str(self.folder / "server.log"), "-w", "start"
        )

    def restart(self) -> None:
        # -l as at start: without it the new server would hold our output pipes open, and we would wait forever.
        log = str(self.folder / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-o", self._options, "-l", log, "-w", "restart")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")


@contextmanager
def throwaway_postgres() -> Iterator[PgServer]:
    """A fresh server for the `with` block. Raises NoPostgres when this machine cannot run one."""
    folder = Path(tempfile.mkdtemp(prefix="segue-bench-pg-"))
    try:
        server = PgServer(folder)
        server.init()
        server.start()
        try:
            yield server
        finally:
            try:
                server.stop()
            except NoPostgres:
                pass
    finally:
        shutil.rmtree(folder, ignore_errors=True)
