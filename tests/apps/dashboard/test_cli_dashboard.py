"""`segue dashboard`: serves the pages from a real process; bad input exits 2 with one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from segue.apps.cli.main import main
from tests._support import warm_cli
from tests._support.sample_runs import SampleRuns


def test_dashboard_serves_the_run_list(runs: SampleRuns, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "segue.apps.cli.main", "dashboard", "--db", runs.url, "--port", "0"]
    proc = warm_cli.Popen(command, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("segue dashboard for tenant 'default': http://127.0.0.1:"), line
        url = line.split()[5]
        with urllib.request.urlopen(url, timeout=10) as response:
            page = response.read().decode()
        assert response.status == 200
        assert runs.first in page and runs.other_tenant not in page
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_dashboard_on_a_busy_port_exits_2(runs: SampleRuns, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["dashboard", "--db", runs.url, "--port", str(port)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith(f"segue: cannot listen on 127.0.0.1:{port}:") and err.count("\n") == 1


def test_dashboard_without_a_database_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["dashboard", "--db", f"sqlite:///{tmp_path / 'none.db'}", "--port", "0"])
    assert code == 2 and "no run store at" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
