"""RunStore: where runs, their traces, provider calls and tool calls live.

SQLite is the embedded default (`RunStore()` -> ./segue.db, WAL, busy timeout); `RunStore("postgresql://...")`
runs the same code on PostgreSQL. Methods are synchronous and thread-safe; the agent calls them off the event
loop. Every read takes a tenant and never returns another tenant's rows.

Writers migrate the schema when they open the store, creating it if needed unless `create=False` (what
`segue runs sweep` and `segue db migrate` without `--create` use: a mistyped path is refused, not made into an
empty store); `RunStore(url, read_only=True)` (what `segue runs ...` and the dashboard use) never creates or
changes anything and refuses a store whose schema is not the current one.
Each method is one unit of work (segue.store.connection): a lost PostgreSQL connection is reopened and the unit
run once more when that is safe, and every database failure is a StoreError with the real cause.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, cast

import peewee as pw

from segue._core.hashing import canonical_json
from segue.errors import StoreError
from segue.generated import (
    ImageBlock,
    LlmInteraction,
    Message,
    RunDetail,
    RunMeta,
    RunStatus,
    RunSummary,
    ToolCallRecord,
    Usage,
    get_converter,
)
from segue.store import migrations
from segue.store.bodies import Bodies
from segue.store.connection import DEFAULT_RECONNECT_SECONDS, Units, open_database, redact
from segue.store.leases import LeaseLost, Leases
from segue.store.lineage import Lineage  # sub-runs: store.lineage.children(...)
from segue.store.migrations import check_schema
from segue.store.models import Bound
from segue.store.prewarms import Prewarms
from segue.store.records import DEFAULT_TENANT, MAX_OFFSET, TERMINAL, IdempotencyKeyTaken, NewRun, StoredRun, utc_now
from segue.store.repeats import Metas, StoredMeta
from segue.store.rows import (
    MessageCache,
    detail_from_rows,
    interaction_columns,
    replay_sql,
    stored_runs,
    summary_from_row,
    trace_rows,
)
from segue.store.statements import Statements
from segue.store.text import decode
from segue.store.tool_calls import ToolCalls

DEFAULT_URL = "sqlite:///segue.db"


class RunStore:
    """Runs and their traces. `RunStore()` opens ./segue.db; pass a URL for another file or PostgreSQL.

    `create=False` opens an existing store only: a SQLite file that does not exist, or a database without segue's
    tables, is a StoreError naming it, and nothing is created or changed."""

    def __init__(
        self,
        url: str | None = None,
        *,
        read_only: bool = False,
        create: bool = True,
        reconnect_seconds: float = DEFAULT_RECONNECT_SECONDS,
    ) -> None:
        # Peewee logs each statement with its parameters at DEBUG (run inputs, the PII mapping): INFO unless set.
        peewee_log = logging.getLogger("peewee")
        if peewee_log.level == logging.NOTSET:
            peewee_log.setLevel(logging.INFO)
        self.url = url or DEFAULT_URL
        self.read_only = read_only
        self.db = open_database(self.url, read_only=read_only, create=create)
        self.models = Bound(self.db)
        self._messages = MessageCache()
        self.is_sqlite = isinstance(self.db, pw.SqliteDatabase)
        self._units = Units(self.db, self.url, reconnect_seconds=reconnect_seconds)
        self.bodies = Bodies(self.models.RequestPart)
        self._writes = Statements(self.db)  # the journal's per-step writes, their SQL made once
        self._metas = Metas(self.bodies)  # what a conversation's runs repeat, stored once (segue.store.repeats)
        self.prewarms = Prewarms(self.models, self._units, self.bodies)
        self.leases = Leases(self.db, self.models, self._units)
        self.lineage = Lineage(self.models, self._units, self._metas)
        # tool rows, and a finished call's images
        self.tool_calls = ToolCalls(self.models, self.bodies, self._units, self._writes)
        shown = redact(self.url)
        #: The schema version found when a writer opened the store (before migrating); None for readers.
        self.migrated_from: int | None = None
        try:
            self.db.connect(reuse_if_open=True)
            if read_only:
                check_schema(self.db, self.models, shown)
            else:
                self.migrated_from = migrations.migrate(self.db, self.models, shown, create=create)
        except pw.ImproperlyConfigured as e:
            raise StoreError(
                f"cannot open the run store at {shown}: the PostgreSQL driver (psycopg2) is not installed "
                f"({str(e).rstrip('.')}); install it with pip install 'segue[postgres]'"
            ) from None
        except pw.PeeweeException as e:
            self.db.dispose()
            message = " ".join(str(e).split())
            if "file is not a database" in message:
                raise StoreError(f"{shown} is not a SQLite database ({message}); pass a segue run store") from None
            raise StoreError(f"cannot open the run store at {shown}: {message}") from None

    def close(self) -> None:
        self._units.close()

    # -- writes used by the agent -----------------------------------------------------------------------------
    def create_run(self, run: NewRun, traces: Sequence[Message]) -> None:
        """The run row, its tags and first traces, atomically. Raises IdempotencyKeyTaken on a key clash."""
        now = utc_now()
        meta = self._metas.store(run.meta)

        def work() -> None:
            self.bodies.insert(meta.parts)
            self.models.AgentRun.insert(
                id=run.run_id,
                tenant_id=run.tenant_id,
                agent_name=run.agent_name,
                status="running",
                input=run.input,
                model=run.model,
                vendor=run.vendor,
                meta=canonical_json(meta.value),
                metadata=canonical_json(run.metadata),
                private=canonical_json(run.private) if run.private else None,
                idempotency_key=run.idempotency_key,
                fingerprint=run.fingerprint,
                retry_of=run.retry_of,
                continued_from=run.continued_from,
                parent_run_id=run.parent_run_id,
                parent_call_id=run.parent_call_id,
                created_at=now,
                lease_expires_at=self.leases.deadline(run.lease_seconds),
                lease_owner=run.lease_owner,
            ).execute()
            if run.metadata:
                self.models.RunTag.insert_many(
                    [{"run_id": run.run_id, "key": k, "value": canonical_json(v)} for k, v in run.metadata.items()]
                ).execute()
            self._insert_traces(run.run_id, 0, 0, traces)

        try:
            # Not idempotent (a second insert would clash), so it runs again only when it surely did not commit.
            self._units.write(work, idempotent=False)
            self.bodies.written(meta.parts)
        except pw.IntegrityError as e:
            if run.idempotency_key is not None:
                raise IdempotencyKeyTaken(run.idempotency_key) from e
            raise

    def _insert_traces(self, run_id: str, first_index: int, iteration: int, traces: Sequence[Message]) -> None:
        self._writes.insert(self.models.ReactTrace, trace_rows(run_id, first_index, iteration, traces))

    def record_iteration(
        self,
        run_id: str,
        *,
        iteration: int,
        first_index: int,
        traces: Sequence[Message],
        interaction: LlmInteraction | None,
        tool_calls: Sequence[ToolCallRecord] = (),
        usage: Usage,
        lease_seconds: float | None = None,
        meta_updates: RunMeta | None = None,
        model: str | None = None,
        vendor: str | None = None,
        owner: str | None = None,
    ) -> None:
        """One loop iteration's traces, provider call and tool calls, plus the running totals, atomically.

        `traces` are the run's new messages, stored from index `first_index` on (a run's traces only ever grow at
        the end). `meta_updates` merge into the run's segue.* meta and `model` / `vendor` name who served, in the
        same transaction. The run must be `running` and held by `owner` (when given), else LeaseLost and nothing
        is written."""
        conv = get_converter()
        skeleton, parts = self.bodies.prepare(interaction.provider_request) if interaction else ("", {})
        meta = self._metas.store(meta_updates) if meta_updates is not None else None

        def work() -> None:
            update: dict[Any, Any] = {
                self.models.AgentRun.usage: json.dumps(conv.unstructure(usage, Usage)),
                self.models.AgentRun.iterations: iteration,
            }
            if lease_seconds:
                update[self.models.AgentRun.lease_expires_at] = self.leases.deadline(lease_seconds)
            # The run row first: a run this process no longer holds gets nothing written.
            self._update_run(run_id, update, meta, model, vendor, owner=owner, running=True)
            self._insert_traces(run_id, first_index, iteration, traces)
            if interaction is not None:
                self.bodies.insert(parts)
                self._writes.insert(self.models.LlmInteractionRow, [{
                    "run_id": run_id, "iteration": interaction.iteration, "error": interaction.error,
                    **interaction_columns(interaction, skeleton),
                }])  # fmt: skip
            for call in tool_calls:
                self.tool_calls.write(run_id, call)

        self._units.write(work, idempotent=False)
        self.bodies.written([*parts, *(meta.parts if meta else ())])

    def record_tool_call(
        self,
        run_id: str,
        call: ToolCallRecord,
        *,
        lease_seconds: float | None = None,
        owner: str | None = None,
        images: Sequence[ImageBlock] = (),
    ) -> None:
        """One tool call's result and the `images` it returned (`tool_calls.images` reads them) as it completes,
        renewing the run's lease; LeaseLost (nothing written) unless the run is `running` and held by `owner`."""

        def work() -> None:
            update: dict[Any, Any] = {}
            if lease_seconds:
                update[self.models.AgentRun.lease_expires_at] = self.leases.deadline(lease_seconds)
            else:
                update[self.models.AgentRun.status] = "running"  # an update with nothing else to set
            self._update_run(run_id, update, None, None, None, owner=owner, running=True)
            self.tool_calls.write(run_id, call, images)

        self._units.write(work, idempotent=False)

    def record_tool_starts(self, run_id: str, calls: Sequence[ToolCallRecord], *, owner: str | None = None) -> None:
        """Tool calls that may not run twice are starting: their rows without a result, so that a recovered run
        knows they were in flight (segue.run.recovery). LeaseLost (nothing written) unless the run is this
        holder's."""

        def work() -> None:
            update = {self.models.AgentRun.status: "running"}  # the compare-and-set on the holder, nothing else
            self._update_run(run_id, update, None, None, None, owner=owner, running=True)
            self.tool_calls.starts(run_id, calls)

        self._units.write(work, idempotent=False)

    def _update_run(
        self,
        run_id: str,
        update: dict[Any, Any],
        meta_updates: StoredMeta | None,
        model: str | None,
        vendor: str | None,
        *,
        owner: str | None = None,
        running: bool = False,
    ) -> int:
        """Inside a write: set `update` on the run row, plus who served and the merged segue.* meta. `running`:
        only while the run is `running` and held by `owner` (when given); otherwise LeaseLost, and the caller's
        transaction rolls back."""
        runs = self.models.AgentRun
        if model:
            update[runs.model] = model
        if vendor:
            update[runs.vendor] = vendor
        if meta_updates is not None:
            row = self._writes.first(runs, ["meta"], {"id": run_id})
            if row is not None:
                self.bodies.insert(meta_updates.parts)
                update[runs.meta] = canonical_json({**json.loads(row[0]), **meta_updates.value})
        where: dict[str, Any] = {"id": run_id}
        if running:
            where["status"] = "running"
            if owner is not None:
                where["lease_owner"] = owner
        changed = self._writes.update(runs, {field.name: value for field, value in update.items()}, where)
        if running and not changed:
            held = runs.select(runs.status, runs.error).where(runs.id == run_id).first()
            raise LeaseLost(run_id, held.status if held else None, held.error if held else None)
        return changed

    def finish_run(
        self,
        run_id: str,
        *,
        status: RunStatus,
        answer: str | None,
        error: str | None,
        usage: Usage,
        iterations: int,
        meta_updates: RunMeta | None = None,
        model: str | None = None,
        vendor: str | None = None,
        private: dict[str, Any] | None = None,
        owner: str | None = None,
        first_index: int = 0,
        traces: Sequence[Message] = (),
    ) -> None:
        """Set the final (or paused) state, with the run's `traces` not yet stored (from `first_index` on);
        meta_updates merge into the run's segue.* meta.

        A compare-and-set: only a `running` run held by `owner` (when given) ends; otherwise LeaseLost names what
        the store holds, and nothing changes. The same end by the same holder again (the retry of a write after a
        lost connection) writes the same values: the status does not change."""
        conv = get_converter()
        runs = self.models.AgentRun
        meta = self._metas.store(meta_updates) if meta_updates is not None else None

        def work() -> None:
            update: dict[Any, Any] = {
                self.models.AgentRun.status: status,
                self.models.AgentRun.answer: answer,
                self.models.AgentRun.error: error,
                self.models.AgentRun.usage: json.dumps(conv.unstructure(usage, Usage)),
                self.models.AgentRun.iterations: iterations,
                self.models.AgentRun.finished_at: utc_now() if status in TERMINAL else None,
                self.models.AgentRun.lease_expires_at: None,
            }
            if private:
                update[self.models.AgentRun.private] = canonical_json(private)
            try:
                self._update_run(run_id, update, meta, model, vendor, owner=owner, running=True)
            except LeaseLost:
                held = runs.select(runs.status, runs.lease_owner).where(runs.id == run_id).first()
                same_holder = owner is None or (held is not None and held.lease_owner == owner)
                if held is None or held.status != status or status == "running" or not same_holder:
                    raise
                # The same end by the same holder (the retry of a write that committed): the same values again.
                self._update_run(run_id, update, meta, model, vendor)
                return
            self._insert_traces(run_id, first_index, iterations, traces)

        # Idempotent: once it committed, running it again finds its end recorded and changes nothing.
        self._units.write(work, idempotent=True)
        self.bodies.written(meta.parts if meta else ())

    def claim_paused(
        self, run_id: str, tenant_id: str, *, lease_seconds: float | None = None, owner: str | None = None
    ) -> bool:
        """Move a waiting_approval run back to running, held by `owner` (segue.store.leases)."""
        return self.leases.claim_paused(run_id, tenant_id, lease_seconds=lease_seconds, owner=owner)

    def sweep(
        self, *, now: float | None = None, grace: float = 0.0, reason: str = "abandoned: the run's lease expired"
    ) -> list[str]:
        """End running runs whose lease lapsed more than `grace` seconds ago as `error` (segue.store.leases)."""
        return self.leases.sweep(now=now, grace=grace, reason=reason)

    # -- reads ------------------------------------------------------------------------------------------------

    def find_idempotent(self, tenant_id: str, key: str) -> tuple[str, str | None] | None:
        """(run id, fingerprint) of this tenant's run holding `key`, if any."""

        def work() -> Any:
            return (
                self.models.AgentRun.select(self.models.AgentRun.id, self.models.AgentRun.fingerprint)
                .where((self.models.AgentRun.tenant_id == tenant_id) & (self.models.AgentRun.idempotency_key == key))
                .first()
            )

        row = self._units.read(work)
        return (row.id, row.fingerprint) if row else None

    def load_runs(self, run_ids: Sequence[str]) -> dict[str, StoredRun]:
        """Rows and traces of `run_ids` in ONE query (a left join), for replay, retry and resume.

        Tenant checks are the caller's: replay must tell `not_found` from `tenant_mismatch`.
        """
        if not run_ids:
            return {}
        ids = list(dict.fromkeys(run_ids))

        def work() -> tuple[list[tuple[Any, ...]], dict[str, RunMeta]]:
            cursor = self.db.execute_sql(replay_sql(self.models, len(ids)), ids)  # type: ignore[no-untyped-call]
            # Raw SQL skips the fields' conversion: apply the store's text rule here.
            rows = [tuple(decode(v) if isinstance(v, str) else v for v in row) for row in cursor.fetchall()]
            heads = {row[0]: row[5] for row in rows}
            metas = self._metas.read([(text, f"agent_runs.meta of run {run_id}") for run_id, text in heads.items()])
            return rows, dict(zip(heads, metas, strict=True))

        rows, metas = self._units.read(work)
        return stored_runs(rows, self._messages, metas)

    def list_runs(
        self,
        *,
        tenant_id: str = DEFAULT_TENANT,
        status: RunStatus | None = None,
        agent_name: str | None = None,
        metadata_filter: dict[str, Any] | None = None,
        continued_from: str | None = None,
        limit: int = 50,
        offset: int = 0,
        all_tenants: bool = False,
    ) -> list[RunSummary]:
        """This tenant's runs, newest first. `all_tenants=True` is for operators (CLI --admin, dashboard)."""
        if limit < 0 or not 0 <= offset <= MAX_OFFSET:
            raise ValueError(f"limit must be >= 0 and offset in 0..{MAX_OFFSET:,}, got limit={limit} offset={offset}")
        query = self.models.AgentRun.select()
        if not all_tenants:
            query = query.where(self.models.AgentRun.tenant_id == tenant_id)
        if status is not None:
            query = query.where(self.models.AgentRun.status == status)
        if agent_name is not None:
            query = query.where(self.models.AgentRun.agent_name == agent_name)
        if continued_from is not None:
            query = query.where(self.models.AgentRun.continued_from == continued_from)
        for i, (key, value) in enumerate(sorted((metadata_filter or {}).items())):
            tag = self.models.RunTag.alias(f"tag{i}")
            query = query.join(tag, on=(tag.run_id == self.models.AgentRun.id)).where(
                (tag.key == key) & (tag.value == canonical_json(value))
            )
        query = query.order_by(self.models.AgentRun.id.desc()).limit(limit).offset(offset)

        def work() -> list[RunSummary]:
            rows = list(query)
            metas = self._metas.read([(r.meta, f"agent_runs.meta of run {r.id}") for r in rows])
            return [summary_from_row(r, m) for r, m in zip(rows, metas, strict=True)]

        return self._units.read(work)

    def get_run(self, run_id: str, *, tenant_id: str = DEFAULT_TENANT, all_tenants: bool = False) -> RunDetail | None:
        """The run with its traces, provider calls and tool calls; None if absent or another tenant's."""

        def work() -> tuple[Any, RunMeta, list[tuple[Any, ...]], list[Any], list[dict[str, Any]], list[Any]] | None:
            row = self.models.AgentRun.get_or_none(self.models.AgentRun.id == run_id)
            if row is None or (not all_tenants and row.tenant_id != tenant_id):
                return None
            trace_rows = cast(
                list[tuple[Any, ...]],
                list(
                    self.models.ReactTrace.select()
                    .where(self.models.ReactTrace.run_id == run_id)
                    .order_by(self.models.ReactTrace.idx)
                    .tuples()
                ),
            )
            calls = list(
                self.models.LlmInteractionRow.select()
                .where(self.models.LlmInteractionRow.run_id == run_id)
                .order_by(self.models.LlmInteractionRow.id)
            )
            tools = list(
                self.models.ToolCallRow.select()
                .where(self.models.ToolCallRow.run_id == run_id)
                .order_by(self.models.ToolCallRow.id)
            )
            bodies = self.bodies.read([(c.provider_request, f"llm_interactions {c.id}") for c in calls])
            [meta] = self._metas.read([(row.meta, f"agent_runs.meta of run {run_id}")])
            return row, meta, trace_rows, calls, bodies, tools

        found = self._units.read(work)
        return None if found is None else detail_from_rows(*found)

    def schema_version(self) -> int:
        """The store's schema version (segue.store.migrations)."""
        return self._units.read(lambda: migrations.current_version(self.db, self.models))

    def tenants(self, limit: int = 20) -> list[tuple[str, int]]:
        """(tenant, number of runs), most runs first: for operators (the CLI's hint when a list is empty)."""
        runs = self.models.AgentRun
        query = (
            runs.select(runs.tenant_id, pw.fn.COUNT(runs.id).alias("n"))
            .group_by(runs.tenant_id)
            .order_by(pw.fn.COUNT(runs.id).desc(), runs.tenant_id)
            .limit(limit)
        )
        return self._units.read(lambda: [(r.tenant_id, int(r.n)) for r in query])

    def counts(self, run_ids: Sequence[str] | None = None) -> dict[str, int]:
        """Row counts per table (for load checks and tests)."""
        tables: dict[str, Any] = {
            "agent_runs": self.models.AgentRun,
            "react_traces": self.models.ReactTrace,
            "llm_interactions": self.models.LlmInteractionRow,
            "tool_calls": self.models.ToolCallRow,
        }

        def work() -> dict[str, int]:
            out = {}
            for name, model in tables.items():
                query = model.select()
                if run_ids is not None:
                    column = model.id if model is self.models.AgentRun else model.run_id
                    query = query.where(column.in_(list(run_ids)))
                out[name] = query.count()
            return out

        return self._units.read(work)
