"""RunStore on SQLite and PostgreSQL: writes are atomic, reads are tenant-scoped, the schema is versioned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from segue.errors import StoreError
from segue.generated import LlmInteraction, RunMeta, ToolCallRecord, Usage
from segue.store import RunStore
from segue.store.records import IdempotencyKeyTaken
from tests._support.store_rows import assistant, new_run, run_ids, user


def test_create_record_finish_and_read_back(store: RunStore) -> None:
    (rid,) = run_ids(1)
    store.create_run(new_run(rid), [user("hi")])
    usage = Usage(input_tokens=10, output_tokens=2, cache_read_tokens=4)
    store.record_iteration(
        rid,
        iteration=1,
        first_index=1,
        traces=[assistant("hello!")],
        interaction=LlmInteraction(
            iteration=1, vendor="v", model="m", provider_request={"messages": [1]}, usage=usage, latency_ms=3.5
        ),
        tool_calls=[
            ToolCallRecord(call_id="c1", iteration=1, name="t", arguments={"a": 1}, is_error=False, duration_ms=1.0)
        ],
        usage=usage,
    )
    store.finish_run(rid, status="success", answer="hello!", error=None, usage=usage, iterations=1)

    detail = store.get_run(rid, tenant_id="t1")
    assert detail is not None
    assert detail.status == "success" and detail.answer == "hello!" and detail.finished_at
    assert [t.message.role for t in detail.traces] == ["user", "assistant"]
    assert detail.llm_interactions[0].provider_request == {"messages": [1]}
    assert detail.llm_interactions[0].usage == usage
    assert detail.tool_calls[0].arguments == {"a": 1}
    assert detail.usage == usage
    assert detail.metadata == {"team": "blue"}
    assert detail.meta == RunMeta(extra={"segue.x": 1})


def test_reads_never_cross_tenants(store: RunStore) -> None:
    a, b = run_ids(2)
    store.create_run(new_run(a, "t1"), [user("a")])
    store.create_run(new_run(b, "t2"), [user("b")])
    assert [r.run_id for r in store.list_runs(tenant_id="t1")] == [a]
    assert store.get_run(b, tenant_id="t1") is None
    assert store.get_run(b, tenant_id="t2") is not None
    assert {r.run_id for r in store.list_runs(all_tenants=True)} == {a, b}


def test_list_filters_and_paging(store: RunStore) -> None:
    ids = run_ids(5)
    for i, rid in enumerate(ids):
        store.create_run(new_run(rid, agent_name="a" if i % 2 else "b", metadata={"n": i, "team": "x"}), [])
    store.finish_run(
        ids[0], status="error", answer=None, error="boom", usage=Usage(input_tokens=0, output_tokens=0), iterations=0
    )
    assert [r.run_id for r in store.list_runs(tenant_id="t1", limit=2)] == [ids[4], ids[3]]
    assert [r.run_id for r in store.list_runs(tenant_id="t1", limit=2, offset=2)] == [ids[2], ids[1]]
    assert [r.run_id for r in store.list_runs(tenant_id="t1", status="error")] == [ids[0]]
    assert {r.run_id for r in store.list_runs(tenant_id="t1", agent_name="a")} == {ids[1], ids[3]}
    assert [r.run_id for r in store.list_runs(tenant_id="t1", metadata_filter={"n": 3, "team": "x"})] == [ids[3]]
    assert store.list_runs(tenant_id="t1", metadata_filter={"n": "3"}) == []


def test_list_runs_follows_continued_from(store: RunStore) -> None:
    a, b, c, d = run_ids(4)
    store.create_run(new_run(a), [])
    store.create_run(new_run(b, continued_from=a), [])
    store.create_run(new_run(c, continued_from=a), [])
    store.create_run(new_run(d, "t2", continued_from=a), [])  # another tenant's run never shows
    assert [r.run_id for r in store.list_runs(tenant_id="t1", continued_from=a)] == [c, b]
    assert store.list_runs(tenant_id="t1", continued_from=b) == []


def test_idempotency_key_is_unique_per_tenant(store: RunStore) -> None:
    a, b, c = run_ids(3)
    store.create_run(new_run(a, "t1", idempotency_key="k", fingerprint="f1"), [])
    store.create_run(new_run(b, "t2", idempotency_key="k", fingerprint="f2"), [])  # other tenant: fine
    with pytest.raises(IdempotencyKeyTaken):
        store.create_run(new_run(c, "t1", idempotency_key="k", fingerprint="f3"), [user("x")])
    assert store.find_idempotent("t1", "k") == (a, "f1")
    assert store.get_run(c, tenant_id="t1") is None, "the losing insert left nothing behind"
    assert store.counts([c]) == {"agent_runs": 0, "react_traces": 0, "llm_interactions": 0, "tool_calls": 0}


def test_load_runs_returns_rows_and_traces_in_order(store: RunStore) -> None:
    a, b = run_ids(2)
    store.create_run(new_run(a), [user("q1")])
    store.record_iteration(
        a,
        iteration=1,
        first_index=1,
        traces=[assistant("a1")],
        interaction=None,
        usage=Usage(input_tokens=1, output_tokens=1),
    )
    store.create_run(new_run(b, "t2"), [user("q2")])
    loaded = store.load_runs([b, a, "missing"])
    assert set(loaded) == {a, b}
    assert [t.message.role for t in loaded[a].traces] == ["user", "assistant"]
    assert loaded[b].tenant_id == "t2" and loaded[a].status == "running"


def test_claim_paused_only_once(store: RunStore) -> None:
    (rid,) = run_ids(1)
    store.create_run(new_run(rid), [])
    store.finish_run(
        rid,
        status="waiting_approval",
        answer=None,
        error=None,
        usage=Usage(input_tokens=0, output_tokens=0),
        iterations=1,
    )
    assert store.claim_paused(rid, "t2") is False, "another tenant cannot resume it"
    assert store.claim_paused(rid, "t1") is True
    assert store.claim_paused(rid, "t1") is False


def test_sweep_marks_abandoned_runs_error(store: RunStore) -> None:
    a, b = run_ids(2)
    store.create_run(new_run(a, lease_seconds=10), [user("q")])
    store.create_run(new_run(b, lease_seconds=10_000), [user("q")])
    import time

    assert store.sweep(now=time.time() + 60) == [a]
    detail = store.get_run(a, tenant_id="t1")
    assert detail is not None and detail.status == "error" and "lease" in (detail.error or "")
    assert [t.message.role for t in detail.traces] == ["user"], "traces stay readable"
    assert store.get_run(b, tenant_id="t1").status == "running"  # type: ignore[union-attr]


def test_corrupt_trace_json_is_a_clear_error(sqlite_store: RunStore) -> None:
    (rid,) = run_ids(1)
    sqlite_store.create_run(new_run(rid), [user("q")])
    sqlite_store.db.execute_sql("UPDATE react_traces SET content = '{not json' WHERE run_id = ?", (rid,))
    with pytest.raises(StoreError, match=rf"corrupt JSON in react_traces run {rid} index 0"):
        sqlite_store.get_run(rid, tenant_id="t1")


def test_newer_database_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/db.sqlite"
    s = RunStore(url)
    s.db.execute_sql("INSERT INTO segue_schema_version (version) VALUES (99)")
    s.close()
    with pytest.raises(StoreError, match=r"written by a newer segue .*version 99"):
        RunStore(url)


def test_bad_urls(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="unsupported store URL 'mysql://x'"):
        RunStore("mysql://x")
    with pytest.raises(StoreError, match="cannot open the run store"):
        RunStore("postgresql://nobody:secret@127.0.0.1:1/none")


def test_password_is_not_in_errors() -> None:
    with pytest.raises(StoreError) as info:
        RunStore("postgresql://nobody:hunter2@127.0.0.1:1/none")
    assert "hunter2" not in str(info.value)


def test_two_stores_in_one_process_do_not_mix(tmp_path: Path) -> None:
    one = RunStore(f"sqlite:///{tmp_path}/one.db")
    two = RunStore(f"sqlite:///{tmp_path}/two.db")
    a, b = run_ids(2)
    one.create_run(new_run(a), [])
    two.create_run(new_run(b), [])
    assert [r.run_id for r in one.list_runs(tenant_id="t1")] == [a]
    assert [r.run_id for r in two.list_runs(tenant_id="t1")] == [b]


def test_default_url_is_segue_db_in_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    s = RunStore()
    s.close()
    assert (tmp_path / "segue.db").exists()
    assert json.loads(json.dumps(s.url)) == "sqlite:///segue.db"


def test_lease_deadlines_keep_sub_second_precision(store: RunStore) -> None:
    """Epoch seconds need double precision: PostgreSQL's 4-byte REAL rounded them to about two minutes."""
    import time

    (rid,) = run_ids(1)
    before = time.time()
    store.create_run(new_run(rid, lease_seconds=10), [])
    row = store.models.AgentRun.get_by_id(rid)
    # The deadline is on the database's clock (segue.store.leases): SQLite's 'now' has millisecond resolution.
    assert before + 10 - 0.002 <= row.lease_expires_at <= time.time() + 10 + 0.002
    assert store.sweep(now=before + 9.5) == []
    assert store.sweep(now=time.time() + 10.5) == [rid]


