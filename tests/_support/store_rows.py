"""Rows for the store tests: a new run, messages, run ids, and a database at schema version 1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from segue.generated import Message, RunMeta, TextBlock
from segue.store import NewRun, RunStore


def new_run(run_id: str, tenant: str = "t1", **kw: Any) -> NewRun:
    base: dict[str, Any] = {
        "run_id": run_id,
        "tenant_id": tenant,
        "agent_name": "sql",
        "input": "hello",
        "model": "m",
        "vendor": "v",
        "meta": RunMeta(extra={"segue.x": 1}),
        "metadata": {"team": "blue"},
    }
    base.update(kw)
    return NewRun(**base)


def user(text: str) -> Message:
    return Message(role="user", content=[TextBlock(text=text)])


def assistant(text: str) -> Message:
    return Message(role="assistant", content=[TextBlock(text=text)])


def run_ids(n: int) -> list[str]:
    return [f"01J{i:023d}" for i in range(n)]


def version_one_store(path: Path) -> bytes:
    """A SQLite store at schema version 1 in rollback-journal mode (as an older segue left it); its bytes."""
    writer = RunStore(f"sqlite:///{path}")
    writer.db.execute_sql("DELETE FROM segue_schema_version WHERE version > 1")
    writer.db.execute_sql("PRAGMA journal_mode = DELETE")
    writer.close()
    return path.read_bytes()
