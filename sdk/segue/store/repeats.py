"""What a conversation's runs repeat, stored once: agent_runs.meta as stored, and RunMeta as read.

Each run of a conversation records its replay summary, whose id lists (`knobs.runs`, the `runs=` list, and
`runs_full`, `runs_text`, `reasoning_kept`, `reasoning_dropped`) are the previous run's plus the run before it; and
its cost's price sources (each serving path's catalog row and that row's notes), its tools' hashes and its stable
context, the same on every turn. Stored as they are, the meta of turn 60 held three lists of 59 ids and the same
kilobyte of sources as turn 10: the stored bytes per turn grew with the conversation. So the stored meta keeps a
reference in their place, into the store's content-addressed parts (`request_parts`, segue.store.bodies):

- an id list (`_LISTS`) is a list tree, `{"segue.list": [root key, height]}`: one part per id and content-defined
  nodes above them, so a run's list shares every node of the previous run's list but the last of each level, and
  what a run stores is its new ids and a few small nodes (the previous run's list by reference, plus what changed);
  the equal lists of one run (with replay_last="all", `runs`, `runs_full` and `reasoning_kept`) are one tree;
- a value that repeats whole (`_PARTS`: the price sources, the tools' hashes, the request's history, context and
  output schema) is one part, `{"segue.part": key}`, when its JSON is long enough that a reference is shorter.

A prewarm's `runs` (the runs it warmed, one more each turn when a conversation is warmed before each) is stored as
a list tree the same way (`stored_list`, read by `read_lists`).

Readers resolve the references (one fetch per tree level for every row read together; parts are remembered, as a
key always names the same text), so a RunMeta reads exactly as it was written. Rows written before hold the values
themselves, and read as they are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from segue._core.hashing import canonical_json
from segue.errors import StoreError
from segue.generated import RunMeta, get_converter
from segue.store.bodies import Bodies, Parts

LIST = "segue.list"
PART = "segue.part"
#: The id lists a run repeats from the previous one, by their path in the stored meta.
_LISTS: tuple[tuple[str, ...], ...] = (
    ("segue.replay", "knobs", "runs"),
    ("segue.replay", "runs_full"),
    ("segue.replay", "runs_text"),
    ("segue.replay", "reasoning_kept"),
    ("segue.replay", "reasoning_dropped"),
    ("segue.replay", "warnings"),
)
#: The values every run of a conversation repeats whole.
_PARTS: tuple[tuple[str, ...], ...] = (
    ("segue.cost", "prices"),
    ("segue.tools",),
    ("segue.request", "history"),
    ("segue.request", "context"),
    ("segue.request", "output_type"),
)
#: A value whose JSON is shorter stays inline: its reference would not be shorter.
_PART_MIN = 64


@attrs.frozen
class StoredMeta:
    """A meta as stored: the JSON object (references in place of what repeats) and the parts it names that this
    process has not written yet (insert them in the same transaction, then `Bodies.written`)."""

    value: dict[str, Any]
    parts: dict[str, str]


def _at(meta: Any, path: tuple[str, ...]) -> tuple[dict[str, Any], str] | None:
    """(the object holding the value at `path`, its key), if the meta has one there."""
    node: Any = meta
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if not isinstance(node, dict) or path[-1] not in node:
        return None
    return node, path[-1]


class Metas:
    """The run metas of one RunStore: written with what repeats by reference (`store`), read back resolved
    (`read`). Resolved metas are remembered by their exact stored text: replay re-reads the same finished runs
    every turn, and a stored text always reads as the same meta."""

    def __init__(self, bodies: Bodies, size: int = 10_000, parts: int = 100_000) -> None:
        self._bodies = bodies
        self._size = size
        self._entries: dict[str, RunMeta] = {}
        self._parts = parts
        self._texts: dict[str, str] = {}

    def store(self, meta: RunMeta) -> StoredMeta:
        """`meta` as stored: only the keys it sets (merged into the stored ones by the writes that update it)."""
        value: dict[str, Any] = get_converter().unstructure(meta, RunMeta)
        new: dict[str, str] = {}
        splitter = self._bodies.splitter
        for path in _LISTS:
            found = _at(value, path)
            if found is not None and isinstance(found[0][found[1]], list):
                found[0][found[1]] = stored_list(found[0][found[1]], self._bodies, new)
        for path in _PARTS:
            found = _at(value, path)
            if found is not None:
                text = canonical_json(found[0][found[1]])
                if len(text) >= _PART_MIN:
                    found[0][found[1]] = {PART: splitter.put(text, new)}
        return StoredMeta(value, new)

    def read(self, rows: Sequence[tuple[str | None, str]]) -> list[RunMeta]:
        """Inside a read: the metas of `rows` ((stored text, where it is stored) each), references resolved."""
        out: list[RunMeta | None] = [None if t is None else self._entries.get(t) for t, _ in rows]
        todo = [(i, text, where) for i, (text, where) in enumerate(rows) if text is not None and out[i] is None]
        if todo:
            if len(self._texts) >= self._parts:
                self._texts = {}
            raws = [_loads(text, where) for _, text, where in todo]
            _resolve(raws, self._bodies.parts(self._texts))
            if len(self._entries) + len(todo) > self._size:
                self._entries = {}
            for (i, text, where), raw in zip(todo, raws, strict=True):
                out[i] = self._entries[text] = _structure(raw, where)
        return [_structure({}, where) if m is None else m for m, (_, where) in zip(out, rows, strict=True)]


def stored_list(values: list[Any], bodies: Bodies, new: dict[str, str]) -> Any:
    """A list as stored: a reference to its list tree (the parts not written yet go to `new`); an empty list stays
    itself, shorter than any reference."""
    return {LIST: list(bodies.splitter.list_tree(values, new))} if values else []


def read_lists(stored: list[Any], parts: Parts) -> list[Any]:
    """Stored lists (`stored_list`'s references, or the values a row written before holds) as their values, one
    fetch per tree level for all of them (inside a read)."""
    slots = [{"value": value} for value in stored]
    _fill([(slot, "value") for slot in slots], [], parts)
    return [slot["value"] for slot in slots]


def _loads(text: str, where: str) -> Any:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise StoreError(f"corrupt JSON in {where}: {e}; the row was modified outside segue") from None
    return {} if raw is None else raw  # not an object: _structure says the row is unreadable


def _structure(raw: Any, where: str) -> RunMeta:
    """Through the generated converter. Rows of an older segue read as they are: keys it wrote that RunMeta no
    longer names stay in `extra`, and the nulls it wrote for unset optional values read as unset."""
    try:
        meta: RunMeta = get_converter().structure(raw, RunMeta)
    except Exception as e:
        raise StoreError(f"unreadable {where}: {e}; the row was modified outside segue") from None
    return meta


def _resolve(raws: list[Any], parts: Parts) -> None:
    """Every reference of `raws` replaced, in place, by its value: one fetch per level for all of them."""
    lists: list[tuple[dict[str, Any], str]] = []
    wholes: list[tuple[dict[str, Any], str]] = []
    for raw in raws:
        lists += [found for path in _LISTS if (found := _at(raw, path))]
        wholes += [found for path in _PARTS if (found := _at(raw, path))]
    _fill(lists, wholes, parts)


def _fill(lists: list[tuple[dict[str, Any], str]], wholes: list[tuple[dict[str, Any], str]], parts: Parts) -> None:
    """Each slot ((object, key) each) of `lists` holding a list reference, and of `wholes` holding a part
    reference, set to its value; a slot holding a value (a row written before) is left as it is. A tree is walked
    and its elements decoded once however many slots name it (a run's equal lists, the runs of one conversation
    sharing their nodes); the values are only read (structured into new objects), never changed."""
    trees: dict[tuple[str, int], list[tuple[dict[str, Any], str]]] = {}
    for node, key in lists:
        ref = node[key]
        if isinstance(ref, dict) and LIST in ref:
            trees.setdefault((ref[LIST][0], ref[LIST][1]), []).append((node, key))
    keys: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for node, key in wholes:
        ref = node[key]
        if isinstance(ref, dict) and PART in ref:
            keys.setdefault(ref[PART], []).append((node, key))
    if not trees and not keys:
        return
    decoded: dict[str, Any] = {}

    def value(key: str) -> Any:
        if key not in decoded:
            decoded[key] = parts.value(key)
        return decoded[key]

    elements = parts.elements(list(trees), set(keys))
    for slots, element_keys in zip(trees.values(), elements, strict=True):
        values = [value(k) for k in element_keys]
        for node, key in slots:
            node[key] = list(values)
    for part, slots in keys.items():
        for node, key in slots:
            node[key] = value(part)
