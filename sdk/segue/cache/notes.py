"""Run notes: what drivers and Failover report besides the answer, typed by kind and kept once per run.

A note is not a replay fact: replay facts (whose reasoning reached the model, and why not) are ReplayWarnings in
the ReplaySummary. Notes are everything else a call reports (a member failed over, segue left reasoning off the
wire, the vendor did not confirm what it dropped, ...). The same note on every request of a run is one entry with
a count, in `agent_runs.meta["segue.notes"]` and on `RunResult.notes`. The cache notes (segue.cache.misses) name
numbers that change every request (the prompt's length), so they are kept once per kind: the first one says it.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from segue._core.contracts import ProviderNote
from segue.generated import RunNote, RunNoteKind

#: Kinds kept once per run whatever their message (the first one's), counted like the others.
ONCE_PER_RUN: frozenset[RunNoteKind] = frozenset({"cache-below-minimum", "cache-beyond-lookback", "cache-key-missing"})


class RunNotes:
    """The notes of one run, in the order first seen, one entry per (kind, message)."""

    def __init__(self, existing: Iterable[RunNote] = ()) -> None:
        self._notes: dict[tuple[str, str], RunNote] = {_key(n.kind, n.message): n for n in existing}

    def add(self, note: ProviderNote, iteration: int) -> bool:
        """Keep `note`; True when it is the run's first of its kind and message (once-per-run kinds: of its kind)."""
        key = _key(note.kind, note.message)
        seen = self._notes.get(key)
        if seen is None:
            self._notes[key] = RunNote(
                kind=note.kind,
                message=note.message,
                iteration=iteration,
                count=1,
                measured=note.measured,
                limit=note.limit,
            )
            return True
        self._notes[key] = attrs.evolve(seen, count=seen.count + 1)
        return False

    def __bool__(self) -> bool:
        return bool(self._notes)

    def as_list(self) -> list[RunNote]:
        return list(self._notes.values())


def _key(kind: RunNoteKind, message: str) -> tuple[str, str]:
    return (kind, "") if kind in ONCE_PER_RUN else (kind, message)
