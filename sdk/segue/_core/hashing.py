"""Canonical JSON and hashing, defined once (docs/replay.md).

canonical_json: keys sorted, no whitespace, UTF-8 kept as is (ensure_ascii=False), no `default=` fallback, so
a value that is not plain JSON fails loudly instead of hashing its repr. canonical_hash: "sha256:" + hex digest
of canonical_json encoded as UTF-8. message_json: a message as the prefix rule hashes it (the store precomputes it
for the traces it reads, replay feeds it to a ListHasher). compact_json: the same without sorting the keys, the
way the official clients encode a request body and segue a tool's result.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from segue.generated import Message, get_converter


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


#: JSON in the value's own key order, no whitespace, UTF-8 kept as is, NaN refused (one encoder, reused: json.dumps
#: with options builds a new one per call).
compact_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def canonical_hash(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def message_json(m: Message) -> str:
    """A message as hashed: canonical JSON of its role and content (meta never reaches a vendor)."""
    return canonical_json({"role": m.role, "content": get_converter().unstructure(m.content, list[Any])})


class ListHasher:
    """canonical_hash of a growing JSON list, in O(total size) instead of re-hashing every prefix.

    The canonical JSON of a list is "[" + ",".join(canonical_json(item)) + "]", so feeding the items' canonical
    JSON one by one and closing the bracket on a copy gives exactly canonical_hash(list[:n]) for every n.
    """

    def __init__(self) -> None:
        self._sha = hashlib.sha256(b"[")
        self._count = 0

    def add(self, item_json: str) -> None:
        self._sha.update((b"," if self._count else b"") + item_json.encode("utf-8"))
        self._count += 1

    def digest(self) -> str:
        closed = self._sha.copy()
        closed.update(b"]")
        return "sha256:" + closed.hexdigest()
