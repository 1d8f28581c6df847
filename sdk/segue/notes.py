"""Run notes: what drivers and Failover report besides the answer, typed by kind and kept once per run.

A note is not a replay fact: replay facts (whose reasoning reached the model, and why not) are ReplayWarnings in
the ReplaySummary. Notes are everything else a call reports (a member failed over, segue left reasoning off the
wire, the vendor did not confirm what it dropped, ...). The same note on every request of a run is one entry with
a count, in `agent_runs.meta["segue.notes"]` and on `RunResult.notes`.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from segue.contracts import ProviderNote
from segue.generated import RunNote


class RunNotes:
    """The notes of one run, in the order first seen, one entry per (kind, message)."""

    def __init__(self, existing: Iterable[RunNote] = ()) -> None:
        self._notes: dict[tuple[str, str], RunNote] = {(n.kind, n.message): n for n in existing}

    def add(self, note: ProviderNote, iteration: int) -> None:
        key = (note.kind, note.message)
        seen = self._notes.get(key)
        if seen is None:
            self._notes[key] = RunNote(kind=note.kind, message=note.message, iteration=iteration, count=1)
        else:
            self._notes[key] = attrs.evolve(seen, count=seen.count + 1)

    def __bool__(self) -> bool:
        return bool(self._notes)

    def as_list(self) -> list[RunNote]:
        return list(self._notes.values())
