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
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from segue.generated import (
    ImageBlock,
    Message,
    ReasoningBlock,
    ReplaySummary,
    TextBlock,
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
#: Span attributes hold strings, numbers, booleans and arrays of them: structured content goes as JSON text.
_CONTENT_LIMIT = 1_000_000


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
        return RunTrace(tracer, span, capture=self.capture_content)


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

    def __init__(self, tracer: Tracer | None, span: Span | None, *, capture: bool) -> None:
        super().__init__(span)
        self._tracer = tracer
        self.capture = capture
        #: Who answered the run's latest request (set by its chat span).
        self.response_model: str | None = None
        self.response_vendor: str | None = None

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
            attributes["gen_ai.tool.call.arguments"] = _json(call.arguments)
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
        self, *, system: str, messages: Sequence[Message], tools: Sequence[ToolDefinition], max_tokens: int | None
    ) -> None:
        """What was asked: contents only when capture is on."""
        if self.span is None:
            return
        if max_tokens is not None:
            self.span.set_attribute("gen_ai.request.max_tokens", max_tokens)
        if not self.capture:
            return
        self.span.set_attributes(
            {
                "gen_ai.system_instructions": _json([{"type": "text", "content": system}] if system else []),
                "gen_ai.input.messages": _json([semconv_message(m) for m in messages]),
                "gen_ai.tool.definitions": _json(
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
    ) -> None:
        span = self.span
        if span is None:
            return
        self.run.response_model, self.run.response_vendor = model, vendor
        attributes: dict[str, Any] = {
            "gen_ai.provider.name": vendor,
            "gen_ai.response.model": model,
            "gen_ai.response.finish_reasons": [stop_reason],
            **usage_attributes(usage),
        }
        if response_id:
            attributes["gen_ai.response.id"] = response_id
        if self.capture:
            output = {**semconv_message(message), "finish_reason": stop_reason}
            attributes["gen_ai.output.messages"] = _json([output])
        span.set_attributes(attributes)
        span.end()
        self.span = None

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
            span.set_attribute("gen_ai.tool.call.result", result.content[:_CONTENT_LIMIT])
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


def semconv_message(m: Message) -> dict[str, Any]:
    """A canonical message in the conventions' input/output message shape ({role, parts})."""
    parts: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, TextBlock):
            parts.append({"type": "text", "content": b.text})
        elif isinstance(b, ToolCallBlock):
            parts.append({"type": "tool_call", "id": b.id, "name": b.name, "arguments": b.arguments})
        elif isinstance(b, ToolResultBlock):
            parts.append({"type": "tool_call_response", "id": b.tool_call_id, "result": b.content})
        elif isinstance(b, ReasoningBlock):
            if b.text:
                parts.append({"type": "reasoning", "content": b.text})
        elif isinstance(b, ImageBlock):
            source = b.source
            if source.type == "url":
                parts.append({"type": "uri", "modality": "image", "uri": source.url})
            else:
                parts.append(
                    {"type": "blob", "modality": "image", "mime_type": source.media_type, "content": source.data}
                )
    return {"role": m.role, "parts": parts}


def _json(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _CONTENT_LIMIT else text[:_CONTENT_LIMIT]


def response_id(body: Mapping[str, Any]) -> str | None:
    value = body.get("id")
    return value if isinstance(value, str) else None
