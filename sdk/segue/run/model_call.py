"""A model step's call: the request laid out from the plan's prefix and the run's own messages (the trailing-state
layout's fragment placed), sent in its `chat` span (streamed deltas as events), then priced on the path that
served it, with what kept it from the cache. The loop (segue.run.loop) decides what the response leads to.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import attrs

from segue._core.contracts import REPLAYED_META_KEY, ProviderRequest, ProviderResponse, StreamDone, WirePrefix
from segue.cache.layout import RuntimeState
from segue.cache.misses import cache_notes
from segue.catalog import CatalogError
from segue.catalog.costs import add_call
from segue.errors import ProviderError
from segue.generated import Message, RunCost, RunEvent
from segue.run.config import AgentConfig
from segue.run.fit_iterations import fit_iteration
from segue.run.guard import Guard
from segue.run.serving import fit
from segue.run.state import RunState, make_event
from segue.telemetry import ChatTrace, attached, response_id, traced


class ModelCall:
    def __init__(self, agent: AgentConfig, guard: Guard) -> None:
        self.provider = agent.provider
        self.max_iterations = agent.max_iterations
        self.guard = guard
        self.catalog = agent.catalog

    async def call(
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

    def priced(self, state: RunState, response: ProviderResponse) -> ProviderResponse:
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
        own, state.pending_notes = state.pending_notes, []
        return attrs.evolve(response, notes=[*response.notes, *own, *found]) if found or own else response

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

    def request(self, state: RunState) -> ProviderRequest:
        plan = state.plan
        prefix, own = (
            fit_iteration(state, plan.room, plan.prefix) if plan.room is not None else (plan.prefix, state.own)
        )
        messages = [*prefix, *own]
        if state.layout is not None:
            runtime = RuntimeState(
                run_id=state.run_id,
                iteration=state.iteration,
                max_iterations=self.max_iterations,
                usage_so_far=state.usage,
                app_state=state.request.metadata,
            )
            fragment = state.layout.fragment_for(state.iteration, runtime)
            messages = state.layout.lay_out(messages, fragment, state.iteration)
        return provider_request(state, messages)


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
            cache_verdict=response.cache_verdict,
        )


def provider_request(state: RunState, messages: list[Message], *, prewarm: bool = False) -> ProviderRequest:
    """The provider request for `messages` (laid out already): the run's system prompt, stable head and tools,
    the messages fitted to each serving path, the breakpoint after the replayed runs, the run's overrides.
    Agent.prewarm sends the same for the prefix alone (segue.run.prewarm), as its one request."""
    plan = state.plan
    messages, alternatives = fit(state, messages)
    wire_prefix = state.wire_prefix
    if wire_prefix is None:  # the first request: the prefix as it goes on the wire, the same on every request
        view = plan.view
        kept = plan.prefix[state.prefix_cut :]  # less the replayed runs a later iteration left out to fit
        length = len(kept) if view is None else sum(view(m) is not None for m in kept)
        wire_prefix = state.wire_prefix = WirePrefix(length)
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
        cache_key=state.request.cache_key(state.run_id),
        prewarm=prewarm,
        replay_path=plan.path if plan.summaries else None,
        replay_alternatives=alternatives,
        wire_prefix=wire_prefix,
        output=state.request.output.format if state.request.output is not None else None,
        settings=settings,
        pauses=plan.pauses,
        diagnose=plan.diagnose,
        previous_response=state.previous_response,
        fresh=fresh and not prewarm,
    )
