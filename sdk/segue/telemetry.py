"""OpenTelemetry traces of runs, after the GenAI semantic conventions (`pip install 'segue[otel]'`).

One span per run (`invoke_agent {agent}`, INTERNAL), one per LLM request (`chat {model}`, CLIENT) and one per
tool call (`execute_tool {tool}`, INTERNAL), nested in that order. They carry the conventions' attributes
(`gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.response.model`, the usage
counts including `gen_ai.usage.cache_read.input_tokens` and `gen_ai.usage.cache_creation.input_tokens`,
`gen_ai.conversation.id`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `error.type`) and segue's own under
`segue.*` (run id, replay counts, reasoning kept and dropped, the layout decision, cost).

Only the opentelemetry-api is used: with no tracer provider configured every span is a non-recording one and
nothing is computed for it; without the package installed, tracing is off. Message contents (the conventions'
opt-in `gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`, `gen_ai.tool.definitions`,
`gen_ai.tool.call.arguments` / `.result`) are recorded only when the app opts in: `Telemetry(capture_content=True)`
or the conventions' switch `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` (`true`, `SPAN_ONLY` or
`SPAN_AND_EVENT`). Never by default.

Spans are made current only around the awaits they cover (`attached`), never across a `yield` of the run's event
stream, so the app's code between events never runs inside a segue span, and the vendor SDKs' own spans (e.g. an
OpenAI or Anthropic instrumentation, the MCP SDK's client spans) nest under the `chat` and `execute_tool` spans.

One span per request carries its usage. The anthropic SDK emits its own span per API call, with the call's usage:
segue turns it off on the clients it builds (`providers.anthropic.without_sdk_spans`), and when an app's client
keeps it on, on the tracer provider segue traces to, segue's `chat` span leaves the usage to it
(`segue.usage.on_sdk_span`). docs/observability.md says the same for users.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from segue._core.contracts import SDK_SPAN_GLOBAL
from segue._core.telemetry_content import CONTENT_LIMIT, content_json, cut_text, semconv_message
from segue.generated import (
    CacheCollapse,
    CacheVerdict,
    Message,
    ReplaySummary,
    ToolCallBlock,
    ToolDefinition,
    ToolResultBlock,
    Usage,
)

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace as otel_trace
except ImportError:  # pragma: no cover - the otel extra is not installed
    otel_trace = None  # type: ignore[assignment]
    otel_context = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer, TracerProvider

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CONTENT_ON = frozenset({"true", "span_only", "span_and_event"})
#: segue's stop reasons (Anthropic's vocabulary, which every driver maps its vendor's to) as the conventions'
#: finish reasons (the output message schema's `stop`, `length`, `content_filter`, `tool_call`); others as they are.
#: The usage counts the anthropic SDK's own span of a request carries (2.14: `gen_ai.usage.input_tokens`, cached
#: tokens included, in `lib/_tracing/_response.py`; the others in `_tracing.py` SPAN_ATTRIBUTES). Its cache writes
#: go under a name of its own (`gen_ai.usage.cache_write.input_tokens`), so segue's span keeps the conventions'
#: `gen_ai.usage.cache_creation.input_tokens`: each count is on one span per request.
SDK_SPAN_USAGE = frozenset(
    {
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.reasoning.output_tokens",
    }
)
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "end": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_call",
    "refusal": "content_filter",
    "content_filter": "content_filter",
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("segue")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
        return "0"


class Telemetry:
    """How an agent traces its runs: `Agent(telemetry=Telemetry(...))`. The default traces to the global tracer
    provider, which is a no-op until the app sets one (e.g. the OpenTelemetry SDK with an OTLP exporter).

    tracer_provider: a TracerProvider to use instead of the global one.
    capture_content: record message contents on spans (True), never (False), or as the environment variable
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT says (None, the default; unset means never).
    """

    def __init__(self, *, tracer_provider: TracerProvider | None = None, capture_content: bool | None = None) -> None:
        if otel_trace is None and (tracer_provider is not None or capture_content):
            raise ImportError("tracing needs the OpenTelemetry API: pip install 'segue[otel]'")
        if capture_content is not None and not isinstance(capture_content, bool):
            raise TypeError(f"capture_content must be True, False or None, got {capture_content!r}")
        self._provider = tracer_provider
        self._capture = capture_content
        self._tracer: Tracer | None = None

    @property
    def capture_content(self) -> bool:
        if self._capture is not None:
            return self._capture
        return os.environ.get(CONTENT_ENV, "").strip().lower() in _CONTENT_ON

    def tracer(self) -> Tracer | None:
        if otel_trace is None:
            return None
        if self._tracer is None:
            self._tracer = otel_trace.get_tracer("segue", _version(), tracer_provider=self._provider)
        return self._tracer

    def run(self, *, agent: str, vendor: str, model: str) -> RunTrace:
        """Start the `invoke_agent` span of one run (ended by RunTrace.finish / .fail)."""
        tracer = self.tracer()
        if tracer is None:
            return RunTrace.off()
        span = tracer.start_span(
            f"invoke_agent {agent}",
            kind=otel_trace.SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": vendor,
                "gen_ai.agent.name": agent,
                "gen_ai.request.model": model,
            },
        )
        if not span.is_recording():
            return RunTrace.off()
        return RunTrace(tracer, span, capture=self.capture_content, provider=self._provider)


class _Trace:
    """A span that may be absent (tracing off, or a non-recording span): every method is then a no-op."""

    def __init__(self, span: Span | None) -> None:
        self.span = span

    @property
    def recording(self) -> bool:
        """Whether the span records (tracing on, sampled, not ended): attributes are computed only then."""
        return self.span is not None

    @property
    def context(self) -> Context | None:
        return otel_trace.set_span_in_context(self.span) if self.span is not None else None

    def _error(self, error_type: str, description: str | None) -> None:
        assert self.span is not None
        self.span.set_attribute("error.type", error_type)
        self.span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, description))


class RunTrace(_Trace):
    """The `invoke_agent` span of one run, and the factory of its `chat` and `execute_tool` spans."""

    def __init__(
        self, tracer: Tracer | None, span: Span | None, *, capture: bool, provider: TracerProvider | None = None
    ) -> None:
        super().__init__(span)
        self._tracer = tracer
        self.capture = capture
        #: The tracer provider the spans go to (None: the global one).
        self.provider = provider
        #: The model that answered the run's latest request (set by its chat span).
        self.response_model: str | None = None

    @classmethod
    def off(cls) -> RunTrace:
        """A trace that records nothing (tracing off)."""
        return cls(None, None, capture=False)

    def started(
        self,
        *,
        run_id: str,
        conversation_id: str,
        tenant_id: str,
        replay: ReplaySummary | None,
        continued_from: str | None,
    ) -> None:
        """The run row exists: who it is and what it replays."""
        if self.span is None:
            return
        attributes: dict[str, Any] = {
            "segue.run.id": run_id,
            "gen_ai.conversation.id": conversation_id,
            "segue.tenant.id": tenant_id,
        }
        if continued_from is not None:
            attributes["segue.continued_from"] = continued_from
        if replay is not None:
            attributes.update(replay_attributes(replay))
        self.span.set_attributes(attributes)

    def chat(self, *, vendor: str, model: str, iteration: int) -> ChatTrace:
        if self._tracer is None or self.span is None:
            return ChatTrace(None, capture=False, run=self)
        span = self._tracer.start_span(
            f"chat {model}",
            context=self.context,
            kind=otel_trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": vendor,
                "gen_ai.request.model": model,
                "segue.iteration": iteration,
            },
        )
        return ChatTrace(span, capture=self.capture, run=self)

    def tool(self, call: ToolCallBlock, *, source: str | None) -> ToolTrace:
        if self._tracer is None or self.span is None:
            return ToolTrace(None, capture=False)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            # "function": the app's own code; "extension": a service the agent calls (an MCP server).
            "gen_ai.tool.type": "extension" if source is not None else "function",
        }
        if source is not None:
            attributes["segue.tool.source"] = source
        if self.capture:
            attributes["gen_ai.tool.call.arguments"] = content_json(call.arguments)
        span = self._tracer.start_span(
            f"execute_tool {call.name}", context=self.context, kind=otel_trace.SpanKind.INTERNAL, attributes=attributes
        )
        return ToolTrace(span, capture=self.capture)

    def finish(
        self,
        *,
        status: str,
        usage: Usage | None,
        iterations: int,
        response_model: str | None = None,
        replay: ReplaySummary | None = None,
        layout: str | None = None,
        cost_usd: float | None = None,
        served_by: str | None = None,
        error_type: str | None = None,
        error: str | None = None,
    ) -> None:
        """End the span with the run's outcome: status, usage totals, the final replay summary, layout, cost, and
        who served it ("twin": segue's emulator, whose runs carry no cost)."""
        span = self.span
        if span is None:
            return
        attributes: dict[str, Any] = {"segue.run.status": status, "segue.run.iterations": iterations}
        if usage is not None:
            attributes.update(usage_attributes(usage))
        if response_model or self.response_model:
            attributes["gen_ai.response.model"] = response_model or self.response_model
        if replay is not None:
            attributes.update(replay_attributes(replay))
        if layout is not None:
            attributes["segue.layout.mode"] = layout
        if cost_usd is not None:
            attributes["segue.cost.usd"] = cost_usd
        if served_by is not None:
            attributes["segue.served_by"] = served_by
        span.set_attributes(attributes)
        if error_type is not None:
            self._error(error_type, error if self.capture else None)
        span.end()
        self.span = None

    def cache_collapse(self, collapse: CacheCollapse) -> None:
        """A span event on the run's span: a call read far less from the cache than planned (segue.cache.collapse)."""
        if self.span is not None:
            found = {
                "segue.cache.expected_tokens": collapse.expected_tokens,
                "segue.cache.read_tokens": collapse.read_tokens,
            }
            found["segue.cache.iteration"] = collapse.iteration
            verdict = verdict_attributes(collapse.verdict) if collapse.verdict is not None else {}
            self.span.add_event("segue.cache_collapse", {**found, **verdict})

    def fail(self, error: BaseException) -> None:
        """The run ended with an exception before it had an outcome (e.g. a tool source that cannot start)."""
        if self.span is None:
            return
        if self.capture:
            self.span.record_exception(error)
        self._error(type(error).__name__, str(error) if self.capture else None)
        self.span.end()
        self.span = None


class ChatTrace(_Trace):
    """The `chat` span of one LLM request."""

    def __init__(self, span: Span | None, *, capture: bool, run: RunTrace) -> None:
        super().__init__(span)
        self.capture = capture
        self.run = run

    def request(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        max_tokens: int | None,
        stream: bool = False,
        json_output: bool = False,
    ) -> None:
        """What was asked: contents only when capture is on. `json_output`: structured output was asked for."""
        if self.span is None:
            return
        self.span.set_attributes(
            {"gen_ai.request.stream": stream, "gen_ai.output.type": "json" if json_output else "text"}
        )
        if max_tokens is not None:
            self.span.set_attribute("gen_ai.request.max_tokens", max_tokens)
        if not self.capture:
            return
        self.span.set_attributes(
            {
                "gen_ai.system_instructions": content_json([{"type": "text", "content": system}] if system else []),
                "gen_ai.input.messages": content_json([semconv_message(m) for m in messages]),
                "gen_ai.tool.definitions": content_json(
                    [
                        {"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}
                        for t in tools
                    ]
                ),
            }
        )

    def finish(
        self,
        *,
        vendor: str,
        model: str,
        usage: Usage,
        stop_reason: str,
        response_id: str | None,
        message: Message,
        server_address: str | None = None,
        server_port: int | None = None,
        sdk_span: Any = None,
        cache_verdict: CacheVerdict | None = None,
    ) -> None:
        """The response (with the vendor's cache verdict as `segue.cache.verdict*`, when asked). `sdk_span`: where
        the client's own span of the request went (ProviderResponse.sdk_span);
        when it is this trace's tracer provider, that span (a child of this one) carries the usage, so this one
        does not: a backend summing usage over spans counts each request once."""
        span = self.span
        if span is None:
            return
        self.run.response_model = model
        finish = FINISH_REASONS.get(stop_reason, stop_reason)
        attributes: dict[str, Any] = {
            "gen_ai.provider.name": vendor,
            "gen_ai.response.model": model,
            "gen_ai.response.finish_reasons": [finish],
        }
        usage_counts = usage_attributes(usage)
        if self._same_provider(sdk_span):  # the SDK's span has these counts: they are left to it
            attributes["segue.usage.on_sdk_span"] = True
            usage_counts = {k: v for k, v in usage_counts.items() if k not in SDK_SPAN_USAGE}
        attributes.update(usage_counts)
        if server_address:
            attributes["server.address"] = server_address
            if server_port is not None:
                attributes["server.port"] = server_port
        if response_id:
            attributes["gen_ai.response.id"] = response_id
        if cache_verdict is not None:
            attributes.update(verdict_attributes(cache_verdict))
        if self.capture:
            output = {**semconv_message(message), "finish_reason": finish}
            attributes["gen_ai.output.messages"] = content_json([output])
        span.set_attributes(attributes)
        span.end()
        self.span = None

    def _same_provider(self, sdk_span: Any) -> bool:
        """Whether the client's own span goes where this one goes (the global provider, or the same object)."""
        if sdk_span is None:
            return False
        mine = self.run.provider if self.run.provider is not None else otel_trace.get_tracer_provider()
        theirs = otel_trace.get_tracer_provider() if sdk_span == SDK_SPAN_GLOBAL else sdk_span
        return bool(mine is theirs)

    def fail(self, error: BaseException, *, kind: str | None = None) -> None:
        if self.span is None:
            return
        if kind is not None:
            self.span.set_attribute("segue.error.kind", kind)
        self._error(type(error).__name__, str(error) if self.capture else None)
        self.span.end()
        self.span = None


class ToolTrace(_Trace):
    """The `execute_tool` span of one tool call."""

    def __init__(self, span: Span | None, *, capture: bool) -> None:
        super().__init__(span)
        self.capture = capture

    def finish(self, result: ToolResultBlock, *, images: int = 0) -> None:
        span = self.span
        if span is None:
            return
        if images:
            span.set_attribute("segue.tool.images", images)
        if self.capture:
            span.set_attribute("gen_ai.tool.call.result", cut_text(result.content, CONTENT_LIMIT))
        if result.is_error:
            # The call did not raise: the tool (or segue, for a timeout or a refusal) answered with an error result.
            self._error("tool_error", result.content[:500] if self.capture else None)
        span.end()
        self.span = None


@contextmanager
def attached(trace: _Trace) -> Iterator[None]:
    """Make the trace's span current for the block (an await, never a yield), so spans started inside nest in it."""
    ctx = trace.context
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


T = TypeVar("T")


async def traced(trace: _Trace, items: AsyncIterator[T]) -> AsyncIterator[T]:
    """`items` with the trace's span current while each item is awaited, and not while the consumer has it (a
    stream's consumer runs between items)."""
    while True:
        with attached(trace):
            try:
                item = await anext(items)
            except StopAsyncIteration:
                return
        yield item


def verdict_attributes(verdict: CacheVerdict) -> dict[str, Any]:
    """The vendor's cache verdict as span attributes: status, reason, missed tokens (what it said)."""
    attributes: dict[str, Any] = {"segue.cache.verdict": verdict.status}
    if verdict.reason is not None:
        attributes["segue.cache.verdict.reason"] = verdict.reason
    if verdict.missed_tokens is not None:
        attributes["segue.cache.verdict.missed_tokens"] = verdict.missed_tokens
    return attributes


def usage_attributes(usage: Usage) -> dict[str, int]:
    """The conventions' usage counts. gen_ai.usage.input_tokens includes the cached tokens, as segue's does."""
    out = {"gen_ai.usage.input_tokens": usage.input_tokens, "gen_ai.usage.output_tokens": usage.output_tokens}
    if usage.cache_read_tokens is not None:
        out["gen_ai.usage.cache_read.input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens is not None:
        out["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
    if usage.reasoning_tokens is not None:
        out["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
    return out


def replay_attributes(replay: ReplaySummary) -> dict[str, Any]:
    return {
        "segue.replay.runs_full": len(replay.runs_full),
        "segue.replay.runs_text": len(replay.runs_text),
        "segue.replay.reasoning_kept": len(replay.reasoning_kept),
        "segue.replay.reasoning_dropped": len(replay.reasoning_dropped),
        "segue.replay.warnings": len(replay.warnings),
        "segue.replay.warning_causes": sorted({w.cause for w in replay.warnings}),
    }


def response_id(body: Mapping[str, Any]) -> str | None:
    value = body.get("id")
    return value if isinstance(value, str) else None
