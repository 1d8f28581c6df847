"""Starting the test MCP server (tests/_support/mcp_servers/fixture_server.py, written with the official SDK) and
checking that its processes are gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests._support.environment import REPO

SERVER = REPO / "tests" / "_support" / "mcp_servers" / "fixture_server.py"
#: A hand-written server for answers an SDK server never sends (tests/_support/mcp_servers/raw_server.py).
RAW_SERVER = REPO / "tests" / "_support" / "mcp_servers" / "raw_server.py"


def stdio(record: Path, *options: str, **kw: Any) -> Any:
    """MCPTools for the fixture server over stdio; it records its PID and tool order in `record`."""
    from segue.mcp import MCPTools

    kw.setdefault("name", "fixture")
    return MCPTools.stdio(sys.executable, [str(SERVER), "--record", str(record), *options], **kw)


def raw_stdio(record: Path, *options: str, **kw: Any) -> Any:
    """MCPTools for the hand-written server over stdio; it records its PID (and its child's, with --child)."""
    from segue.mcp import MCPTools

    kw.setdefault("name", "raw")
    return MCPTools.stdio(sys.executable, [str(RAW_SERVER), "--record", str(record), *options], **kw)


def records(directory: Path) -> list[dict[str, Any]]:
    """What each started server wrote: {"pid", "order"}, oldest first."""
    found = [json.loads(p.read_text()) for p in directory.glob("*.json")]
    return sorted(found, key=lambda r: os.stat(directory / f"{r['pid']}.json").st_mtime_ns)


def running(pid: int) -> bool:
    """Whether the process exists and is not a zombie (a reaped or exited process is not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):  # gone, or going while we read
        return False
    return state not in ("Z", "X")


def wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@contextmanager
def http_server(tmp: Path, *options: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The fixture server on Streamable HTTP, on a loopback port; yields (url, process)."""
    port_file = tmp / f"port-{time.monotonic_ns()}"
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--transport", "http", "--port-file", str(port_file), *options],
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the HTTP fixture server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp", process
    finally:
        process.kill()
        process.wait()
