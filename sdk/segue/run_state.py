"""The data of one run: its validated arguments (RunSpec), its progress (RunState), and its events."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from segue.contracts import ServingPath
from segue.conversation import ZERO_USAGE
from segue.generated import (
    ContextBlock,
    Message,
    PrefixDescriptor,
    ReplayKnobs,
    ReplaySummary,
    RunEvent,
    RunEventType,
    RunResult,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from segue.layout import LayoutPolicy
from segue.notes import RunNotes
from segue.prefix_rule import CurrentPrefix, WireView


@attrs.frozen(kw_only=True)
class RunSpec:
    """One run's validated arguments (what the fingerprint covers, plus app metadata)."""

    input: str
    history: list[Message]
    context: list[ContextBlock]
    knobs: ReplayKnobs | None
    replay_last: int | Literal["all"]
    replay_reasoning: bool
    replay_budget_tokens: int | None
    tenant_id: str
    metadata: dict[str, Any]
    idempotency_key: str | None
    model: str | None
    vendor: str | None = None
    retry_of: str | None = None


@attrs.define(kw_only=True)
class RunState:
    """Mutable bookkeeping of one run in progress."""

    run_id: str
    spec: RunSpec
    system: str
    stable_head: str | None
    prefix: list[Message]  # replayed runs + history: sent, never re-persisted
    own: list[Message]  # this run's messages, persisted as traces
    replay: ReplaySummary | None  # the summary of the path that served (segue.serving)
    planned: CurrentPrefix  # the path the run is aimed at, with the system and tools hashes
    plans: dict[ServingPath, ReplaySummary] = attrs.Factory(dict)  # the replay, planned per path it may be served on
    bound: frozenset[str] | None = None  # runs whose reasoning every request so far carried (None: none served)
    iteration: int = 0
    resumed_at: int = 0  # the iteration a resumed run was paused at
    usage: Usage = ZERO_USAGE
    pii: dict[str, str] = attrs.Factory(dict)
    descriptor: PrefixDescriptor | None = None  # written with the first response (segue.serving)
    notes: RunNotes = attrs.Factory(RunNotes)
    layout: LayoutPolicy | None = None
    persisted: list[Message] = attrs.Factory(list)  # this run's traces as stored, in order

    @property
    def view(self) -> WireView | None:
        """How the replayed prefix goes on this run's wire (the layout may escape or leave out messages)."""
        return self.layout.on_wire if self.layout is not None else None

    def stored_messages(self) -> list[Message]:
        """This run's messages as they must be stored: with the fragments the layout keeps (appendOnly)."""
        if self.layout is None:
            return list(self.own)
        return self.layout.with_kept_fragments([*self.prefix, *self.own])[len(self.prefix) :]


def make_event(
    type: RunEventType,
    run_id: str,
    iteration: int,
    *,
    text: str | None = None,
    tool_call: ToolCallBlock | None = None,
    tool_result: ToolResultBlock | None = None,
    result: RunResult | None = None,
    error: str | None = None,
    meta: dict[str, Any] | None = None,
) -> RunEvent:
    return RunEvent(
        type=type,
        run_id=run_id,
        iteration=iteration,
        text=text,
        tool_call=tool_call,
        tool_result=tool_result,
        result=result,
        error=error,
        meta=meta or {},
    )
