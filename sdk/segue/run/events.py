"""A run's event sequence: every RunEvent of a run carries its `seq` (1, 2, 3, ... with no gap and no repeat), so a
consumer that reconnects after `<run_id>:<seq>` receives the rest of that one run, even when another process
continued it (segue.run.recovery) or it was paused and resumed.

No row is written per event. Events derive from steps, and the journal already holds each step, so the sequence
derives from the journal: each write that merges the run's meta (a model step's response, the run's end or pause,
a recovery's claim) also records an `EventMark`, the count of events once its step has yielded what follows the
write without further I/O, and the tool rows written after it say how far the round in flight got:

- a result of the round journaled after the mark proves its TOOL_CALL events were out (they precede any result);
- the round's tool message journaled proves its TOOL_RESULT events are out (they follow it, no I/O between).

What the journal cannot prove is a model call in flight: its TEXT_DELTA / REASONING_DELTA events (a streamed
call) were never journaled, and the call is sent again. The recovered run numbers its events after the last event
the journal proves, so those deltas' seqs are given again to the recovered run's events (its RUN_STARTED first,
with `meta.after`, the seq it continues after): a consumer drops what it holds past `after` (docs/durability.md).
"""

from __future__ import annotations

import attrs

from segue.generated import EventMark, Message, RunDetail, RunEvent


def stamped(state_events: int, event: RunEvent) -> RunEvent:
    """`event` as the run's event number `state_events` (its seq)."""
    return attrs.evolve(event, seq=state_events)


def mark(count: int, tool_calls: int = 0, written: int = 0) -> EventMark:
    return EventMark(count=count, tool_calls=tool_calls, written=written)


def tool_writes(detail: RunDetail, iteration: int) -> int:
    """The round's tool writes the journal holds: its rows, plus its rows that hold a result (a start, then its
    result, or a result alone, are two each)."""
    return sum(1 + (c.result is not None) for c in detail.tool_calls if c.iteration == iteration)


def journaled_count(found: EventMark | None, own: list[Message], iteration: int, detail: RunDetail) -> int:
    """The seq of the last event the journal proves a run yielded (what its recovery continues after): the last
    mark, plus what a tool write of the round after it proves: the round's TOOL_CALL events that followed a start
    write, and, once the round's tool message is journaled, its TOOL_RESULT events (one per result, no I/O
    between)."""
    if found is None:
        return 1  # a run stored without a mark: its RUN_STARTED follows its row, no I/O between
    count = found.count
    last = own[-1] if own else None
    if last is None or last.role == "user" or tool_writes(detail, iteration) <= found.written:
        return count
    count += found.tool_calls
    if last.role == "tool":
        count += sum(1 for block in last.content if block.type == "tool_result")
    return count
