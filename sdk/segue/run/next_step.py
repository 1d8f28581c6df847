"""Where a recorded model response leads (segue.run.loop takes the step): the run's structured output checked, a
pause for approval, an approved call asked again after a recovery, the run's end, or a round of tool steps; and
how many TOOL_CALL events that step announces, which the journal's event marks count (segue.run.events)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Literal

from segue._core.contracts import ProviderResponse
from segue.generated import Message, ToolCallBlock, ToolCallRecord
from segue.run.conversation import tool_calls
from segue.run.output import final_call
from segue.run.state import COMPACTION_PAUSE, RunState
from segue.run.tool_calls import ToolRunner

NextStep = Literal["output", "pause", "ask_again", "end", "round"]


def answers(response: ProviderResponse, assistant: Message, ask_again: bool) -> bool:
    """Whether a response without calls is the run's answer: not when the call is asked again, nor when the vendor
    paused after compacting (Anthropic's pause_after_compaction gave no answer yet: the next request carries the
    compaction block back and the model answers from it)."""
    compacting = response.stop_reason == COMPACTION_PAUSE and not tool_calls(assistant)
    return not ask_again and not compacting


def next_step(
    state: RunState,
    tools: ToolRunner,
    calls: list[ToolCallBlock],
    *,
    answers: bool,
    finished: Mapping[str, ToolCallRecord] | None,
    interrupted: Collection[str],
) -> NextStep:
    """Which step a recorded response with `calls` leads to. A recovered run passes the results its journal holds
    (`finished`, never None then) and the calls that were in flight (`interrupted`)."""
    if final_call(state.request.output, calls) is not None or (
        state.request.output is not None and not calls and answers
    ):
        return "output"
    if finished is None and calls and any(tools.needs_approval(state, c) for c in calls):
        return "pause"
    if any(c.id in interrupted and tools.needs_approval(state, c) for c in calls):
        return "ask_again"
    return "end" if not calls else "round"


def announcing(
    state: RunState,
    tools: ToolRunner,
    assistant: Message,
    *,
    answers: bool = True,
    finished: Mapping[str, ToolCallRecord] | None = None,
    interrupted: Collection[str] = (),
) -> tuple[int, int]:
    """The TOOL_CALL events the step after a recorded response yields before the run's next write (they follow
    the write without I/O), and those it yields after a write of the round's starts."""
    calls = tool_calls(assistant)
    if next_step(state, tools, calls, answers=answers, finished=finished, interrupted=interrupted) != "round":
        return 0, 0
    done = finished or {}
    return round_announcements(state, tools, calls, finished=done, skip={*done, *interrupted})


def round_announcements(
    state: RunState,
    tools: ToolRunner,
    calls: Sequence[ToolCallBlock],
    *,
    finished: Collection[str],
    skip: Collection[str],
    decisions: Mapping[str, bool] | None = None,
    supplied: Mapping[str, str] | None = None,
) -> tuple[int, int]:
    """A round's TOOL_CALL events (one per call not `finished`), split by where they go out: before the run's next
    write, or after the write of the round's starts when it has one (ToolRunner.starts, given `skip`)."""
    announced = sum(1 for c in calls if c.id not in finished)
    starting = tools.starts(state, state.iteration, calls, decisions or {}, supplied, skip)
    return (0, announced) if starting else (announced, 0)
