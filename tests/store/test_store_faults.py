"""The run store under faults: unusual text, a full disk, a dropped connection, read-only opens, paging bounds."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import peewee as pw
import pytest

from segue import Agent, InputError, RunStore
from segue._core.contracts import ProviderRequest
from segue.errors import StoreError
from segue.generated import Message, TextBlock, ToolResultBlock
from segue.store import migrations
from segue.store.text import MARK, decode, encode
from segue.testing import ScriptedProvider, call, text
from tests._support.environment import fresh_pg_store, pg_url
from tests._support.store_rows import new_run, version_one_store

ODD = ["", "plain", "nul \x00 inside", "\x00", "lone \ud800 surrogate", MARK + "starts with the marker", "é\udfff€"]


@pytest.mark.parametrize("value", ODD)
def test_the_text_rule_round_trips_every_string(value: str) -> None:
    stored = encode(value)
    assert decode(stored) == value
    assert "\x00" not in stored and stored.encode("utf-8").decode("utf-8") == stored  # both databases can hold it
    if value in ("", "plain"):
        assert stored == value, "ordinary text is stored as it is"


def echo(text_in: str) -> str:
    """Echo the text back.

    Args:
        text_in: the text
    """
    return f"tool saw [{text_in}]"


async def test_nul_characters_round_trip_the_same_on_both_databases(store: RunStore) -> None:
    """Issue 16 item 4: on PostgreSQL a NUL in an input, answer or tool result raised ValueError and lost the run."""
    answer = "answer \x00 with a NUL"

    def model(request: ProviderRequest) -> Message:
        return call("echo", {"text_in": "arg \x00 nul"}) if request.messages[-1].role == "user" else text(answer)

    agent = Agent(ScriptedProvider(replies=[model, model]), "p", [echo], store)
    result = await agent.run("question \x00 with a NUL", tenant_id="t")
    assert result.status == "success", result.error
    assert result.answer == answer
    detail = store.get_run(result.run_id, tenant_id="t")
    assert detail is not None
    assert detail.input == "question \x00 with a NUL" and detail.answer == answer
    results = [b for t in detail.traces for b in t.message.content if isinstance(b, ToolResultBlock)]
    assert [r.content for r in results] == ["tool saw [arg \x00 nul]"]
    assert [c.result for c in detail.tool_calls] == ["tool saw [arg \x00 nul]"]
    # The replay path reads the same rows with raw SQL: the same text comes back.
    stored = store.load_runs([result.run_id])[result.run_id]
    assert stored.input == "question \x00 with a NUL" and stored.answer == answer
    texts = [b.text for t in stored.traces for b in t.message.content if isinstance(b, TextBlock)]
    assert texts == ["question \x00 with a NUL", answer]


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"user_input": "bad \ud800 input"}, "user_input has a lone surrogate (U+D800) at index 4"),
        ({"user_input": "ok", "tenant_id": "t\udc00"}, "tenant_id has a lone surrogate (U+DC00) at index 1"),
        ({"user_input": "ok", "tenant_id": "t" * 201}, "tenant_id must be at most 200 characters"),
        (
            {"user_input": "ok", "idempotency_key": "k\x00"},
            "idempotency_key must be at most 200 characters without NUL",
        ),
        ({"user_input": "ok", "metadata": {"note": "x\ud800"}}, "metadata['note'] has a lone surrogate"),
        ({"user_input": "ok", "metadata": {"blob": "x" * 70_000}}, "metadata is 70,011 characters of JSON"),
        ({"user_input": "ok", "metadata": {"k" * 201: 1}}, "metadata keys must be strings of at most 200"),
        (
            {
                "user_input": "ok",
                "history": [
                    {"role": "user", "content": [{"type": "text", "text": "\ud800"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": "fine"}]},
                ],
            },
            "history[0]['content'][0]['text'] has a lone surrogate",
        ),
    ],
)
async def test_unstorable_arguments_are_input_errors_naming_the_field(
    sqlite_store: RunStore, kwargs: dict[str, Any], names: str
) -> None:
    """Issue 16 items 5 and 11: a lone surrogate was an internal error with a traceback; metadata had no limit."""
    agent = Agent(ScriptedProvider.of(text("never")), "p", [], sqlite_store)
    user_input = kwargs.pop("user_input")
    with pytest.raises(InputError, match=_literal(names)):
        await agent.run(user_input, **kwargs)
    assert sqlite_store.counts()["agent_runs"] == 0


def _literal(text: str) -> str:
    import re

    return re.escape(text)


def _limit_pages(store: RunStore, pages: int) -> None:
    """Make SQLite's file 'full' at `pages` pages for the calling thread's connection (a full disk, in miniature)."""
    store.db.execute_sql(f"PRAGMA max_page_count = {pages}")


def test_a_full_disk_is_reported_as_such_and_writes_resume_afterwards(tmp_path: Path) -> None:
    """Issue 16 item 6: peewee's failed ROLLBACK replaced SQLite's "database or disk is full"."""
    store = RunStore(f"sqlite:///{tmp_path}/full.db")
    first = new_run("01J" + "0" * 23, "t", input="small")
    store.create_run(first, [])
    (pages,) = store.db.execute_sql("PRAGMA page_count").fetchone()
    _limit_pages(store, pages)
    big = new_run("01J" + "0" * 22 + "1", "t", input="x" * 200_000)
    with pytest.raises(StoreError, match="database or disk is full") as info:
        store.create_run(big, [])
    assert "cannot rollback" not in str(info.value)
    assert [r.run_id for r in store.list_runs(tenant_id="t")] == [first.run_id], "earlier runs stay intact"
    _limit_pages(store, 1_000_000)
    store.create_run(big, [])  # space freed: writes resume
    assert len(store.list_runs(tenant_id="t")) == 2
    store.close()


async def test_a_full_disk_during_a_run_ends_it_in_error_with_the_real_cause(tmp_path: Path) -> None:
    store = RunStore(f"sqlite:///{tmp_path}/full.db")
    (pages,) = store.db.execute_sql("PRAGMA page_count").fetchone()
    # The agent's store calls run in worker threads, each with its own connection: every new connection gets
    # the limit. The run row fits; the model's 100 kB answer does not.
    store.db._pragmas = [*store.db._pragmas, ("max_page_count", pages + 2)]  # type: ignore[attr-defined]
    agent = Agent(ScriptedProvider(replies=[text("y" * 100_000)]), "p", [], store)
    result = await agent.run("fill it")
    assert result.status == "error"
    assert result.error is not None and "database or disk is full" in result.error, result.error
    assert "cannot rollback" not in result.error
    store.db._pragmas = [p for p in store.db._pragmas if p[0] != "max_page_count"]  # type: ignore[attr-defined]
    store.close()
    reopened = RunStore(f"sqlite:///{tmp_path}/full.db", read_only=True)
    detail = reopened.get_run(result.run_id)
    assert detail is not None and detail.status == "error" and "database or disk is full" in (detail.error or "")
    reopened.close()


@pytest.mark.postgres
def test_a_dropped_postgresql_connection_is_reopened_once() -> None:
    """Issue 16 item 2: after a server restart every request failed with "connection already closed".

    pg_terminate_backend ends the store's connection from the server side exactly as a restart does; only this
    store's own connection is touched, so the shared test server is never restarted."""
    store = fresh_pg_store()
    store.create_run(
        new_run("01J" + "0" * 23, "t", input="i"),
        [],
    )
    killer = RunStore(store.url)

    def drop() -> None:
        (pid,) = store.db.execute_sql("SELECT pg_backend_pid()").fetchone()
        (done,) = killer.db.execute_sql("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
        assert done

    drop()
    assert [r.run_id for r in store.list_runs(tenant_id="t")] == ["01J" + "0" * 23], "a read reconnects"
    drop()
    store.finish_run(
        "01J" + "0" * 23,
        status="success",
        answer="a",
        error=None,
        usage=store.get_run("01J" + "0" * 23, tenant_id="t").usage,
        iterations=1,  # type: ignore[union-attr]
    )
    drop()
    second = new_run("01J" + "0" * 22 + "1", "t", input="i")
    store.create_run(second, [])  # the connection died before the transaction began: safe to run again
    assert [r.status for r in store.list_runs(tenant_id="t")] == ["running", "success"]
    killer.close()
    store.close()


@pytest.mark.postgres
def test_an_unreachable_postgresql_server_is_one_clear_error() -> None:
    store = fresh_pg_store()
    (pid,) = store.db.execute_sql("SELECT pg_backend_pid()").fetchone()
    killer = RunStore(store.url)
    killer.db.execute_sql("SELECT pg_terminate_backend(%s)", (pid,))
    killer.close()
    store.db.connect_params["port"] = 1  # the server "stays down"
    store._units.reconnect_seconds = 0.3
    with pytest.raises(
        StoreError, match=r"run store at postgresql://.* is unreachable: .*tried to reconnect for 0.3 s"
    ):
        store.list_runs(tenant_id="t")


def test_read_only_opens_change_nothing(tmp_path: Path) -> None:
    """Issue 16 item 8: `runs list` switched the file to WAL and ran migrations."""
    path = tmp_path / "old.db"
    before = version_one_store(path)
    says = rf"schema version 1; this segue reads version {migrations.LATEST}: upgrade it with `segue db migrate"
    with pytest.raises(StoreError, match=says):
        RunStore(f"sqlite:///{path}", read_only=True)
    assert path.read_bytes() == before
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    RunStore(f"sqlite:///{path}").close()  # a writer migrates
    reader = RunStore(f"sqlite:///{path}", read_only=True)
    assert reader.list_runs() == []
    with pytest.raises(StoreError, match="readonly"):
        reader.create_run(
            new_run("01J" + "0" * 23, "t", input="i"),
            [],
        )
    reader.close()


def test_read_only_open_of_missing_or_foreign_files(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no run store at"):
        RunStore(f"sqlite:///{tmp_path}/missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()
    (tmp_path / "text.db").write_text("hello, not a database " * 100)
    with pytest.raises(StoreError, match="file is not a database"):
        RunStore(f"sqlite:///{tmp_path}/text.db", read_only=True)
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(StoreError, match="is not a segue run store"):
        RunStore(f"sqlite:///{tmp_path}/other.db", read_only=True)


@pytest.mark.postgres
def test_read_only_postgresql_store_cannot_write() -> None:
    fresh_pg_store().close()
    reader = RunStore(pg_url(), read_only=True)
    assert reader.list_runs() == []
    with pytest.raises(StoreError, match="read-only transaction"):
        reader.create_run(
            new_run("01J" + "0" * 23, "t", input="i"),
            [],
        )
    reader.close()


def test_list_offsets_are_bounded(sqlite_store: RunStore) -> None:
    """Issue 16 item 11: an offset of 2**63 overflowed SQLite's integer and was an internal error."""
    with pytest.raises(ValueError, match=r"offset in 0..1,000,000,000"):
        sqlite_store.list_runs(offset=2**63)
    assert sqlite_store.list_runs(offset=1_000_000_000) == []


def test_peewee_errors_become_store_errors(sqlite_store: RunStore) -> None:
    sqlite_store.db.execute_sql("DROP TABLE run_tags")
    with pytest.raises(
        StoreError, match=r"run store at sqlite:///.* failed: OperationalError: no such table: run_tags"
    ):
        sqlite_store.list_runs(metadata_filter={"a": 1})
    assert isinstance(StoreError("x"), Exception) and not isinstance(StoreError("x"), pw.PeeweeException)