def test_version_one_databases_are_migrated(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/old.db"
    RunStore(url).close()
    old = RunStore(url)
    old.db.execute_sql("DELETE FROM segue_schema_version WHERE version > 1")
    old.close()
    reopened = RunStore(url)
    from segue.store import migrations

    assert migrations.current_version(reopened.db, reopened.models) == migrations.LATEST == 8


def test_version_three_databases_get_the_prewarms_table(tmp_path: Path) -> None:
    """Store schema 4 adds `prewarms` (Agent.prewarm's calls, kept apart from the runs) to a version-3 store."""

    url = f"sqlite:///{tmp_path}/old.db"
    RunStore(url).close()
    old = RunStore(url)
    old.db.execute_sql("DROP TABLE prewarms")
    old.db.execute_sql("DELETE FROM segue_schema_version WHERE version > 3")
    old.close()
    with pytest.raises(StoreError, match="schema version 3"):
        RunStore(url, read_only=True)
    reopened = RunStore(url)
    assert reopened.migrated_from == 3
    assert reopened.db.table_exists("prewarms") and reopened.prewarms.list(tenant_id="t1") == []
    reopened.close()


def test_version_four_databases_get_served_by_on_each_call(tmp_path: Path) -> None:
    """Store schema 5 adds `served_by` to llm_interactions and prewarms, so a call segue's twin answered is never
    read as a vendor's; the calls recorded before keep NULL (read back as absent)."""
    url = f"sqlite:///{tmp_path}/old.db"
    store = RunStore(url)
    (rid,) = run_ids(1)
    store.create_run(new_run(rid), [user("hi")])
    usage = Usage(input_tokens=1, output_tokens=1)
    call = LlmInteraction(iteration=1, vendor="anthropic", model="m", provider_request={}, usage=usage, latency_ms=1)
    store.record_iteration(rid, iteration=1, first_index=1, traces=[assistant("a")], interaction=call,
                           tool_calls=[], usage=usage)  # fmt: skip
    for table in ("llm_interactions", "prewarms"):
        store.db.execute_sql(f"ALTER TABLE {table} DROP COLUMN served_by")
    store.db.execute_sql("DELETE FROM segue_schema_version WHERE version > 4")
    store.close()
    reopened = RunStore(url)
    try:
        assert reopened.migrated_from == 4
        for table in ("llm_interactions", "prewarms"):
            assert "served_by" in [c.name for c in reopened.db.get_columns(table)]
        detail = reopened.get_run(rid, tenant_id="t1")
        assert detail is not None and [c.served_by for c in detail.llm_interactions] == [None]
    finally:
        reopened.close()


def test_stored_usage_moves_to_per_ttl_writes(tmp_path: Path) -> None:
    """Store schema 3: usage saved with `cache_write_1h_tokens` (the 1-hour part of Anthropic's writes, the only
    TTL split segue used to keep) reads back as `cache_write_tokens_by_ttl`, runs and interactions alike."""
    from segue.store import migrations

    url = f"sqlite:///{tmp_path}/old.db"
    store = RunStore(url)
    (rid,) = run_ids(1)
    store.create_run(new_run(rid), [user("hi")])
    usage = Usage(input_tokens=100, output_tokens=1, cache_write_tokens=40)
    interaction = LlmInteraction(
        iteration=1, vendor="anthropic", model="m", provider_request={}, usage=usage, latency_ms=1
    )
    store.record_iteration(rid, iteration=1, first_index=1, traces=[assistant("a")], interaction=interaction,
                           tool_calls=[], usage=usage)  # fmt: skip
    old = json.dumps({"input_tokens": 100, "output_tokens": 1, "cache_write_tokens": 40, "cache_write_1h_tokens": 10})
    store.db.execute_sql("UPDATE agent_runs SET usage = ?", (old,))
    store.db.execute_sql("UPDATE llm_interactions SET usage = ?", (old,))
    store.db.execute_sql("DELETE FROM segue_schema_version WHERE version > 2")
    store.close()
    reopened = RunStore(url)
    assert migrations.current_version(reopened.db, reopened.models) == migrations.LATEST
    detail = reopened.get_run(rid, tenant_id="t1")
    assert detail is not None
    for read in (detail.usage, detail.llm_interactions[0].usage):
        assert (read.cache_write_tokens, read.cache_write_tokens_by_ttl) == (40, {"5m": 30, "1h": 10})
    reopened.close()


def test_postgres_real_columns_become_double_precision() -> None:
    from tests._support.environment import fresh_pg_store

    store = fresh_pg_store()
    store.db.execute_sql('ALTER TABLE "agent_runs" ALTER COLUMN "lease_expires_at" TYPE REAL')
    store.db.execute_sql("DELETE FROM segue_schema_version WHERE version > 1")
    url = store.url
    store.close()
    reopened = RunStore(url)
    (kind,) = reopened.db.execute_sql(
        "SELECT data_type FROM information_schema.columns WHERE table_name = 'agent_runs' "
        "AND column_name = 'lease_expires_at'"
    ).fetchone()
    assert kind == "double precision"
    reopened.close()


def test_version_seven_databases_get_the_parent_links(store: RunStore) -> None:
    """Store schema 8 adds `agent_runs.parent_run_id` (indexed) and `parent_call_id`, which link a sub-run to the
    run and tool call that made it (segue.run.subrun), on SQLite and PostgreSQL; the runs recorded before read back
    as top-level runs, and a sub-run written after the upgrade is found from its parent."""
    from segue.store import migrations

    parent, child = run_ids(2)
    store.create_run(new_run(parent), [user("hi")])
    store.db.execute_sql('DROP INDEX "agent_runs_parent_run_id"')
    for column in ("parent_run_id", "parent_call_id"):
        store.db.execute_sql(f'ALTER TABLE "agent_runs" DROP COLUMN "{column}"')
    store.db.execute_sql("DELETE FROM segue_schema_version WHERE version > 7")
    url = store.url
    store.close()
    reopened = RunStore(url)
    try:
        assert reopened.migrated_from == 7
        assert migrations.current_version(reopened.db, reopened.models) == migrations.LATEST == 8
        columns = {c.name for c in reopened.db.get_columns("agent_runs")}
        assert {"parent_run_id", "parent_call_id"} <= columns
        indexes = {i.name: i.columns for i in reopened.db.get_indexes("agent_runs")}
        assert indexes["agent_runs_parent_run_id"] == ["parent_run_id"]
        old = reopened.get_run(parent, tenant_id="t1")
        assert old is not None and (old.parent_run_id, old.parent_call_id) == (None, None)
        reopened.create_run(new_run(child, parent_run_id=parent, parent_call_id="call_1"), [user("sub-task")])
        [found] = reopened.lineage.children([parent], tenant_id="t1")
        assert (found.run_id, found.parent_run_id, found.parent_call_id) == (child, parent, "call_1")
        assert reopened.lineage.children([parent], tenant_id="t2") == []
    finally:
        reopened.close()
