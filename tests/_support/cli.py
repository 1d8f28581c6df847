"""The segue CLI called in-process."""

from __future__ import annotations

import pytest

from segue.apps.cli.main import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
