"""Issue 40 item 7: the CLI tests start `python -m segue ...` from a warm fork server (tests/_support/warm_cli.py)
rather than a fresh interpreter each time. A child forked there must be what the command would be: each check
here runs the same command both ways and compares, or looks at the child from outside (/proc)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import warm_cli
from tests._support.protocol_harness import frame, twin_agent, write_config

CLI = [sys.executable, "-m", "segue.apps.cli.main"]
SEGUE = [sys.executable, "-m", "segue"]
pytestmark = pytest.mark.skipif(
    os.environ.get("SEGUE_TEST_FRESH_CLI") == "1", reason="SEGUE_TEST_FRESH_CLI=1: every launch is a fresh subprocess"
)


def both(
    args: list[str], **kwargs: object
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    fresh = subprocess.run(args, capture_output=True, text=True, timeout=120, **kwargs)  # type: ignore[call-overload]
    warm = warm_cli.run(args, capture_output=True, text=True, timeout=120, **kwargs)
    return fresh, warm


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_output_and_exit_codes_match_a_fresh_interpreter(tmp_path: Path) -> None:
    for args in (
        [*SEGUE, "--version"],
        [*CLI, "runs", "list", "--db", "sqlite:///missing.db"],  # relative to the working directory: exit 2
        [*CLI, "no-such-command"],  # argparse's own exit 2 and usage on stderr
        [*CLI, "serve", "--help"],
    ):
        fresh, warm = both(args, cwd=tmp_path)
        assert (warm.returncode, warm.stdout, warm.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr), args
    assert warm_cli.cli_args([*CLI, "x"]) == ["x"] and warm_cli.cli_args([sys.executable, "script.py"]) is None


def test_the_environment_and_working_directory_are_the_callers(tmp_path: Path) -> None:
    (tmp_path / "here").mkdir()
    env = {**os.environ, "SEGUE_DB": "sqlite:///from-env.db"}
    fresh, warm = both([*CLI, "runs", "list"], cwd=tmp_path / "here", env=env)
    assert warm.returncode == fresh.returncode == 2
    assert "from-env.db" in warm.stderr and warm.stderr == fresh.stderr


def test_a_child_is_a_process_of_its_own_holding_what_a_fresh_one_holds(tmp_path: Path) -> None:
    """Its own pid and session, the descriptors a fresh `segue serve --stdio` holds after one answer (no socket of
    the fork server, no descriptor of this process), and a negative code when a signal ends it."""
    config = write_config(tmp_path / "agents.json", [twin_agent([])])
    held = []
    for start in (subprocess.Popen, warm_cli.Popen):
        proc = start(
            [*CLI, "serve", "--stdio", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            start_new_session=True,
        )
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "runs/list", "params": {}}))
            proc.stdin.flush()
            assert proc.stdout.readline().startswith(b"Content-Length:")
            assert os.getsid(proc.pid) == proc.pid, "start_new_session: a session of its own"
            assert proc.poll() is None
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(timeout=0.2)
            held.append(sorted(_kind(proc.pid, fd) for fd in os.listdir(f"/proc/{proc.pid}/fd")))
            forked_here = parent_of(proc.pid) == os.getpid()
            assert forked_here == (start is subprocess.Popen), "the warm child's parent is the fork server"
        finally:
            proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL and proc.poll() == -signal.SIGKILL
    fresh, warm = held
    assert warm == fresh


def _kind(pid: int, fd: str) -> tuple[int, str]:
    """A descriptor's number and what it is (pipe, socket, anon_inode:[eventpoll], a file's path)."""
    target = os.readlink(f"/proc/{pid}/fd/{fd}")
    return int(fd), target.split(":[")[0] if target.startswith(("pipe:", "socket:")) else target


def test_an_interpreter_setting_that_differs_starts_a_fresh_interpreter(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONHASHSEED": "7"}
    proc = warm_cli.Popen([*CLI, "--version"], stdout=subprocess.PIPE, text=True, env=env)
    assert parent_of(proc.pid) == os.getpid(), "PYTHONHASHSEED is read at start-up: a real subprocess"
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and out.startswith("segue ")
