"""Tool execution for a run: which calls wait for approval, and running (or denying) the calls of one iteration.

The tools a run may call are its RunConfig's. An unknown tool, a denied call, invalid arguments, an exception or
a timeout become an error result the model sees, never a crash of the run (segue.tools). Arguments reach the
tool with the guardrail's placeholders restored; results go back through the guardrails before the model sees
them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import attrs

from segue.generated import Message, RunEvent, ToolCallBlock, ToolCallRecord, ToolResultBlock
from segue.run.guard import Guard
from segue.run.state import RunState, make_event


@attrs.frozen(kw_only=True)
class ToolRound:
    """What one iteration's calls produced: the tool message for the model, the records for the store, and a
    TOOL_RESULT event per call."""

    message: Message
    records: list[ToolCallRecord]
    events: list[RunEvent]


class ToolRunner:
    def __init__(self, guard: Guard) -> None:
        self.guard = guard

    def needs_approval(self, state: RunState, call: ToolCallBlock) -> bool:
        tool = state.plan.config.tools.get(call.name)
        return tool is not None and tool.requires_approval

    async def run(
        self,
        state: RunState,
        iteration: int,
        calls: Sequence[ToolCallBlock],
        decisions: Mapping[str, bool],
        supplied: Mapping[str, str] | None,
    ) -> ToolRound:
        """Execute (or deny) each call, concurrently. `decisions` approve calls that need it; `supplied` holds
        results the client computed itself (client-side tools)."""
        tools = state.plan.config.tools

        async def one(call: ToolCallBlock) -> tuple[ToolResultBlock, float]:
            if supplied is not None and call.id in supplied:
                return ToolResultBlock(tool_call_id=call.id, content=supplied[call.id]), 0.0
            tool = tools.get(call.name)
            if tool is None:
                known = ", ".join(sorted(tools)) or "none"
                text = f"unknown tool {call.name!r}; the tools available are: {known}"
                return ToolResultBlock(tool_call_id=call.id, content=text, is_error=True), 0.0
            if tool.requires_approval and not decisions.get(call.id, False):
                text = f"the user did not approve calling {call.name}; do not retry it without asking"
                return ToolResultBlock(tool_call_id=call.id, content=text, is_error=True), 0.0
            arguments = self.guard.restore_arguments(call.arguments, state.pii)
            outcome = await tool.invoke(call.id, arguments)
            return outcome.result, outcome.duration_ms

        outcomes = await asyncio.gather(*(one(c) for c in calls))
        results: list[ToolResultBlock] = []
        records: list[ToolCallRecord] = []
        events: list[RunEvent] = []
        for call, (result, duration) in zip(calls, outcomes, strict=True):
            content = self.guard.protect(result.content, state.pii)
            result = ToolResultBlock(tool_call_id=call.id, content=content, is_error=result.is_error)
            results.append(result)
            records.append(
                ToolCallRecord(
                    call_id=call.id,
                    iteration=iteration,
                    name=call.name,
                    arguments=call.arguments,
                    result=content,
                    is_error=bool(result.is_error),
                    duration_ms=duration,
                )
            )
            events.append(make_event("TOOL_RESULT", state.run_id, iteration, tool_result=result))
        return ToolRound(message=Message(role="tool", content=list(results)), records=records, events=events)
