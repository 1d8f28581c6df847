"""Turning stored rows back into canonical objects: JSON columns, the run meta, trace messages (cached), run
summaries and details, the runs replay reads."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import peewee as pw

from segue._core.hashing import message_json
from segue._core.run_text import question, replay_text
from segue._core.usage import cache_parts
from segue.errors import StoreError
from segue.generated import (
    CacheVerdict,
    LlmInteraction,
    Message,
    PendingApproval,
    RunDetail,
    RunMeta,
    RunStatus,
    RunSummary,
    ToolCallRecord,
    Trace,
    Usage,
    get_converter,
)
from segue.store.models import AgentRun, Bound
from segue.store.records import StoredRun


def loads(text: str | None, where: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise StoreError(f"corrupt JSON in {where}: {e}; the row was modified outside segue") from None


@functools.cache
def _message_hook() -> Any:
    return get_converter().get_structure_hook(Message)


class MessageCache:
    """Structured trace messages keyed by their exact stored text.

    Replays re-read the same (immutable, terminal) runs turn after turn; structuring and canonicalising their
    JSON dominated planning. Keyed by the stored text itself, a hit is always the same message. When full it
    starts over (cheaper than LRU bookkeeping on every read; single dict operations need no lock).
    """

    def __init__(self, size: int = 50_000) -> None:
        self._size = size
        self._entries: dict[tuple[str, str, str | None], list[Any]] = {}

    def get(self, run_id: str, idx: int, role: str, content: str, meta: str | None) -> list[Any]:
        """[message, its message_json or None until first needed, the last Trace made of it or None]."""
        key = (role, content, meta)
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= self._size:
                self._entries = {}
            entry = self._entries[key] = [message_from_row(run_id, idx, role, content, meta), None, None]
        return entry


class HashItems(Sequence[str]):
    """message_json of a run's traces, computed when replay first asks and kept in the message cache."""

    def __init__(self, entries: list[list[Any]]) -> None:
        self._entries = entries

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        entry = self._entries[i]
        if entry[1] is None:
            entry[1] = message_json(entry[0])
        return entry[1]


def message_from_row(run_id: str, idx: int, role: str, content: str, meta: str | None) -> Message:
    try:
        data: dict[str, Any] = {"role": role, "content": json.loads(content)}
        if meta:
            data["meta"] = json.loads(meta)
        message = _message_hook()(data, Message)
    except json.JSONDecodeError as e:
        raise StoreError(
            f"corrupt JSON in react_traces run {run_id} index {idx}: {e}; the row was modified outside segue"
        ) from None
    except Exception as e:
        raise StoreError(f"unreadable trace in react_traces run {run_id} index {idx}: {e}") from None
    return message  # type: ignore[no-any-return]


def summary_from_row(row: AgentRun, meta: RunMeta) -> RunSummary:
    """RunSummary from its run row and its meta (read by segue.store.repeats)."""
    conv = get_converter()
    metadata = loads(row.metadata, f"agent_runs.metadata of run {row.id}")
    usage = conv.structure(loads(row.usage, f"agent_runs.usage of run {row.id}"), Usage)
    return RunSummary(
        run_id=row.id,
        status=cast(RunStatus, row.status),
        tenant_id=row.tenant_id,
        agent_name=row.agent_name,
        model=row.model,
        vendor=row.vendor or None,
        created_at=row.created_at,
        finished_at=row.finished_at,
        usage=usage,
        continued_from=row.continued_from,
        replay=meta.segue_replay,
        metadata=metadata or None,
        error=row.error,
        question=question(row.input),
        cached_share=cache_parts(usage).read_share,
        cost=meta.segue_cost,
        served_by=meta.segue_served_by,
        stop_reason=meta.segue_stop_reason,
        served_model=meta.segue_served_model,
        notes=meta.segue_notes or None,
        replay_text=replay_text(meta.segue_replay) if meta.segue_replay is not None else None,
        pending_approvals=_pending(meta) if row.status == "waiting_approval" else None,
        retry_of=row.retry_of,
        parent_run_id=row.parent_run_id,
        parent_call_id=row.parent_call_id,
    )


def _pending(meta: RunMeta) -> list[PendingApproval] | None:
    pending = meta.segue_pending
    if pending is None:
        return None
    names = pending.names or {}
    return [PendingApproval(call_id=c, name=names.get(c)) for c in pending.calls]


