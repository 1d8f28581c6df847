"""Every `--json` output of the CLI and every JSON response of the dashboard is a schema type: each validates
against the definition named here, so a client in another language can read it with the exported bundle."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from segue import RunStore
from segue.apps.dashboard import create_app
from tests._support.cli import run_cli
from tests._support.dashboard import get
from tests._support.sample_runs import SampleRuns, copy_store

SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
_raw = [json.loads(p.read_text()) for p in sorted(SCHEMAS.glob("*.schema.json"))]
_registry: Registry[Any] = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in _raw)
_home = {name: s["$id"] for s in _raw for name in s.get("$defs", {})}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"{_home[name]}#/$defs/{name}"}


def assert_is(data: Any, schema: dict[str, Any]) -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in
              Draft202012Validator(schema, registry=_registry).iter_errors(data)]  # fmt: skip
    assert errors == []


#: The `--json` commands and the schema of what each prints.
CLI = [
    (("runs", "list"), {"type": "array", "items": ref("RunSummary")}),
    (("runs", "show", "{first}"), ref("RunDetail")),
    (("runs", "explain", "{second}"), ref("RunExplanation")),
    (("runs", "sweep"), ref("SweptRuns")),
]
#: The dashboard's JSON endpoints and the schema of each answer.
API = [
    ("/api/runs", {"type": "array", "items": ref("RunSummary")}),
    ("/api/runs/{second}", ref("RunDetail")),
    ("/api/runs/{second}/explain", ref("RunExplanation")),
    ("/api/runs/01J0000000000000000000NONE", ref("ApiError")),
    ("/api/runs?status=bogus", ref("ApiError")),
]


def test_every_json_command_is_listed() -> None:
    """A new `--json` command must be added to CLI above (the parser is the list of what exists)."""
    from segue.apps.cli.main import build_parser

    found: list[tuple[str, ...]] = []

    def walk(parser: Any, path: tuple[str, ...]) -> None:
        if any("--json" in a.option_strings for a in parser._actions):
            found.append(path)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))

    walk(build_parser(), ())
    assert sorted(found) == sorted(argv[:2] for argv, _ in CLI)


@pytest.mark.parametrize(("argv", "schema"), CLI, ids=[" ".join(a[:2]) for a, _ in CLI])
def test_cli_json_is_a_schema_type(
    argv: tuple[str, ...], schema: dict[str, Any], runs: SampleRuns, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = copy_store(runs, tmp_path / "copy.db")  # `runs sweep` writes
    args = [a.format(first=runs.first, second=runs.second) for a in argv]
    code, out, err = run_cli(capsys, *args, "--db", url, "--json")
    assert code in (0, 1), err
    assert_is(json.loads(out), schema)


@pytest.mark.parametrize(("path", "schema"), API, ids=[p for p, _ in API])
def test_dashboard_json_is_a_schema_type(path: str, schema: dict[str, Any], runs: SampleRuns) -> None:
    store = RunStore(runs.url, read_only=True)
    try:
        page = get(create_app(store), path.format(second=runs.second))
    finally:
        store.close()
    assert_is(page.json(), schema)
