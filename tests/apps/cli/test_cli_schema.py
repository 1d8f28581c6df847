"""`segue schema export`: the installed-package path to the bundle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from segue.apps.cli.main import main


def test_schema_export_writes_the_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "export", str(tmp_path / "out")]) == 0
    schema = json.loads((tmp_path / "out" / "schemas" / "message.schema.json").read_text())
    assert schema["$id"] == "urn:segue:schema:message:1"
    assert (tmp_path / "out" / "typescript" / "index.d.ts").read_text().count("export * from") >= 6
    assert list((tmp_path / "out" / "fixtures" / "RunDetail" / "valid").glob("*.json"))
    assert "exported" in capsys.readouterr().out


def test_schema_export_refuses_a_file_as_destination(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "a-file"
    target.write_text("x")
    assert main(["schema", "export", str(target)]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert target.read_text() == "x"


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["schema", "export", "--help"])
    assert exit_info.value.code == 0
    assert "folder to write" in capsys.readouterr().out