def detail_from_rows(
    row: AgentRun,
    meta: RunMeta,
    trace_rows: list[tuple[Any, ...]],
    calls: list[Any],
    bodies: list[dict[str, Any]],
    tools: list[Any],
) -> RunDetail:
    """RunDetail from its run row, its meta, and its trace, llm_interactions (with their joined request
    `bodies`) and tool_calls rows."""
    run_id = row.id
    summary = summary_from_row(row, meta)
    traces = [
        Trace(index=t[2], iteration=t[3], message=message_from_row(run_id, t[2], t[4], t[5], t[6])) for t in trace_rows
    ]
    return RunDetail(
        run_id=summary.run_id,
        status=summary.status,
        tenant_id=summary.tenant_id,
        agent_name=summary.agent_name,
        model=summary.model,
        vendor=summary.vendor,
        served_by=summary.served_by,
        stop_reason=summary.stop_reason,
        served_model=summary.served_model,
        notes=summary.notes,
        created_at=summary.created_at,
        finished_at=summary.finished_at,
        usage=summary.usage,
        continued_from=summary.continued_from,
        replay=summary.replay,
        metadata=summary.metadata,
        error=summary.error,
        input=row.input,
        answer=row.answer,
        retry_of=row.retry_of,
        parent_run_id=row.parent_run_id,
        parent_call_id=row.parent_call_id,
        prefix=meta.segue_prefix,
        meta=meta,
        traces=traces,
        llm_interactions=[
            interaction_from_row(c, body, iteration=c.iteration, error=c.error)
            for c, body in zip(calls, bodies, strict=True)
        ],
        tool_calls=[
            ToolCallRecord(
                call_id=t.call_id,
                iteration=t.iteration,
                name=t.name,
                arguments=loads(t.arguments, f"tool_calls {t.id}"),
                result=t.result,
                is_error=bool(t.is_error),
                duration_ms=t.duration_ms,
            )
            for t in tools
        ],
    )


def stored_runs(
    rows: list[tuple[Any, ...]], messages: MessageCache, metas: Mapping[str, RunMeta]
) -> dict[str, StoredRun]:
    """StoredRuns from the replay query's rows (each run's columns, then one of its traces per row, in order) and
    the runs' metas by run id (read by segue.store.repeats)."""
    heads: dict[str, tuple[Any, ...]] = {}
    traces: dict[str, list[Trace]] = {}
    items: dict[str, list[list[Any]]] = {}
    for row in rows:
        run_id = row[0]
        if run_id not in heads:
            heads[run_id] = row[:11]
            traces[run_id] = []
            items[run_id] = []
        if row[11] is not None:
            entry = messages.get(run_id, row[11], *row[13:16])
            trace = entry[2]  # frozen: the same trace of a run re-read turn after turn is made once
            if trace is None or trace.index != row[11] or trace.iteration != row[12]:
                trace = entry[2] = Trace(index=row[11], iteration=row[12], message=entry[0])
            traces[run_id].append(trace)
            items[run_id].append(entry)
    return {
        run_id: StoredRun(
            run_id=run_id,
            tenant_id=head[1],
            status=head[2],
            input=head[3],
            answer=head[4],
            meta=metas[run_id],
            private=loads(head[6], f"agent_runs.private of run {run_id}") if head[6] else None,
            usage=_stored_usage(head[7], run_id),
            agent_name=head[8],
            created_at=head[9],
            finished_at=head[10],
            traces=traces[run_id],
            hash_items=HashItems(items[run_id]),
        )
        for run_id, head in heads.items()
    }


@functools.lru_cache(maxsize=10_000)
def _usage_of(text: str) -> Usage:
    # Frozen, so one Usage per stored text: replay reads the same finished runs' totals turn after turn.
    return get_converter().structure(json.loads(text), Usage)


def _stored_usage(text: str, run_id: str) -> Usage:
    try:
        return _usage_of(text)
    except ValueError:  # json.JSONDecodeError: say which row, as loads() does
        return get_converter().structure(loads(text, f"agent_runs.usage of run {run_id}"), Usage)


#: The key of the vendor's cache verdict (LlmInteraction.cache_verdict) in a call's `usage` column.
VERDICT_KEY = "segue.cache_verdict"


def _usage_column(call: LlmInteraction) -> dict[str, Any]:
    column: dict[str, Any] = get_converter().unstructure(call.usage, Usage)
    if call.cache_verdict is not None:
        column[VERDICT_KEY] = get_converter().unstructure(call.cache_verdict, CacheVerdict)
    return column


