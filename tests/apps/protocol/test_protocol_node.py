"""TypeScript drives `segue serve` over stdio and HTTP with the exported declarations and client helpers, the
frozen protocol 1.0 client still works against the current server, and ajv checks the exported schemas
(tests/node/).

The Node project pins exact versions (package-lock.json); pytest never installs it: .ci/run does (`cd tests/node &&
npm ci --no-audit --no-fund`) before the tests, and without it these tests skip, naming that line. The bundle is
exported next to a copy of the project once, type-checked with `tsc --strict` (including lines that must NOT
compile); then the scripts run against servers whose model is the twin, and the last compiles every schema of the
bundle in ajv's strict mode and checks every fixture.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from segue.apps.bundle import export_bundle
from segue.store import RunStore
from tests._support.environment import NODE_PROJECT, REPO, require_node_packages
from tests._support.protocol_harness import LIST_TABLES_CLIENT, twin_agent, write_config

PROJECT = NODE_PROJECT


def _doc_examples() -> list[str]:
    examples = re.findall(r"```ts\n(.+?)```", (REPO / "docs" / "protocol.md").read_text(), flags=re.S)
    assert len(examples) == 3, "docs/protocol.md has its structured-output, stdio and HTTP examples"
    return examples


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """(node, the folder of the compiled project with the bundle exported into it)."""
    node = require_node_packages("Node.js runs the TypeScript protocol client test")
    work = tmp_path_factory.mktemp("node") / "project"
    work.mkdir()
    for name in ("package.json", "tsconfig.json", "protocol.test.ts", "old-client.test.ts", "schemas.test.ts"):
        shutil.copyfile(PROJECT / name, work / name)
    shutil.copytree(PROJECT / "fixtures", work / "fixtures")
    (work / "node_modules").symlink_to(PROJECT / "node_modules", target_is_directory=True)
    export_bundle(work / "bundle")
    # The TypeScript examples of docs/protocol.md are type-checked with the rest.
    tsconfig = json.loads((work / "tsconfig.json").read_text())
    for i, snippet in enumerate(_doc_examples()):
        (work / f"docs-example-{i}.ts").write_text(snippet.replace("./segue-bundle/", "./bundle/"))
        tsconfig["files"].append(f"docs-example-{i}.ts")
    (work / "tsconfig.json").write_text(json.dumps(tsconfig))

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


def _conversation_config(tmp_path: Path) -> Path:
    tools = [
        LIST_TABLES_CLIENT,
        {"name": "describe_table", "python": "segue.demo.shop_db:describe_table"},
        {"name": "run_query", "python": "segue.demo.shop_db:run_query"},
    ]
    return write_config(tmp_path / "agents.json", [twin_agent(tools)])


def _node(node: str, script: Path, config: Path) -> dict[str, Any]:
    env = {**os.environ, "SEGUE_PYTHON": sys.executable, "SEGUE_CONFIG": str(config)}
    run = subprocess.run([node, str(script)], capture_output=True, text=True, timeout=300, env=env, cwd=script.parent)
    assert run.returncode == 0, run.stdout + run.stderr
    summary: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return summary


def test_typescript_clients_drive_the_lifecycle_over_stdio_and_http(compiled: tuple[str, Path], tmp_path: Path) -> None:
    """The issue 19 acceptance: initialize, discover, a replayed 3-turn conversation with a client-side tool,
    explain the last run, shutdown with runs in flight (each one's final status reported), exit; on both
    transports."""
    node, work = compiled
    summary = _node(node, work / "protocol.test.js", _conversation_config(tmp_path))
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        for transport in ("stdio", "http"):
            side = summary[transport]
            first, second, third = side["conversation"]
            runs = {r.run_id: r for r in store.list_runs(limit=100)}
            assert [runs[r].status for r in (first, second, third)] == ["success"] * 3, transport
            assert [runs[r].continued_from for r in (first, second, third)] == [None, first, second]
            # What shutdown reported is what the store holds.
            assert (runs[side["finished"]].status, runs[side["cancelled"]].status) == ("success", "cancelled")
            assert side["events"] > 20, side
    finally:
        store.close()


def test_the_protocol_1_0_client_still_works_against_this_server(compiled: tuple[str, Path], tmp_path: Path) -> None:
    """The compatibility rule of docs/protocol.md: the client generated before initialize existed never sends it,
    and every method it knows works, with the error codes it knows (tests/node/fixtures/protocol-1.0)."""
    node, work = compiled
    summary = _node(node, work / "old-client.test.js", _conversation_config(tmp_path))
    assert summary == {"runs": 3, "cancelled": summary["cancelled"]}
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        statuses = sorted(r.status for r in store.list_runs(limit=100))
    finally:
        store.close()
    # run x2, retry, resume (one run, paused then finished) and the cancelled run; the refused runs wrote nothing.
    assert statuses == ["cancelled", "success", "success", "success", "success"]
