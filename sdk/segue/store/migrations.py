"""The store's schema version table and forward migrations.

Each migration moves the database from version N-1 to N inside one transaction. A database written by a newer
segue (a version above the last migration here) is refused, never downgraded. Only writers migrate: a read-only
store checks the version and refuses any other (`segue db migrate` upgrades a store explicitly).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import peewee as pw

from segue.errors import StoreError
from segue.store.bodies import FORMAT, Bodies
from segue.store.connection import no_store, read_only_fallback
from segue.store.models import Bound
from segue.store.rows import loads


def _v1(db: pw.Database, models: Bound) -> None:
    db.create_tables([t for t in models.all if t not in (models.PrewarmRow, models.RequestPart)])


def _v2(db: pw.Database, models: Bound) -> None:
    """Float columns become double precision. SQLite's REAL already is; PostgreSQL's REAL is 4 bytes, which
    rounded lease deadlines (epoch seconds) to about two minutes."""
    if isinstance(db, pw.PostgresqlDatabase):
        for table, column in (
            ("agent_runs", "lease_expires_at"),
            ("llm_interactions", "latency_ms"),
            ("tool_calls", "duration_ms"),
        ):
            db.execute_sql(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" TYPE DOUBLE PRECISION')  # type: ignore[no-untyped-call]


def _v3(db: pw.Database, models: Bound) -> None:
    """Usage JSON: `cache_write_1h_tokens` (the 1-hour part of Anthropic's cache writes, the only TTL split a
    usage record used to carry) becomes `cache_write_tokens_by_ttl`, which keys writes by any vendor's TTL names.
    The rest of the writes were 5-minute ones: Anthropic offered no other lifetime."""
    for table in (models.AgentRun, models.LlmInteractionRow):
        found = table.select(table.id, table.usage).where(table.usage.contains('"cache_write_1h_tokens"'))
        for row in list(found.tuples()):
            usage = _usage_by_ttl(json.loads(row[1]))
            table.update(usage=json.dumps(usage)).where(table.id == row[0]).execute()


def _usage_by_ttl(usage: dict[str, Any]) -> dict[str, Any]:
    hour = usage.pop("cache_write_1h_tokens", None)
    if isinstance(hour, int):
        rest = max((usage.get("cache_write_tokens") or 0) - hour, 0)
        usage["cache_write_tokens_by_ttl"] = {"5m": rest, "1h": hour}
    return usage


def _v4(db: pw.Database, models: Bound) -> None:
    """The prewarms table (Agent.prewarm): a prewarm's provider call is recorded apart from the runs."""
    db.create_tables([models.PrewarmRow])


def _v5(db: pw.Database, models: Bound) -> None:
    """`served_by` on each provider call: "twin" when segue's twin answered, so an emulated answer is never read
    as a vendor's. Older calls keep NULL (they predate the twin being recorded). A table created at version 1 or
    4 by this segue has the column already (those steps create the tables from today's models)."""
    for table in ("llm_interactions", "prewarms"):
        if all(column.name != "served_by" for column in db.get_columns(table)):
            db.execute_sql(f'ALTER TABLE "{table}" ADD COLUMN "served_by" VARCHAR(16)')  # type: ignore[no-untyped-call]


def _v6(db: pw.Database, models: Bound) -> None:
    """Request bodies are stored once (segue.store.bodies): each call's `provider_request` becomes a skeleton,
    and the parts it shares with other calls move to `request_parts`, written once."""
    db.create_tables([models.RequestPart])
    bodies = Bodies(models.RequestPart)
    for table in (models.LlmInteractionRow, models.PrewarmRow):
        last: Any = None
        while True:
            query = table.select(table.id, table.provider_request).order_by(table.id).limit(200)
            rows = list((query if last is None else query.where(table.id > last)).tuples())
            if not rows:
                break
            for row_id, text in rows:
                body = loads(text, f"{table._meta.table_name} {row_id}")
                if isinstance(body, dict) and FORMAT in body:
                    continue  # already a skeleton (a store whose version row was lost: the step runs again)
                skeleton, parts = bodies.prepare(body)
                bodies.insert(parts)
                bodies.written(parts)
                table.update(provider_request=skeleton).where(table.id == row_id).execute()
            last = rows[-1][0]


def _v7(db: pw.Database, models: Bound) -> None:
    """`agent_runs.lease_owner`: the token of the process holding a running run's lease, so that a run's status
    changes only from a state that allows it and only by its holder (a compare-and-set on every write). Older rows
    keep NULL: no holder to check (they were written before holders were named)."""
    if all(column.name != "lease_owner" for column in db.get_columns("agent_runs")):
        db.execute_sql('ALTER TABLE "agent_runs" ADD COLUMN "lease_owner" VARCHAR(32)')  # type: ignore[no-untyped-call]


