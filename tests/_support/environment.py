"""Where the tests run: the repository, the external tools a test needs (skipped locally, required in CI), and the
test PostgreSQL database."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
#: The Node project of the TypeScript tests (exact versions in its package-lock.json), and the one line that installs
#: it. pytest never installs it (no network inside the tests): .ci/run runs this line before the README's test
#: command, and locally the tests that need it skip, naming it.
NODE_PROJECT = REPO / "tests" / "node"
NODE_INSTALL = "cd tests/node && npm ci --no-audit --no-fund"


def require_tool(name: str, why: str, install: str | None = None) -> str:
    """Path of an external tool; skipped locally when missing (with `install`, the line that installs it), but a
    failure in CI (CI=true) so CI never skips. Node tools are found in tests/node's node_modules too."""
    local = [d / "node_modules" / ".bin" / name for d in (REPO, NODE_PROJECT)]
    found = next((str(p) for p in local if p.exists()), None) or shutil.which(name)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{name} is required in CI ({why}); .ci/run must install it")
    pytest.skip(f"{name} not installed ({why}); " + (f"install it: {install}" if install else ".ci/run installs it"))


def require_node_packages(why: str) -> str:
    """Node.js, with tests/node's packages installed at exactly the versions of its package-lock.json."""
    import json

    node = require_tool("node", why)
    lock = json.loads((NODE_PROJECT / "package-lock.json").read_text())
    for path, meta in lock["packages"].items():
        manifest = NODE_PROJECT / path / "package.json"
        if path and (not manifest.is_file() or json.loads(manifest.read_text()).get("version") != meta["version"]):
            if os.environ.get("CI"):
                pytest.fail(
                    f"tests/node is not installed as its package-lock.json pins ({path}); .ci/run runs: {NODE_INSTALL}"
                )
            pytest.skip(f"tests/node's packages are not installed ({why}): run `{NODE_INSTALL}`")
    return node


def pg_url() -> str:
    """SEGUE_TEST_PG_URL, which .ci/run sets after starting PostgreSQL; skip locally, fail in CI without it."""
    url = os.environ.get("SEGUE_TEST_PG_URL")
    if url:
        return _worker_database(url)
    if os.environ.get("CI"):
        pytest.fail("SEGUE_TEST_PG_URL is not set in CI; .ci/run must start PostgreSQL and export it")
    pytest.skip("SEGUE_TEST_PG_URL not set (set it to a scratch PostgreSQL database to run these)")


def _worker_database(url: str) -> str:
    """Under pytest-xdist each worker gets a database of its own (created on first use), because the store tests
    drop every segue table before they start."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return url
    base, _, name = url.rpartition("/")
    own = f"{name}_{worker}"
    if own not in _CREATED:
        import psycopg2

        admin = psycopg2.connect(url)
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (own,))
            if cur.fetchone() is None:
                cur.execute(f'CREATE DATABASE "{own}"')
        admin.close()
        _CREATED.add(own)
    return f"{base}/{own}"


_CREATED: set[str] = set()


def fresh_pg_store() -> Any:
    """A RunStore on the test PostgreSQL database with every segue table dropped first."""
    from segue.store import RunStore
    from segue.store.models import Bound

    url = pg_url()
    first = RunStore(url)
    with first.db.connection_context():
        first.db.drop_tables(Bound(first.db).all, safe=True, cascade=True)
    first.close()
    return RunStore(url)
