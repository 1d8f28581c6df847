"""Steps 4 to 6 of a run, once per iteration: lay out the request, call the provider, record, run the tools.

Each iteration's request is the plan's prefix (replayed runs and history, fitted to each serving path once)
followed by the run's own messages, laid out by the trailing-state layout. The response says who served
(segue.run.serving), the iteration is recorded in one transaction (segue.run.recorder), and the tools run
(segue.run.tool_calls) unless a call waits for approval, which pauses the run. Every step yields RunEvents.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import attrs

from segue._core.contracts import REPLAYED_META_KEY, ProviderRequest, ProviderResponse, StreamDone, WirePrefix
from segue.cache.layout import RuntimeState
from segue.cache.misses import cache_notes
from segue.catalog import CatalogError
from segue.catalog.costs import add_call
from segue.errors import ProviderError, SegueError
from segue.generated import (
    LlmInteraction,
    Message,
    PendingApproval,
    PendingCalls,
    RunCost,
    RunEvent,
    RunMeta,
    ToolCallBlock,
)
from segue.run.config import AgentConfig
from segue.run.conversation import add_usage, answer_text, tool_calls
from segue.run.guard import Guard
from segue.run.output import check_call, check_text, failure, final_call, repair_message
from segue.run.recorder import Recorder, RunEndNotStored, failed_interaction, interaction_of
from segue.run.serving import fit, observe
from segue.run.state import RunState, cut_note, make_event, stop_reason_of, truncated_message
from segue.run.tool_calls import ToolRunner
from segue.telemetry import ChatTrace, attached, response_id, traced


class Loop:
    def __init__(self, agent: AgentConfig, recorder: Recorder, tools: ToolRunner, guard: Guard) -> None:
        self.provider = agent.provider
        self.max_iterations = agent.max_iterations
        self.recorder = recorder
        self.tools = tools
        self.guard = guard
        self.catalog = agent.catalog

    async def run(self, state: RunState, *, streaming: bool, resumed: bool = False) -> AsyncIterator[RunEvent]:
        """Iterate until an answer, a pause or a limit. `resumed`: the run was paused; if its first call fails, it
        is paused again (its tool results kept) rather than ended, so the app can resume it once more."""
        try:
            while state.iteration < self.max_iterations:
                state.iteration += 1
                iteration = state.iteration
                request = self._request(state)
                started = time.perf_counter()
                response: ProviderResponse | None = None
                try:
                    async for event in self._call(state, request, streaming=streaming):
                        if isinstance(event, RunEvent):
                            yield event
                        else:
                            response = event
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
                    message = f"the provider call failed with {type(e).__name__}: {e}"
                    async for event in self.fail(state, message, type(e).__name__):
                        yield event
                    return
                assert response is not None
                async for event in self._after(state, request, response, started):
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
        except asyncio.CancelledError:
            await asyncio.shield(self.recorder.finish(state, "cancelled", None, "the run was cancelled"))
            raise
        except SegueError as e:
            # A run whose end could not be stored (a `success`, say) is recorded as an `error` with the store's
            # reason. When an `error` cannot be stored either, RunEndNotStored reaches the caller: the store
            # still holds `running`, and the caller is never told another status.
            if isinstance(e, RunEndNotStored) and e.status == "error":
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

    async def _after(
        self, state: RunState, request: ProviderRequest, response: ProviderResponse, started: float
    ) -> AsyncIterator[RunEvent]:
        """Record one response, then answer, pause for approval, or run the tools."""
        iteration = state.iteration
        latency = (time.perf_counter() - started) * 1000
        assistant = Message(role="assistant", content=list(response.message.content))
        state.usage = add_usage(state.usage, response.usage)
        response = self._priced(state, response)
        calls = tool_calls(assistant)
        state.stop_reason = stop_reason_of(response.stop_reason)
        if state.stop_reason == "max_tokens" and not calls and not response.truncated_calls:
            response = attrs.evolve(response, notes=[*response.notes, cut_note(response)])
        served = observe(state, request, response, iteration)
        state.own.append(assistant)
        interaction = interaction_of(response, iteration, latency)
        if response.truncated_calls:
            async for event in self._truncated(state, response, interaction, served, calls):
                yield event
            if state.ended or not calls:
                return
        final = final_call(state.request.output, calls)
        if final is not None or (state.request.output is not None and not calls):
            async for event in self._output(state, interaction, served, assistant, calls, final):
                yield event
            return
        if calls and any(self.tools.needs_approval(state, c) for c in calls):
            await self.recorder.record(state, iteration, interaction, [], served)
            pending = PendingCalls(
                iteration=iteration, calls=[c.id for c in calls], names={c.id: c.name for c in calls}
            )
            await self.recorder.finish(state, "waiting_approval", None, None, pending)
            state.ended = True
            for c in calls:
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
            return
        if not calls:
            await self.recorder.record(state, iteration, interaction, [], served)
            answer = self.guard.restore(answer_text(assistant), state.pii)
            await self.recorder.finish(state, "success", answer, None)
            state.ended = True
            yield make_event("RUN_COMPLETED", state.run_id, iteration, result=state.result("success", answer))
            return
        for call in calls:  # before the tools run, so a client can show "calling X..."
            yield make_event("TOOL_CALL", state.run_id, iteration, tool_call=call)
        done = await self.tools.run(state, iteration, calls, {}, None)
        state.own.append(done.message)
        for event in done.events:
            yield event
        await self.recorder.record(state, iteration, interaction, done.records, served)

    async def _truncated(
        self,
        state: RunState,
        response: ProviderResponse,
        interaction: LlmInteraction,
        served: RunMeta | None,
        calls: list[ToolCallBlock],
    ) -> AsyncIterator[RunEvent]:
        """A response with a tool call cut at the output limit (its complete calls kept by the driver). Once per
        run, when the request sent a limit (the run's max_tokens, or the driver's default where the vendor requires
        one), the model is asked again with twice that limit (the complete calls run first, as usual); otherwise
        (no limit sent: the server's own cut it, or it was raised already) the run ends with an
        OutputTruncatedError naming the limit."""
        limit = response.output_limit
        if limit is not None and state.raised_limit is None:
            state.raised_limit = limit * 2
            # A prompt-caching server answers the retry from the same cached evaluation, cut again or as text
            # (llama.cpp: cache_prompt "can cause nondeterministic results"): the retry asks for a fresh one.
            state.fresh_retry = True
            if not calls:  # nothing complete to answer: the empty turn is not sent back
                state.own.pop()
                await self.recorder.record(state, state.iteration, interaction, [], served)
            return
        await self.recorder.record(state, state.iteration, interaction, [], served)
        message = truncated_message(response, state.raised_limit)
        await self.recorder.finish(state, "error", None, message, error_type="OutputTruncatedError")
        state.ended = True
        yield make_event(
            "RUN_ERROR",
            state.run_id,
            state.iteration,
            error=message,
            result=state.result("error", error=message),
            meta={"error_type": "OutputTruncatedError", "limit": limit, "calls": list(response.truncated_calls)},
        )

    async def _call(
        self, state: RunState, request: ProviderRequest, *, streaming: bool
    ) -> AsyncIterator[RunEvent | ProviderResponse]:
        """The provider call in its `chat` span: the streamed deltas as events, then the response."""
        chat = state.trace.chat(
            vendor=state.plan.path.vendor, model=request.model or state.plan.path.model, iteration=state.iteration
        )
        if chat.recording:
            chat.request(
                system=request.system,
                messages=request.messages,
                tools=request.tools,
                max_tokens=request.settings.max_tokens,
                stream=streaming,
                json_output=request.output is not None,
            )
        try:
            if streaming:
                async for item in traced(chat, self._stream(state, request)):
                    if isinstance(item, ProviderResponse):
                        _answered(chat, item)
                    yield item
            else:
                with attached(chat):  # the vendor SDK's own spans nest in the chat span
                    response = await self.provider.complete(request)
                _answered(chat, response)
                yield response
        except BaseException as e:
            chat.fail(e, kind=e.kind if isinstance(e, ProviderError) else None)
            raise

    def _priced(self, state: RunState, response: ProviderResponse) -> ProviderResponse:
        """Add the call's cost to the run's, and what kept it from the cache to the notes the response brings."""
        model = response.served_model or response.model  # the model that served prices the call
        try:
            catalog = self.catalog()
            path = catalog.resolve(model, response.vendor)
        except CatalogError as e:
            state.cost = RunCost(missing=f"no prices: {e}", prices=state.cost.prices if state.cost else [])
            return response
        twin = response.served_by == "twin"
        state.cost = add_call(state.cost, catalog, model, response.vendor, response.usage, twin=twin)
        previous = state.last_request
        same_path = previous is not None and previous[0] == (response.vendor, model)
        found = cache_notes(
            path, response.request_body, response.usage, previous[1] if same_path and previous else None
        )
        state.last_request = ((response.vendor, model), response.request_body)
        return attrs.evolve(response, notes=[*response.notes, *found]) if found else response

    async def _output(
        self,
        state: RunState,
        interaction: LlmInteraction,
        served: RunMeta | None,
        assistant: Message,
        calls: list[ToolCallBlock],
        final: ToolCallBlock | None,
    ) -> AsyncIterator[RunEvent]:
        """A final answer when the run asked for structured output: success with the value, a repair turn, or an
        error result naming the JSON path (segue.run.output)."""
        spec = state.request.output
        assert spec is not None
        iteration = state.iteration
        # Checked in a worker thread: a large answer, or a schema that makes validation slow, never stalls the
        # event loop (the other runs), and the validator starts on a fresh stack.
        if final is not None:
            checked = await asyncio.to_thread(check_call, spec, final, calls)
        else:
            text = self.guard.restore(answer_text(assistant), state.pii)
            checked = await asyncio.to_thread(check_text, spec, text)
        state.own.extend(checked.messages)
        if checked.error is None:
            await self.recorder.record(state, iteration, interaction, [], served)
            await self.recorder.finish(state, "success", checked.answer, None)
            state.ended = True
            result = state.result("success", checked.answer, output=checked.value)
            yield make_event("RUN_COMPLETED", state.run_id, iteration, result=result)
            return
        if state.repairs < state.request.repairs and iteration < self.max_iterations:
            state.repairs += 1
            if final is None:
                state.own.append(repair_message(checked.error))
            await self.recorder.record(state, iteration, interaction, [], served)
            return
        await self.recorder.record(state, iteration, interaction, [], served)
        message = failure(spec, checked.error, state.repairs)
        await self.recorder.finish(state, "error", checked.answer, message)
        state.ended = True
        yield make_event(
            "RUN_ERROR",
            state.run_id,
            iteration,
            error=message,
            result=state.result("error", checked.answer, error=message),
            meta={"error_type": "OutputValidationError"},
        )

    async def _stream(self, state: RunState, request: ProviderRequest) -> AsyncIterator[RunEvent | ProviderResponse]:
        """The streamed call: its text and reasoning deltas as events, then the response."""
        response: ProviderResponse | None = None
        restorer = self.guard.deltas(state.pii)
        async for item in self.provider.stream(request):
            if isinstance(item, StreamDone):
                response = item.response
            elif item.kind == "text" and (text := restorer.feed(item.text)):
                yield make_event("TEXT_DELTA", state.run_id, state.iteration, text=text)
            elif item.kind == "reasoning":
                yield make_event("REASONING_DELTA", state.run_id, state.iteration, text=item.text)
        if tail := restorer.flush():
            yield make_event("TEXT_DELTA", state.run_id, state.iteration, text=tail)
        if response is None:
            raise ProviderError("the stream ended without a final message", vendor=self.provider.vendor, kind="stream")
        yield response

    def _request(self, state: RunState) -> ProviderRequest:
        plan = state.plan
        messages = [*plan.prefix, *state.own]
        if plan.layout is not None:
            runtime = RuntimeState(
                run_id=state.run_id,
                iteration=state.iteration,
                max_iterations=self.max_iterations,
                usage_so_far=state.usage,
                app_state=state.request.metadata,
            )
            fragment = plan.layout.fragment_for(state.iteration, runtime)
            messages = plan.layout.lay_out(messages, fragment, state.iteration)
        return provider_request(state, messages)

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


def _answered(chat: ChatTrace, response: ProviderResponse) -> None:
    if chat.recording:
        chat.finish(
            vendor=response.vendor,
            model=response.model,
            usage=response.usage,
            stop_reason=response.stop_reason,
            response_id=response_id(response.response_body),
            message=response.message,
            server_address=response.server_address,
            server_port=response.server_port,
            sdk_span=response.sdk_span,
        )


def provider_request(state: RunState, messages: list[Message], *, prewarm: bool = False) -> ProviderRequest:
    """The provider request for `messages` (laid out already): the run's system prompt, stable head and tools,
    the messages fitted to each serving path, the breakpoint after the replayed runs, the run's overrides.
    Agent.prewarm sends the same for the prefix alone (segue.run.prewarm), as its one request."""
    plan = state.plan
    messages, alternatives = fit(state, messages)
    prefix = state.prefix
    if prefix is None:  # the first request: the prefix as it goes on the wire, the same on every request
        view = plan.view
        length = len(plan.prefix) if view is None else sum(view(m) is not None for m in plan.prefix)
        prefix = state.prefix = WirePrefix(length)
        replayed = [i for i, m in enumerate(messages[:length]) if m.meta and m.meta.get(REPLAYED_META_KEY)]
        state.replay_end = replayed[-1] if replayed else None
    settings = state.request.settings
    if state.raised_limit is not None:
        settings = attrs.evolve(settings, max_tokens=state.raised_limit)
    fresh, state.fresh_retry = state.fresh_retry, False  # only the retry itself
    return ProviderRequest(
        system=plan.config.system,
        stable_head=plan.config.stable_head,
        messages=messages,
        tools=plan.config.tools.definitions,
        replay_end=state.replay_end,
        model=state.request.params.model,
        vendor=state.request.params.vendor,
        cache_key=state.request.tenant_id,
        prewarm=prewarm,
        replay_path=plan.path if plan.summaries else None,
        replay_alternatives=alternatives,
        prefix=prefix,
        output=state.request.output.format if state.request.output is not None else None,
        settings=settings,
        pauses=plan.pauses,
        fresh=fresh and not prewarm,
    )
