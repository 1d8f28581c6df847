"""Step 5 of a run: its steps. A model step (its request laid out, sent and priced by segue.run.model_call)
records the response (one transaction, before any of its tools runs); it ends the run (an answer, a checked output,
a cut call), pauses it for approval, or leads to one tool step per call (segue.run.tool_calls: run concurrently,
each result recorded as it completes), which lead to the next model step. The run's end is recorded once.

Each request is the plan's prefix (replayed runs and history, fitted to each serving path once) followed by the
run's own messages, laid out by the trailing-state layout; the response says who served (segue.run.serving).
Every step yields RunEvents.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

import attrs

from segue._core.contracts import ProviderRequest, ProviderResponse
from segue._core.schema_work import validating
from segue.errors import ProviderError, SegueError
from segue.generated import (
    Message,
    PendingApproval,
    PendingCalls,
    RunEvent,
    RunStatus,
    ToolCallBlock,
    ToolCallRecord,
)
from segue.run.cache_watch import watch
from segue.run.config import AgentConfig
from segue.run.conversation import add_usage, answer_text, tool_calls
from segue.run.events import mark
from segue.run.guard import Guard
from segue.run.model_call import ModelCall
from segue.run.next_step import announcing, answers, next_step
from segue.run.output import check_call, check_text, failure, final_call, repair_message
from segue.run.recorder import Recorder, RunEndNotStored, failed_interaction, interaction_of
from segue.run.serving import observe
from segue.run.state import (
    RunState,
    cut_note,
    failed_tool_note,
    make_event,
    stop_reason_of,
    truncated_message,
)
from segue.run.steps import StepRef
from segue.run.tool_calls import ToolRunner, interrupted_text
from segue.store.leases import LeaseLost


@attrs.frozen(kw_only=True)
class Answered:
    """A model step's recorded response: its events, the response (priced), the assistant message, and whether the
    call is asked again (a call cut at the output limit)."""

    events: list[RunEvent]
    response: ProviderResponse
    assistant: Message
    ask_again: bool


class Loop:
    def __init__(self, agent: AgentConfig, recorder: Recorder, tools: ToolRunner, guard: Guard) -> None:
        self.provider = agent.provider
        self.max_iterations = agent.max_iterations
        self.recorder = recorder
        self.tools = tools
        self.guard = guard
        self.catalog = agent.catalog
        self.model = ModelCall(agent, guard)

    async def run(self, state: RunState, *, streaming: bool, resumed: bool = False) -> AsyncIterator[RunEvent]:
        """Iterate until an answer, a pause or a limit. `resumed`: the run was paused; if its first call fails, it
        is paused again (its tool results kept) rather than ended, so the app can resume it once more."""
        try:
            while state.iteration < self.max_iterations:
                state.iteration += 1
                iteration = state.iteration
                started = time.perf_counter()
                response: ProviderResponse | None = None
                answered: Answered | None = None
                request: ProviderRequest | None = None
                try:
                    # Fitted to the context window first: a request that cannot fit ends the run unsent.
                    request = self.model.request(state)
                    if state.steps is None:
                        async for event in self.model.call(state, request, streaming=streaming):
                            if isinstance(event, RunEvent):
                                yield event
                            else:
                                response = event
                    else:  # an engine runs the step: the call and the record of its response, as one
                        ref = StepRef(kind="model_call", run_id=state.run_id, iteration=iteration)
                        events, outcome = await state.steps.model_call(
                            ref, functools.partial(self._model_step, state, request, started, streaming=streaming)
                        )
                        for event in events:
                            yield event
                        if isinstance(outcome, Exception):
                            raise outcome
                        answered = outcome
                except ProviderError as e:
                    message = f"{e.kind} error from {e.vendor}: {e}"
                    if e.kind == "model_output" and e.request_body is not None:
                        # The evidence of an error the same prompt repeats: the request and the server's answer.
                        failed = failed_interaction(e, state.iteration, (time.perf_counter() - started) * 1000)
                        await self.recorder.record(state, state.iteration, failed, [])
                    if resumed and iteration == state.resumed_at + 1:
                        async for event in self._pause_again(state, message):
                            yield event
                        return
                    async for event in self.fail(state, message, type(e).__name__, kind=e.kind):
                        yield event
                    return
                except Exception as e:  # a driver bug or an unparseable answer: the run must not stay "running"
                    if request is None:  # app code laying out the request (trailing_state) failed: it surfaces
                        raise
                    message = f"the provider call failed with {type(e).__name__}: {e}"
                    async for event in self.fail(state, message, type(e).__name__):
                        yield event
                    return
                assert request is not None
                if answered is None:
                    assert response is not None
                    answered = await self._answered(state, request, response, started)
                    for event in answered.events:
                        yield event
                async for event in self._then(state, answered):
                    yield event
                if state.ended:
                    return
            message = f"stopped after max_iterations={self.max_iterations} without a final answer"
            await self.recorder.finish(state, "max_iterations", None, message)
            yield make_event(
                "RUN_COMPLETED",
                state.run_id,
                state.iteration,
                result=state.result("max_iterations", error=message),
            )
        except SegueError as e:
            # A run whose end could not be stored (a `success`, say) is recorded as an `error` with the store's
            # reason. When an `error` cannot be stored either, RunEndNotStored reaches the caller: the store
            # still holds `running`, and the caller is never told another status.
            if isinstance(e, RunEndNotStored) and e.status == "error":
                raise
            if isinstance(e, LeaseLost):  # the run is no longer this process's: nothing more is written for it
                raise
            cause = e.cause if isinstance(e, RunEndNotStored) else e
            async for event in self.fail(state, str(cause), type(cause).__name__):
                yield event
        except Exception as e:
            # A bug in segue or in app code it calls (e.g. trailing_state): record it so the run is terminal, and
            # let it surface.
            await asyncio.shield(
                self.recorder.finish(state, "error", None, f"{type(e).__name__}: {e}", error_type=type(e).__name__)
            )
            raise

    async def _model_step(
        self, state: RunState, request: ProviderRequest, started: float, *, streaming: bool
    ) -> tuple[list[RunEvent], Answered | Exception]:
        """A model step run by an engine (segue.run.steps): the call and the record of its response, its events
        gathered. A failed call is returned, not raised, so the engine keeps the step and the loop ends the run."""
        events: list[RunEvent] = []
        response: ProviderResponse | None = None
        try:
            async for event in self.model.call(state, request, streaming=streaming):
                if isinstance(event, RunEvent):
                    events.append(event)
                else:
                    response = event
        except Exception as e:
            return events, e
        assert response is not None
        answered = await self._answered(state, request, response, started, ahead=len(events))
        return [*events, *answered.events], answered

    async def _answered(
        self, state: RunState, request: ProviderRequest, response: ProviderResponse, started: float, *, ahead: int = 0
    ) -> Answered:
        """The model step's end: its response priced and recorded, in one transaction, before any of its tools
        runs. `ahead`: the step's events not yet yielded (an engine's step yields them once it is done)."""
        iteration = state.iteration
        latency = (time.perf_counter() - started) * 1000
        assistant = Message(role="assistant", content=list(response.message.content))
        state.usage = add_usage(state.usage, response.usage)
        response = self.model.priced(state, response)
        calls = tool_calls(assistant)
        state.stop_reason = stop_reason_of(response.stop_reason)
        if state.stop_reason == "max_tokens" and not calls and not response.truncated_calls:
            response = attrs.evolve(response, notes=[*response.notes, cut_note(response)])
        # An answer (plain text, or the final-answer tool alone) that follows a failed tool call is noted.
        final = final_call(state.request.output, calls)
        failed = None if calls and calls != [final] else failed_tool_note(state.own)
        if failed is not None:
            response = attrs.evolve(response, notes=[*response.notes, failed])
        meta_updates, watched = watch(state, response, observe(state, request, response, iteration))
        state.own.append(assistant)
        # A call cut at the output limit is asked again once with twice the limit the request sent; a turn with
        # nothing complete in it is not sent back.
        ask_again = bool(response.truncated_calls) and response.output_limit is not None and state.raised_limit is None
        if ask_again:
            state.raised_limit = 2 * (response.output_limit or 0)
            # A prompt-caching server answers the retry from the same cached evaluation, cut again or as text
            # (llama.cpp: cache_prompt "can cause nondeterministic results"): the retry asks for a fresh one.
            state.fresh_retry = True
            if not calls:
                state.own.pop()
        # The step's events, counted with its record: the ones it yields after it without I/O too.
        now, later = (
            (0, 0)
            if response.truncated_calls and not ask_again
            else announcing(state, self.tools, assistant, answers=answers(response, assistant, ask_again))
        )
        events = mark(state.events + ahead + len(watched) + now, later)
        await self.recorder.record_response(state, interaction_of(response, iteration, latency), meta_updates, events)
        return Answered(events=list(watched), response=response, assistant=assistant, ask_again=ask_again)

    async def _then(self, state: RunState, answered: Answered) -> AsyncIterator[RunEvent]:
        """What a recorded response leads to: a cut call's end, else the run's end, a pause or its tool steps."""
        if answered.response.truncated_calls and not answered.ask_again:
            async for event in self._truncated(state, answered.response):
                yield event
            return
        async for event in self._next(
            state, answered.assistant, answers=answers(answered.response, answered.assistant, answered.ask_again)
        ):
            yield event

    async def _next(
        self,
        state: RunState,
        assistant: Message,
        *,
        answers: bool = True,
        finished: Mapping[str, ToolCallRecord] | None = None,
        interrupted: Collection[str] = (),
    ) -> AsyncIterator[RunEvent]:
        """What a recorded response leads to: the run's end (an answer, a checked output), a pause for approval,
        or its tool steps. `answers`: a response without calls is the answer (not when it is asked again).
        Recovery (segue.run.recovery) continues here from the journal: `finished` results are not run again,
        `interrupted` calls get an error result instead of running."""
        calls = tool_calls(assistant)
        step = next_step(state, self.tools, calls, answers=answers, finished=finished, interrupted=interrupted)
        if step == "output":
            async for event in self._output(state, assistant, calls, final_call(state.request.output, calls)):
                yield event
            return
        if step == "pause":
            async for event in self._pause(state, calls):
                yield event
            return
        if step == "ask_again":
            async for event in self._ask_again(state, calls, finished or {}, interrupted):
                yield event
            return
        if step == "end":
            if answers:
                answer = self.guard.restore(answer_text(assistant), state.pii)
                async for event in self._end(state, "success", answer, None):
                    yield event
            return
        async for event in self.tool_round(state, calls, {}, None, finished or {}, interrupted):
            yield event

    async def tool_round(
        self,
        state: RunState,
        calls: list[ToolCallBlock],
        decisions: Mapping[str, bool],
        tool_results: Mapping[str, str] | None,
        finished: Mapping[str, ToolCallRecord],
        interrupted: Collection[str] = (),
    ) -> AsyncIterator[RunEvent]:
        """One round of tool steps: starts of non-retry_safe calls journaled, a TOOL_CALL per call it runs, each result
        recorded as it completes. A resumed run brings approvals and client results; a recovered one its journal's
        `finished` results (not run again) and `interrupted` calls."""
        starting = self.tools.starts(state, state.iteration, calls, decisions, tool_results, {*finished, *interrupted})
        await self.recorder.record_tool_starts(state, starting)
        for call in calls:
            if call.id not in finished:
                yield make_event("TOOL_CALL", state.run_id, state.iteration, tool_call=call)
        done = await self.tools.run(
            state,
            state.iteration,
            calls,
            decisions,
            tool_results,
            record=self.recorder.record_tool,
            finished=finished,
            interrupted=interrupted,
        )
        for event in done.events:
            yield event
        if done.paused:
            async for event in self._pause(state, [c for c in calls if c.id in done.paused], sub_runs=True):
                yield event

    async def recovered(
        self,
        state: RunState,
        *,
        streaming: bool,
        finished: Mapping[str, ToolCallRecord],
        interrupted: Collection[str],
    ) -> AsyncIterator[RunEvent]:
        """Continue a recovered run from its journal (segue.run.recovery): the last recorded response's next step
        when it has not happened (its tools, or its end), then the loop as usual."""
        last = state.own[-1] if state.own else None
        try:
            if last is not None and last.role == "assistant":
                async for event in self._next(state, last, finished=finished, interrupted=interrupted):
                    yield event
        except SegueError as e:
            if isinstance(e, LeaseLost):
                raise
            async for event in self.fail(state, str(e), type(e).__name__):
                yield event
            return
        if not state.ended:
            async for event in self.run(state, streaming=streaming):
                yield event

    async def _end(
        self,
        state: RunState,
        status: RunStatus,
        answer: str | None,
        error: str | None,
        *,
        output: Any = None,
        error_type: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> AsyncIterator[RunEvent]:
        """The run's end, recorded once, and its event."""
        await self.recorder.finish(state, status, answer, error, error_type=error_type)
        state.ended = True
        result = state.result(status, answer, error=error, output=output)
        if status == "success":
            yield make_event("RUN_COMPLETED", state.run_id, state.iteration, result=result)
            return
        event_meta = {"error_type": error_type, **(meta or {})} if error_type else meta
        yield make_event("RUN_ERROR", state.run_id, state.iteration, error=error, result=result, meta=event_meta)

    async def _pause(
        self, state: RunState, calls: list[ToolCallBlock], *, sub_runs: bool = False
    ) -> AsyncIterator[RunEvent]:
        """A call waits for approval: the run pauses with every call of the response pending. `sub_runs`: the
        calls ran, and the sub-runs they made (segue.run.subrun) wait for approval; resuming approves those."""
        iteration = state.iteration
        pending = PendingCalls(iteration=iteration, calls=[c.id for c in calls], names={c.id: c.name for c in calls})
        events = mark(state.events + (0 if sub_runs else len(calls)) + 1)  # its TOOL_CALLs and RUN_PAUSED follow
        await self.recorder.finish(state, "waiting_approval", None, None, pending, events=events)
        state.ended = True
        for c in [] if sub_runs else calls:
            yield make_event(
                "TOOL_CALL",
                state.run_id,
                iteration,
                tool_call=c,
                meta={"requires_approval": self.tools.needs_approval(state, c)},
            )
        yield make_event(
            "RUN_PAUSED",
            state.run_id,
            iteration,
            result=state.result(
                "waiting_approval", pending=[PendingApproval(call_id=c.id, name=c.name) for c in calls]
            ),
            meta={"pending": pending.calls},
        )

    async def _ask_again(
        self,
        state: RunState,
        calls: list[ToolCallBlock],
        finished: Mapping[str, ToolCallRecord],
        interrupted: Collection[str],
    ) -> AsyncIterator[RunEvent]:
        """A recovered round in which an approved call was in flight: its effect is unknown, so the run pauses for
        approval again rather than telling the model it was interrupted. The round's other interrupted calls get
        that result now (they never run twice); the calls without a result wait, and resuming runs them beside the
        journal's results (segue.run.pipeline)."""
        for call in calls:
            if call.id in interrupted and not self.tools.needs_approval(state, call):
                record = ToolCallRecord(
                    call_id=call.id,
                    iteration=state.iteration,
                    name=call.name,
                    arguments=call.arguments,
                    result=interrupted_text(call),
                    is_error=True,
                    duration_ms=0.0,
                )
                await self.recorder.record_tool(state, record, None)
                finished = {**finished, call.id: record}
        async for event in self._pause(state, [c for c in calls if c.id not in finished]):
            yield event

    async def _truncated(self, state: RunState, response: ProviderResponse) -> AsyncIterator[RunEvent]:
        """A tool call cut at the output limit when it cannot be asked again (no limit was sent: the server's own
        cut it, or it was raised already): the run ends with an OutputTruncatedError naming the limit."""
        message = truncated_message(response, state.raised_limit)
        meta = {"limit": response.output_limit, "calls": list(response.truncated_calls)}
        async for event in self._end(state, "error", None, message, error_type="OutputTruncatedError", meta=meta):
            yield event

    async def _output(
        self, state: RunState, assistant: Message, calls: list[ToolCallBlock], final: ToolCallBlock | None
    ) -> AsyncIterator[RunEvent]:
        """A final answer when the run asked for structured output: success with the value, a repair turn, or an
        error result naming the JSON path (segue.run.output)."""
        spec = state.request.output
        assert spec is not None
        # Checked on the validation threads: a large answer, or a schema that makes validation slow, never stalls
        # the event loop (the other runs) nor the store's calls, and the validator starts on a fresh stack.
        if final is not None:
            checked = await validating(check_call, spec, final, calls)
        else:
            text = self.guard.restore(answer_text(assistant), state.pii)
            checked = await validating(check_text, spec, text)
        state.own.extend(checked.messages)
        if checked.error is None:
            async for event in self._end(state, "success", checked.answer, None, output=checked.value):
                yield event
            return
        if state.repairs < state.request.repairs and state.iteration < self.max_iterations:
            state.repairs += 1
            if final is None:
                state.own.append(repair_message(checked.error))
            return
        message = failure(spec, checked.error, state.repairs)
        async for event in self._end(state, "error", checked.answer, message, error_type="OutputValidationError"):
            yield event

    async def _pause_again(self, state: RunState, message: str) -> AsyncIterator[RunEvent]:
        """The first call after a resume failed: the run waits again, with its tool results kept and no call
        pending, so resuming it once more retries the call."""
        state.iteration = state.resumed_at
        await self.recorder.finish(
            state, "waiting_approval", None, message, PendingCalls(iteration=state.iteration, calls=[])
        )
        yield make_event(
            "RUN_PAUSED",
            state.run_id,
            state.iteration,
            error=message,
            result=state.result("waiting_approval", error=message),
            meta={"pending": [], "error_type": "ProviderError"},
        )

    async def fail(
        self, state: RunState, message: str, error_type: str, *, kind: str | None = None
    ) -> AsyncIterator[RunEvent]:
        """End the run as `error`; `kind`: a ProviderError's kind (rate_limit, server, model_output, ...), in the
        RUN_ERROR event's meta beside error_type, so a client tells what failed without parsing the message."""
        await self.recorder.finish(state, "error", None, message, error_type=error_type)
        yield make_event(
            "RUN_ERROR",
            state.run_id,
            state.iteration,
            error=message,
            result=state.result("error", error=message),
            meta={"error_type": error_type, **({"kind": kind} if kind is not None else {})},
        )
