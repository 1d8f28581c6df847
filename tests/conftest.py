"""Fixtures every test folder shares; the helpers are in tests/_support/ (imported as `tests._support.<module>`).
Tests never touch the network."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._support import warm_cli
from tests._support.environment import REPO, fresh_pg_store

# A shell that starts pytest in the background without job control (`pytest &` in a script) ignores SIGINT, and
# every child inherits that: a Python child then never turns Ctrl-C into KeyboardInterrupt, and the tests that press
# Ctrl-C on a child (test_interrupt, the MCP and serve shutdowns) would wait for nothing. Python's own handler here
# gives each child the default again (an ignored signal stays ignored across exec; a handled one does not).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """What `python -m codegen --out DIR` reads and writes, copied to edit freely: schemas/, the committed
    generated code, and the docs that carry a generated section."""
    from codegen.docs import SECTIONS
    from codegen.driver import GENERATED_DIR

    shutil.copytree(REPO / "schemas", tmp_path / "schemas")
    shutil.copytree(REPO / GENERATED_DIR, tmp_path / GENERATED_DIR, ignore=shutil.ignore_patterns("__pycache__"))
    for doc in SECTIONS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / doc, tmp_path / doc)
    return tmp_path


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The same store tests on SQLite and, where configured, PostgreSQL."""
    from segue.store import RunStore

    s = RunStore(f"sqlite:///{tmp_path}/segue.db") if request.param == "sqlite" else fresh_pg_store()
    yield s
    s.close()


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Any]:
    from segue.store import RunStore

    s = RunStore(f"sqlite:///{tmp_path}/segue.db")
    yield s
    s.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The sample run database of tests/_support/sample_runs.py (a chained, cached conversation), one per module."""
    from tests._support.sample_runs import build_store

    return build_store(tmp_path_factory.mktemp("runs") / "segue.db")


@pytest.fixture(scope="module")
def catalog() -> Any:
    """The packaged catalog alone (no SEGUE_CATALOG_PATH layers)."""
    from segue.catalog import Catalog

    return Catalog.load(env=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files holding a test marked `slow` first, in their order, then the rest: pytest-xdist hands out whole
    files in this order (`--dist loadfile --no-loadscope-reorder`, pyproject.toml), so the long ones start at once
    on every worker and the many short ones fill in behind them, rather than a long file landing last on one worker
    while the other idles."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable: each file's tests keep their order


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers more than the cores. Much of the suite's wall time is tests waiting by design (a
    server starting, a timeout that must pass, a killed child's lease lapsing); with a worker per core those waits
    left a core idle. Measured on two idle cores: 5 min 32 s with 2 workers, 4 min 31 s with 4, every test passing."""
    return (os.cpu_count() or 1) + 2


def pytest_unconfigure(config: pytest.Config) -> None:
    """This test process's warm CLI server ends with it, after its children (tests/_support/warm_cli.py)."""
    warm_cli.shutdown()
