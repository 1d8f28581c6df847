"""TypeScript drives `segue serve --stdio` with the exported declarations and client helper, and ajv checks the
exported schemas (tests/node/).

The Node project pins exact versions (package-lock.json); `npm ci` runs only when its node_modules is missing or
differs from the lock. The bundle is exported next to a copy of the project once, type-checked with `tsc
--strict` (including lines that must NOT compile); then one script runs against a server whose model is the
twin, and the other compiles every schema of the bundle in ajv's strict mode and checks every fixture.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, require_tool
from protocol_harness import LIST_TABLES_CLIENT, twin_agent, write_config

from segue.bundle import export_bundle
from segue.store import RunStore

PROJECT = REPO / "tests" / "node"


def _installed() -> bool:
    """Whether node_modules holds exactly the versions of package-lock.json."""
    lock = json.loads((PROJECT / "package-lock.json").read_text())
    for path, meta in lock["packages"].items():
        if not path:
            continue
        manifest = PROJECT / path / "package.json"
        if not manifest.is_file() or json.loads(manifest.read_text()).get("version") != meta["version"]:
            return False
    return True


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """(node, the folder of the compiled project with the bundle exported into it)."""
    node = require_tool("node", "Node.js runs the TypeScript protocol client test")
    if not _installed():
        npm = require_tool("npm", "npm installs tests/node (typescript, @types/node, ajv)")
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=PROJECT, check=True, timeout=300)
    work = tmp_path_factory.mktemp("node") / "project"
    work.mkdir()
    for name in ("package.json", "tsconfig.json", "protocol.test.ts", "schemas.test.ts"):
        shutil.copyfile(PROJECT / name, work / name)
    (work / "node_modules").symlink_to(PROJECT / "node_modules", target_is_directory=True)
    export_bundle(work / "bundle")

    tsc = subprocess.run(
        [node, str(PROJECT / "node_modules" / "typescript" / "bin" / "tsc"), "-p", str(work)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tsc.returncode == 0, tsc.stdout + tsc.stderr
    return node, work


def test_ajv_strict_compiles_every_schema_and_agrees_with_every_fixture(compiled: tuple[str, Path]) -> None:
    """Issue 16 item 14: ajv's strict mode refused protocol.schema.json (`unknown keyword: "protocol"`)."""
    node, work = compiled
    run = subprocess.run(
        [node, str(work / "schemas.test.js"), "bundle"], capture_output=True, text=True, timeout=120, cwd=work
    )
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    fixtures = sum(1 for p in (REPO / "schemas" / "fixtures").rglob("*.json"))
    assert summary["schemas"] == len(list((REPO / "schemas").glob("*.schema.json")))
    assert summary["fixtures"] == fixtures, "every fixture was checked"
    table = json.loads((work / "bundle" / "protocol.json").read_text())
    assert table["methods"]["run"]["params"]["$ref"] == "urn:segue:schema:protocol:1#/$defs/RunParams"


def test_typescript_client_drives_a_replayed_conversation(compiled: tuple[str, Path], tmp_path: Path) -> None:
    node, work = compiled

    tools = [
        LIST_TABLES_CLIENT,
        {"name": "describe_table", "python": "segue.twin.sample_db:describe_table"},
        {"name": "run_query", "python": "segue.twin.sample_db:run_query"},
    ]
    config = write_config(tmp_path / "agents.json", [twin_agent(tools)])
    env = {**os.environ, "SEGUE_PYTHON": sys.executable, "SEGUE_CONFIG": str(config)}
    run = subprocess.run(
        [node, str(work / "protocol.test.js")], capture_output=True, text=True, timeout=120, env=env, cwd=work
    )
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    # Three completed runs streamed their events; the refused fourth request streamed its RUN_ERROR only.
    assert [summary["events"][str(i)] >= 5 for i in (1, 2, 3)] == [True] * 3 and summary["events"]["4"] == 1, summary

    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        first, second, third = summary["runs"]
        assert [r.run_id for r in store.list_runs()] == [third, second, first]
        assert [r.continued_from for r in store.list_runs()] == [second, first, None]
    finally:
        store.close()