def _verdict_of(raw: Any) -> CacheVerdict | None:
    """A stored verdict; one this segue cannot read (a newer segue's) is an `unknown` verdict, never an error."""
    if raw is None:
        return None
    try:
        return get_converter().structure(raw, CacheVerdict)
    except Exception:  # cattrs raises several kinds; any of them means "not a shape this segue knows"
        return CacheVerdict(status="unknown", raw=raw if isinstance(raw, dict) else {"value": raw})


def interaction_from_row(row: Any, body: dict[str, Any], *, iteration: int, error: str | None) -> LlmInteraction:
    """A provider call from the columns `interaction_columns` wrote (llm_interactions, prewarms), with its
    request `body` joined from its skeleton (segue.store.bodies). The vendor's cache verdict is kept beside the
    usage in its column (`VERDICT_KEY`), so no schema change was needed for it."""
    usage = loads(row.usage, "usage")
    verdict = usage.pop(VERDICT_KEY, None) if isinstance(usage, dict) else None
    return LlmInteraction(
        iteration=iteration,
        vendor=row.vendor,
        model=row.model,
        provider_request=body,
        request_headers=loads(row.request_headers, "request_headers") if row.request_headers else None,
        provider_response=loads(row.provider_response, "provider_response") if row.provider_response else None,
        usage=get_converter().structure(usage, Usage),
        latency_ms=row.latency_ms,
        error=error,
        served_by=row.served_by,
        cache_verdict=_verdict_of(verdict),
    )


def trace_rows(run_id: str, first_index: int, iteration: int, traces: Sequence[Message]) -> list[dict[str, Any]]:
    """The react_traces rows of a run's messages `traces`, stored from index `first_index` on."""
    unstructure = get_converter().unstructure
    return [
        {
            "run_id": run_id,
            "idx": first_index + offset,
            "iteration": iteration,
            "role": message.role,
            "content": json.dumps(unstructure(message, Message)["content"], ensure_ascii=False),
            "meta": json.dumps(message.meta, ensure_ascii=False) if message.meta else None,
        }
        for offset, message in enumerate(traces)
    ]


def tool_row(run_id: str, call: ToolCallRecord) -> dict[str, Any]:
    """The tool_calls row of one call's result."""
    return {
        "run_id": run_id,
        "iteration": call.iteration,
        "call_id": call.call_id,
        "name": call.name,
        "arguments": json.dumps(call.arguments, ensure_ascii=False),
        "result": call.result,
        "is_error": call.is_error,
        "duration_ms": call.duration_ms,
    }


def interaction_columns(call: LlmInteraction, skeleton: str) -> dict[str, Any]:
    """The columns a provider call is stored in (llm_interactions, prewarms): the request body's `skeleton`
    (segue.store.bodies), JSON text for the rest."""
    return {
        "vendor": call.vendor,
        "model": call.model,
        "provider_request": skeleton,
        "request_headers": json.dumps(call.request_headers) if call.request_headers else None,
        "provider_response": (
            json.dumps(call.provider_response, ensure_ascii=False) if call.provider_response is not None else None
        ),
        "usage": json.dumps(_usage_column(call)),
        "latency_ms": call.latency_ms,
        "served_by": call.served_by,
    }


@functools.cache  # one entry per (models, id count): a store's models live as long as the store
def replay_sql(m: Bound, count: int) -> str:
    """The replay query's SQL for `count` ids, built by Peewee once (building it dominated small reads)."""
    query = (
        m.AgentRun.select(
            m.AgentRun.id,
            m.AgentRun.tenant_id,
            m.AgentRun.status,
            m.AgentRun.input,
            m.AgentRun.answer,
            m.AgentRun.meta,
            m.AgentRun.private,
            m.AgentRun.usage,
            m.AgentRun.agent_name,
            m.AgentRun.created_at,
            m.AgentRun.finished_at,
            m.ReactTrace.idx,
            m.ReactTrace.iteration,
            m.ReactTrace.role,
            m.ReactTrace.content,
            m.ReactTrace.meta,
        )
        .join(m.ReactTrace, pw.JOIN.LEFT_OUTER, on=(m.ReactTrace.run_id == m.AgentRun.id))
        .where(m.AgentRun.id.in_([f"placeholder-{i}" for i in range(count)]))
        .order_by(m.AgentRun.id, m.ReactTrace.idx)
    )
    sql, params = query.sql()
    assert params == [f"placeholder-{i}" for i in range(count)], "the id list must be the only parameter"
    return str(sql)