def _v8(db: pw.Database, models: Bound) -> None:
    """`agent_runs.parent_run_id` and `parent_call_id`: a sub-run (an agent offered to another as a tool) names the
    run whose tool call made it and that call, so the runs of a conversation read as a tree and a sub-agent's
    earlier runs are found from its parent's. Indexed on the parent: every read of a tree asks for a run's
    children. Older rows keep NULL (top-level runs). A table created at version 1 by this segue has them already."""
    columns = {column.name for column in db.get_columns("agent_runs")}
    if "parent_run_id" not in columns:
        db.execute_sql('ALTER TABLE "agent_runs" ADD COLUMN "parent_run_id" VARCHAR(26)')  # type: ignore[no-untyped-call]
    if "parent_call_id" not in columns:
        db.execute_sql('ALTER TABLE "agent_runs" ADD COLUMN "parent_call_id" VARCHAR(200)')  # type: ignore[no-untyped-call]
    # The name Peewee gives the model's index (agent_runs_parent_run_id), so both ways of getting there agree.
    if all(index.columns != ["parent_run_id"] for index in db.get_indexes("agent_runs")):
        db.execute_sql('CREATE INDEX "agent_runs_parent_run_id" ON "agent_runs" ("parent_run_id")')  # type: ignore[no-untyped-call]


#: version -> migration that produces it, in order.
MIGRATIONS: list[tuple[int, Callable[[pw.Database, Bound], None]]] = [
    (1, _v1),
    (2, _v2),
    (3, _v3),
    (4, _v4),
    (5, _v5),
    (6, _v6),
    (7, _v7),
    (8, _v8),
]
LATEST = MIGRATIONS[-1][0]
MIGRATION_LOCK = int.from_bytes(b"segue-db")  # the PostgreSQL advisory lock key migrations hold


def current_version(db: pw.Database, models: Bound) -> int:
    if not db.table_exists(models.SchemaVersion._meta.table_name):
        return 0
    row = models.SchemaVersion.select(pw.fn.MAX(models.SchemaVersion.version)).scalar()
    return int(row or 0)


def check(db: pw.Database, models: Bound, url: str) -> int:
    """For read-only opens: the database's version, which must be LATEST (readers never migrate)."""
    if not db.table_exists(models.SchemaVersion._meta.table_name):
        raise StoreError(f"{url} is not a segue run store (it has no {models.SchemaVersion._meta.table_name} table)")
    found = current_version(db, models)
    if found > LATEST:
        raise StoreError(_newer(url, found))
    if found < LATEST:
        raise StoreError(
            f"the run store at {url} has schema version {found}; this segue reads version {LATEST}: "
            f"upgrade it with `segue db migrate --db URL` (any writer, such as an Agent, also upgrades it)"
        )
    return found


def check_schema(db: pw.Database, models: Bound, shown: str) -> None:
    """For read-only opens: `check`, falling back to reading a WAL database on read-only media as immutable."""
    try:
        check(db, models, shown)
    except pw.OperationalError as e:
        # A WAL file on read-only media: `mode=ro` needs a -shm file it cannot create; immutable reads it.
        cannot_share = any(m in str(e) for m in ("unable to open database file", "readonly database"))
        if not cannot_share or not read_only_fallback(db):
            raise
        try:
            db.connect()
            check(db, models, shown)
        except pw.OperationalError as still:
            raise StoreError(
                f"cannot read the run store at {shown} on read-only media ({' '.join(str(still).split())}): "
                f"SQLite cannot create the -shm file it needs to read the database's -wal file there; copy "
                f"the database and its -wal file to a writable folder and read the copy"
            ) from None


def _newer(url: str, found: int) -> str:
    return (
        f"the database at {url} was written by a newer segue (store schema version {found}; this segue "
        f"knows up to {LATEST}); upgrade segue to read it"
    )


def migrate(db: pw.Database, models: Bound, url: str, *, create: bool = True) -> int:
    """Bring the database to LATEST; returns the version found before. `create=False`: a database without segue's
    tables is refused rather than made a store."""
    with db.atomic():
        if isinstance(db, pw.PostgresqlDatabase):
            # Writers that start together on a new database would each create the tables, and all but one fail:
            # one migrates at a time (SQLite's `BEGIN IMMEDIATE` does the same), the others then find it done.
            db.execute_sql("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))  # type: ignore[no-untyped-call]
        found = current_version(db, models)
        if found > LATEST:
            raise StoreError(_newer(url, found))
        if found == 0 and not create:
            raise StoreError(no_store(url, f"the database has no {models.SchemaVersion._meta.table_name} table"))
        for version, step in MIGRATIONS:
            if version > found:
                step(db, models)
                models.SchemaVersion.create(version=version)
    return found
