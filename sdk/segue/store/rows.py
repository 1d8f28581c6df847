"""Turning stored rows back into canonical objects: JSON columns, the run meta, trace messages (cached), run
summaries."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any, cast

from segue.errors import StoreError
from segue.generated import Message, RunMeta, RunStatus, RunSummary, Usage, get_converter
from segue.hashing import message_json
from segue.store.models import AgentRun


def loads(text: str | None, where: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise StoreError(f"corrupt JSON in {where}: {e}; the row was modified outside segue") from None


def read_meta(text: str | None, where: str) -> RunMeta:
    """agent_runs.meta through the generated converter. Rows of an older segue read as they are: keys it wrote
    that RunMeta no longer names stay in `extra`, and the nulls it wrote for unset optional values read as unset."""
    raw = loads(text, where)
    try:
        return get_converter().structure(raw or {}, RunMeta)
    except Exception as e:
        raise StoreError(f"unreadable {where}: {e}; the row was modified outside segue") from None


class MetaCache:
    """RunMeta keyed by the exact stored text: replay re-reads the same finished runs every turn, and structuring
    their meta (descriptor, replay summary, stored request) would otherwise be paid each time. A hit is always the
    same meta; when full it starts over, like MessageCache."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._entries: dict[str, RunMeta] = {}

    def get(self, text: str | None, where: str) -> RunMeta:
        if text is None:
            return read_meta(text, where)
        found = self._entries.get(text)
        if found is None:
            if len(self._entries) >= self._size:
                self._entries = {}
            found = self._entries[text] = read_meta(text, where)
        return found


def write_meta(meta: RunMeta) -> dict[str, Any]:
    """RunMeta as stored: only the keys it sets (merged into the stored ones by the writes that update it)."""
    value: dict[str, Any] = get_converter().unstructure(meta, RunMeta)
    return value


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
        """[message, its message_json or None until first needed]."""
        key = (role, content, meta)
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= self._size:
                self._entries = {}
            entry = self._entries[key] = [message_from_row(run_id, idx, role, content, meta), None]
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


def summary_from_row(row: AgentRun) -> RunSummary:
    conv = get_converter()
    meta = read_meta(row.meta, f"agent_runs.meta of run {row.id}")
    metadata = loads(row.metadata, f"agent_runs.metadata of run {row.id}")
    return RunSummary(
        run_id=row.id,
        status=cast(RunStatus, row.status),
        tenant_id=row.tenant_id,
        agent_name=row.agent_name,
        model=row.model,
        vendor=row.vendor or None,
        created_at=row.created_at,
        finished_at=row.finished_at,
        usage=conv.structure(loads(row.usage, f"agent_runs.usage of run {row.id}"), Usage),
        continued_from=row.continued_from,
        replay=meta.segue_replay,
        metadata=metadata or None,
        error=row.error,
    )
