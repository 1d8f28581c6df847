"""IdentityMemo: a value worked out from an object that never changes once built, remembered by the object's id.

The replay hot path hands the same objects to every request of a run, and to the next run of the conversation: the
store's cached messages, their marked copies, the wire blocks of the replayed prefix (contracts.WirePrefix: built
once, never changed; a cache marker goes on a copy). What segue derives from them (a marked copy, a block's JSON
text, its part key, its lookback positions) is derived once and looked up by identity afterwards, instead of
walking the whole conversation on every call.

An entry holds its object, so the id cannot be reused by another object while the entry lives, and a lookup checks
that the object is the same one. The memory is bounded: when it is full it starts over.
"""

from __future__ import annotations

from typing import Generic, TypeVar

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """At most `size` values, each keyed by the identity of the object it was worked out from."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: dict[int, tuple[object, V]] = {}

    def get(self, obj: object) -> V | None:
        """The value remembered for this very object, or None."""
        entry = self._entries.get(id(obj))
        return entry[1] if entry is not None and entry[0] is obj else None

    def put(self, obj: object, value: V) -> V:
        """Remember `value` for `obj` (starting over when full) and return it."""
        if len(self._entries) >= self._size:
            self._entries = {}
        self._entries[id(obj)] = (obj, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)
