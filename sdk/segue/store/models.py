"""Peewee models of the run store. JSON columns are TEXT so SQLite and PostgreSQL share one code path.

Every text column follows one rule on both databases (segue.store.text): NUL characters and lone surrogates
round-trip the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import peewee as pw

from segue.store.text import CharField, TextField


class BaseModel(pw.Model):
    """Unbound: each RunStore binds its own subclasses (see `bind`), so two stores never share a connection."""

    class Meta:
        legacy_table_names = False


class SchemaVersion(BaseModel):
    version = pw.IntegerField()

    class Meta:
        table_name = "segue_schema_version"


class AgentRun(BaseModel):
    id = CharField(primary_key=True, max_length=26)  # ULID: sortable by creation time
    tenant_id = CharField(max_length=200, index=True)
    agent_name = CharField(max_length=200, index=True)
    status = CharField(max_length=32, index=True)
    input = TextField()
    answer = TextField(null=True)
    model = CharField(max_length=200)
    vendor = CharField(max_length=100)
    meta = TextField(default="{}")  # segue.* keys only: prefix, replay, layout, request, tools, pending
    metadata = TextField(default="{}")  # the app's own metadata, never mixed with meta
    private = TextField(null=True)  # never returned by reads (e.g. the PII guardrail's mapping)
    idempotency_key = CharField(max_length=200, null=True)
    fingerprint = CharField(max_length=80, null=True)
    retry_of = CharField(max_length=26, null=True)
    continued_from = CharField(max_length=26, null=True, index=True)
    # A sub-run (an agent offered as a tool, segue.subagents): the run whose tool call made it, and that call.
    parent_run_id = CharField(max_length=26, null=True, index=True)
    parent_call_id = CharField(max_length=200, null=True)
    usage = TextField(default='{"input_tokens": 0, "output_tokens": 0}')
    iterations = pw.IntegerField(default=0)
    created_at = CharField(max_length=32, index=True)  # ISO 8601 UTC, lexicographically sortable
    finished_at = CharField(max_length=32, null=True)
    # Epoch seconds: DOUBLE PRECISION, not Peewee's FloatField, which PostgreSQL stores as 4-byte REAL (~2 min
    # resolution at today's epoch).
    lease_expires_at = pw.DoubleField(null=True)  # a running run whose lease lapsed was abandoned
    # Who holds the lease: a token the writer chose when it created, resumed or recovered the run. Every write of
    # a running run names it, so a process that lost the run (swept, recovered elsewhere) cannot write over it.
    lease_owner = CharField(max_length=32, null=True)
    error = TextField(null=True)

    class Meta:
        table_name = "agent_runs"
        indexes = ((("tenant_id", "idempotency_key"), True),)


class ReactTrace(BaseModel):
    id = pw.AutoField()
    run_id = CharField(max_length=26)
    idx = pw.IntegerField()
    iteration = pw.IntegerField(default=0)
    role = CharField(max_length=16)
    content = TextField()  # canonical content blocks, JSON
    meta = TextField(null=True)

    class Meta:
        table_name = "react_traces"
        indexes = ((("run_id", "idx"), True),)


class LlmInteractionRow(BaseModel):
    id = pw.AutoField()
    run_id = CharField(max_length=26, index=True)
    iteration = pw.IntegerField()
    vendor = CharField(max_length=100)
    model = CharField(max_length=200)
    provider_request = TextField()  # the body's skeleton; its repeated parts are in request_parts (store.bodies)
    request_headers = TextField(null=True)
    provider_response = TextField(null=True)
    usage = TextField()
    latency_ms = pw.DoubleField()
    error = TextField(null=True)
    served_by = CharField(max_length=16, null=True)  # "vendor" or "twin" (segue's emulator); NULL: older rows

    class Meta:
        table_name = "llm_interactions"


class ToolCallRow(BaseModel):
    id = pw.AutoField()
    run_id = CharField(max_length=26, index=True)
    iteration = pw.IntegerField()
    call_id = CharField(max_length=200)
    name = CharField(max_length=200)
    arguments = TextField()
    result = TextField(null=True)
    is_error = pw.BooleanField(default=False)
    duration_ms = pw.DoubleField()

    class Meta:
        table_name = "tool_calls"


class RunTag(BaseModel):
    """One top-level key of a run's app metadata, so metadata filters are plain indexed equality joins."""

    id = pw.AutoField()
    run_id = CharField(max_length=26, index=True)
    key = CharField(max_length=200)
    value = TextField()  # canonical JSON of the value

    class Meta:
        table_name = "run_tags"
        indexes = ((("key", "value"), False),)


class PrewarmRow(BaseModel):
    """One prewarm (Agent.prewarm): its provider call, kept apart from the runs so that it is never listed,
    replayed or counted as one."""

    id = CharField(primary_key=True, max_length=26)  # ULID
    tenant_id = CharField(max_length=200, index=True)
    agent_name = CharField(max_length=200)
    runs = TextField(default="[]")  # the replayed run ids whose prefix was warmed, JSON
    vendor = CharField(max_length=100)
    model = CharField(max_length=200)
    provider_request = TextField()  # the body's skeleton, as in llm_interactions
    request_headers = TextField(null=True)
    provider_response = TextField(null=True)
    usage = TextField()
    latency_ms = pw.DoubleField()
    created_at = CharField(max_length=32, index=True)
    served_by = CharField(max_length=16, null=True)  # as llm_interactions.served_by

    class Meta:
        table_name = "prewarms"


class RequestPart(BaseModel):
    """A part of stored request bodies (an element of a list field, a node of a list's tree, a long field),
    written once and shared by every call whose body holds it (segue.store.bodies)."""

    key = CharField(primary_key=True, max_length=32)  # hash of the text
    body = TextField()

    class Meta:
        table_name = "request_parts"


ALL_MODELS: list[type[BaseModel]] = [
    SchemaVersion,
    AgentRun,
    ReactTrace,
    LlmInteractionRow,
    ToolCallRow,
    RunTag,
    PrewarmRow,
    RequestPart,
]


class Bound:
    """The models bound to one database. Peewee binds a model class to one database globally, so each store
    gets fresh subclasses instead of re-binding shared classes (which would race between threads)."""

    def __init__(self, db: pw.Database) -> None:
        def sub(model: type[BaseModel]) -> Any:
            meta = type("Meta", (), {"database": db, "table_name": model._meta.table_name})
            return type(model.__name__, (model,), {"Meta": meta, "__module__": __name__})

        self.SchemaVersion = sub(SchemaVersion)
        self.AgentRun = sub(AgentRun)
        self.ReactTrace = sub(ReactTrace)
        self.LlmInteractionRow = sub(LlmInteractionRow)
        self.ToolCallRow = sub(ToolCallRow)
        self.RunTag = sub(RunTag)
        self.PrewarmRow = sub(PrewarmRow)
        self.RequestPart = sub(RequestPart)
        self.all: list[Any] = [
            self.SchemaVersion,
            self.AgentRun,
            self.ReactTrace,
            self.LlmInteractionRow,
            self.ToolCallRow,
            self.RunTag,
            self.PrewarmRow,
            self.RequestPart,
        ]
