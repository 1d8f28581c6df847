"""One run in progress (RunState), and the events a run reports."""

from __future__ import annotations

from typing import Any

import attrs

from segue.contracts import ServingPath
from segue.conversation import ZERO_USAGE
from segue.generated import (
    Message,
    PrefixDescriptor,
    ReplaySummary,
    RunEvent,
    RunEventType,
    RunResult,
    RunStatus,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from segue.notes import RunNotes
from segue.run.plan import RunPlan
from segue.run.request import RunRequest


@attrs.define(kw_only=True)
class RunState:
    """The mutable bookkeeping of one run: its own messages, who served it so far, what it has recorded."""

    run_id: str
    request: RunRequest
    plan: RunPlan
    own: list[Message]  # this run's messages (its traces), after the plan's prefix
    replay: ReplaySummary | None  # the summary of the path that served (segue.run.serving)
    bound: frozenset[str] | None = None  # runs whose reasoning every request so far carried (None: none served)
    iteration: int = 0
    ended: bool = False  # answered, or paused for approval: the loop stops
    resumed_at: int = 0  # the iteration a resumed run was paused at
    usage: Usage = ZERO_USAGE
    pii: dict[str, str] = attrs.Factory(dict)
    descriptor: PrefixDescriptor | None = None  # written with the first response (segue.run.serving)
    notes: RunNotes = attrs.Factory(RunNotes)
    persisted: list[Message] = attrs.Factory(list)  # this run's traces as stored, in order
    #: Per (path, the replayed runs whose reasoning it keeps): each replayed message as fitted to that path, so the
    #: prefix is fitted once per run, not once per request.
    fitted: dict[tuple[ServingPath, frozenset[str]], dict[int, tuple[Message, Message]]] = attrs.Factory(dict)
    repairs: int = 0  # structured output: repair turns used so far

    def stored_messages(self) -> list[Message]:
        """This run's messages as they are stored: with the fragments the layout keeps (appendOnly)."""
        layout = self.plan.layout
        if layout is None:
            return list(self.own)
        prefix = self.plan.prefix
        return layout.with_kept_fragments([*prefix, *self.own])[len(prefix) :]

    def result(
        self, status: RunStatus, answer: str | None = None, error: str | None = None, output: Any = None
    ) -> RunResult:
        return RunResult(
            run_id=self.run_id,
            status=status,
            answer=answer,
            usage=self.usage,
            iterations=self.iteration,
            replay=self.replay,
            error=error,
            notes=self.notes.as_list() or None,
            output=output,
        )


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
