"""`segue demo`, `segue twin serve` and `segue catalog explain|check`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from segue.apps.cli.main import main
from segue.store import RunStore


def test_demo_runs_offline_and_records_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    db = f"sqlite:///{tmp_path}/demo.db"
    assert main(["demo", "--db", db]) == 0
    captured = capsys.readouterr()
    assert "via the twin" in captured.err and "turn 5/5" in captured.err
    lines = captured.out.splitlines()
    assert lines[1].split()[:3] == ["turn", "iter", "tool"]
    assert "list_tables" in lines[2] and "run_query" in lines[3]
    runs = RunStore(db).list_runs(tenant_id="demo")
    assert len(runs) == 5 and runs[0].continued_from == runs[1].run_id
    # It says it used the twin, and its runs and cost read as the twin's, never as Anthropic's answer or charge.
    assert "twin $*" in lines[1] and "twin (emulated, $" in captured.out and "not a charge" in captured.out
    assert {r.served_by for r in runs} == {"twin"} and all(r.cost and r.cost.usd == 0 for r in runs)


def test_catalog_explain_names_sources(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "explain", "gpt-4.1-mini", "--vendor", "openai"]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("llm.prefix_prompt_cache")]
    assert line.split()[1:4] == ["true", "vendor", "openai"]
    assert "catalogs/vendors.json#/vendors/" in line


def test_catalog_explain_unknown_model(capsys: pytest.CaptureFixture[str]) -> None:
    """A model the catalog does not list resolves from the vendor's defaults; only an unknown vendor fails."""
    assert main(["catalog", "explain", "gpt-9000", "--vendor", "openai"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["gpt-9000@openai  (api_name gpt-9000, wire openai_responses)",
                       "not in the catalog: from the vendor's defaults"]  # fmt: skip
    assert main(["catalog", "explain", "gpt-4.1-mni", "--vendor", "openai"]) == 0
    assert "did you mean 'gpt-4.1-mini'?" in capsys.readouterr().out
    assert main(["catalog", "explain", "gpt-9000", "--vendor", "opnai"]) == 2
    assert "unknown vendor 'opnai'; did you mean 'openai'?" in capsys.readouterr().err


def test_catalog_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good"
    good.mkdir()
    (good / "extra.json").write_text(
        json.dumps(
            {
                "$schema": "../schemas/catalog.schema.json",
                "version": 2,
                "model_types": [{"id": "embedding", "name": "Embedding"}],
            }
        )
    )
    assert main(["catalog", "check", str(good)]) == 0
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "typo.json").write_text(
        json.dumps({"$schema": "x", "version": 1, "vendors": [{"id": "acme", "name": "Acme", "wirre": "openai_chat"}]})
    )
    assert main(["catalog", "check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "typo.json#/vendors/0" in err and "wirre" in err
    assert main(["catalog", "check", str(tmp_path / "missing")]) == 2


def test_twin_serve_rejects_a_bad_port(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["twin", "serve", "--port", "70000"])
    assert info.value.code == 2
    assert "expected a port in 0..65535" in capsys.readouterr().err
