"""Tool execution for a run: which calls wait for approval, and running (or denying) the calls of one iteration.

The tools a run may call are its RunConfig's (segue.run.toolbox: the agent's own and those its tool sources listed
for this run). An unknown tool, a denied call, invalid arguments, an exception or a timeout become an error result
the model sees, never a crash of the run (segue.tools). A tool that takes a RunContext gets the run's id, tenant,
the iteration, the call id and the app's `deps=`. Arguments reach the tool with the guardrail's placeholders
restored; results go back through the guardrails before the model sees them. Images a tool returns follow the
results in the same tool message (every vendor takes images there). Each call has its `execute_tool` span.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any

import attrs

from segue.generated import ImageBlock, Message, RunEvent, ToolCallBlock, ToolCallRecord, ToolResultBlock
from segue.run.guard import Guard
from segue.run.lineage import CALLER, Caller
from segue.run.state import RunState, make_event
from segue.run.steps import StepRef
from segue.telemetry import attached
from segue.tool_context import RunContext
from segue.tools import Tool, ToolOutcome


@attrs.frozen(kw_only=True)
class ToolRound:
    """What one iteration's calls produced: the tool message for the model, the records for the store, and a
    TOOL_RESULT event per call."""

    message: Message | None
    records: list[ToolCallRecord]
    events: list[RunEvent]
    #: Calls whose sub-run paused for approval (segue.run.subrun): unrecorded, and the run pauses on them.
    paused: list[str] = attrs.Factory(list)


class ToolRunner:
    def __init__(self, guard: Guard, *, pipeline: Any = None, agent: str = "agent") -> None:
        self.guard = guard
        #: The agent's pipeline and name, which a sub-agent called as a tool links its run to (segue.run.lineage).
        self.pipeline = pipeline
        self.agent = agent

    def needs_approval(self, state: RunState, call: ToolCallBlock) -> bool:
        tool = state.plan.config.tools.by_name.get(call.name)
        return tool is not None and tool.requires_approval

    def starts(
        self,
        state: RunState,
        iteration: int,
        calls: Sequence[ToolCallBlock],
        decisions: Mapping[str, bool],
        supplied: Mapping[str, str] | None,
        skip: Collection[str] = (),
    ) -> list[ToolCallRecord]:
        """The calls `run` will make of tools that are not retry_safe: their start is journaled (in one write,
        before they are announced) so that a recovered run never makes them twice. `skip`: calls recovery does
        not run (finished, or interrupted)."""
        tools = state.plan.config.tools.by_name
        starting = []
        for call in calls:
            tool = tools.get(call.name)
            if call.id in skip or tool is None or tool.retry_safe or (supplied is not None and call.id in supplied):
                continue
            if tool.requires_approval and not decisions.get(call.id, False):
                continue
            starting.append(
                ToolCallRecord(
                    call_id=call.id,
                    iteration=iteration,
                    name=call.name,
                    arguments=call.arguments,
                    is_error=False,
                    duration_ms=0.0,
                )
            )
        return starting

    async def run(
        self,
        state: RunState,
        iteration: int,
        calls: Sequence[ToolCallBlock],
        decisions: Mapping[str, bool],
        supplied: Mapping[str, str] | None,
        *,
        record: Callable[[RunState, ToolCallRecord, Message | None, Sequence[ImageBlock]], Awaitable[None]],
        finished: Mapping[str, ToolCallRecord] | None = None,
        interrupted: Collection[str] = (),
    ) -> ToolRound:
        """Execute (or deny) each call, concurrently (one tool step each). `decisions` approve calls that need it;
        `supplied` holds results the client computed itself (client-side tools). (`starts` names the calls whose
        start must be journaled first); `record` stores each result as its call completes; the last to
        complete brings the round's tool message, stored in the same write (an earlier one, the images it returned).

        A recovered run (segue.run.recovery) passes the results its journal holds (`finished`: read back with their
        images, `state.journaled_images`, neither run nor recorded again) and the calls that were in flight when
        its process died and may not run twice (`interrupted`: an error result says so)."""
        tools = state.plan.config.tools.by_name
        completed: dict[str, tuple[ToolOutcome, ToolResultBlock, ToolCallRecord]] = {}

        journal = finished or {}
        for call in calls:
            if call.id in journal:
                stored = journal[call.id]
                outcome = ToolOutcome(
                    result=ToolResultBlock(tool_call_id=call.id, content=stored.result or "", is_error=stored.is_error),
                    duration_ms=stored.duration_ms,
                    images=state.journaled_images.get(call.id, ()),
                )
                completed[call.id] = (outcome, _protected(outcome.result), stored)

        async def one(call: ToolCallBlock) -> tuple[ToolOutcome, ToolResultBlock, ToolCallRecord] | None:
            if state.steps is None:
                return await step(call)
            # An engine runs the step (segue.run.steps); a step it finished already is in the journal (`finished`).
            ref = StepRef(kind="tool_call", run_id=state.run_id, iteration=iteration, call_id=call.id)
            await state.steps.tool_call(ref, functools.partial(step, call))
            if call.id in state.paused_children:  # its sub-run waits for approval: no result yet
                return None
            if call.id not in completed:
                raise RuntimeError(
                    f"run {state.run_id}: the engine's journal has tool call {call.id} of iteration {iteration} "
                    "finished, but segue's store has no result for it: recover the run with the agent that ran it"
                )
            return completed[call.id]

        async def step(call: ToolCallBlock) -> tuple[ToolOutcome, ToolResultBlock, ToolCallRecord] | None:
            if call.id in completed:
                return completed[call.id]
            tool = tools.get(call.name)
            span = state.trace.tool(call, source=tool.source if tool is not None else None)
            with attached(span):  # an MCP client's own spans nest in execute_tool
                outcome = await run(call, tool)
            span.finish(outcome.result, images=len(outcome.images))
            if call.id in state.paused_children:  # its sub-run waits for approval: no result yet, the run pauses
                return None
            content = self.guard.protect(outcome.result.content, state.pii)
            result = ToolResultBlock(tool_call_id=call.id, content=content, is_error=outcome.result.is_error)
            done = ToolCallRecord(
                call_id=call.id,
                iteration=iteration,
                name=call.name,
                arguments=call.arguments,
                result=content,
                is_error=bool(result.is_error),
                duration_ms=outcome.duration_ms,
            )
            completed[call.id] = (outcome, result, done)
            last = len(completed) == len(calls)
            # The round's last result brings its tool message (with every image); an earlier one its own images.
            message = tool_message([completed[c.id] for c in calls]) if last else None
            await record(state, done, message, () if last else outcome.images)
            return outcome, result, done

        async def run(call: ToolCallBlock, tool: Tool | None) -> ToolOutcome:
            if supplied is not None and call.id in supplied:
                return _given(call, supplied[call.id], is_error=False)
            if call.id in interrupted:
                return _given(call, interrupted_text(call), is_error=True)
            if tool is None:
                known = ", ".join(sorted(tools)) or "none"
                return _given(call, f"unknown tool {call.name!r}; the tools available are: {known}", is_error=True)
            if tool.requires_approval and not decisions.get(call.id, False):
                text = f"the user did not approve calling {call.name}; do not retry it without asking"
                return _given(call, text, is_error=True)
            arguments = self.guard.restore_arguments(call.arguments, state.pii)
            context = RunContext(
                run_id=state.run_id,
                tenant_id=state.request.tenant_id,
                iteration=iteration,
                tool_call_id=call.id,
                deps=state.request.deps,
            )
            # In this call's own task (asyncio.gather): concurrent calls each see their own caller.
            decision = decisions.get(call.id) if call.id in decisions else None
            CALLER.set(
                Caller(state=state, call_id=call.id, pipeline=self.pipeline, agent=self.agent, decision=decision)
            )
            return await tool.invoke(call.id, arguments, context)

        outcomes = await asyncio.gather(*(one(c) for c in calls))
        rounds = [r for r in outcomes if r is not None]
        paused = [c.id for c, r in zip(calls, outcomes, strict=True) if r is None]
        events = [make_event("TOOL_RESULT", state.run_id, iteration, tool_result=r) for _, r, _ in rounds]
        message = tool_message(rounds) if not paused else None
        return ToolRound(message=message, records=[d for _, _, d in rounds], events=events, paused=paused)


def interrupted_text(call: ToolCallBlock) -> str:
    """The result the model gets for a call that was in flight when the run's process died, not run again."""
    return (
        f"the call to {call.name} was interrupted (the process running it stopped) and was not repeated, "
        "because the tool is not marked retry_safe; its effect is unknown: check before calling it again"
    )


def tool_message(finished: Sequence[tuple[ToolOutcome, ToolResultBlock, ToolCallRecord]]) -> Message:
    """The tool message of one round: its results in the calls' order, then the images the tools returned."""
    images: list[ImageBlock] = [image for outcome, _, _ in finished for image in outcome.images]
    return Message(role="tool", content=[*(r for _, r, _ in finished), *images])


def _protected(result: ToolResultBlock) -> ToolResultBlock:
    """A journaled result as the model saw it (stored after the guardrails, so as is; is_error False reads as
    unset, as a fresh result's)."""
    return ToolResultBlock(tool_call_id=result.tool_call_id, content=result.content, is_error=result.is_error or None)


def _given(call: ToolCallBlock, text: str, *, is_error: bool) -> ToolOutcome:
    """A result segue gives itself (supplied by the client, or a refusal), without running a tool."""
    return ToolOutcome(
        result=ToolResultBlock(tool_call_id=call.id, content=text, is_error=True if is_error else None),
        duration_ms=0.0,
    )
