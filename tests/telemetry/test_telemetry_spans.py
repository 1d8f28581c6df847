"""segue.telemetry on its own: the span names, kinds, nesting and attributes it makes, against the OpenTelemetry
SDK's in-memory exporter; contents only when opted in; nothing at all without a tracer provider."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as semconv
from opentelemetry.trace import SpanKind, StatusCode

from segue.generated import (
    Message,
    ReplaySummary,
    ReplayWarning,
    TextBlock,
    ToolCallBlock,
    ToolDefinition,
    ToolResultBlock,
    Usage,
)
from segue.telemetry import CONTENT_ENV, RunTrace, Telemetry, attached

USAGE = Usage(input_tokens=1200, output_tokens=40, cache_read_tokens=1000, cache_write_tokens=150)
SUMMARY = ReplaySummary(
    runs_full=["r1", "r2"],
    runs_text=[],
    reasoning_kept=["r1"],
    reasoning_dropped=["r2"],
    warnings=[ReplayWarning(run_id="r2", cause="tools", message="the tools changed")],
)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp


def one_run(telemetry: Telemetry) -> RunTrace:
    run = telemetry.run(agent="shop", vendor="anthropic", model="claude-sonnet-4-6")
    run.started(run_id="r3", conversation_id="r1", tenant_id="acme", replay=SUMMARY, continued_from="r2")
    chat = run.chat(vendor="anthropic", model="claude-sonnet-4-6", iteration=1)
    chat.request(
        system="You help shoppers.",
        messages=[Message(role="user", content=[TextBlock(text="where is order 7?")])],
        tools=[ToolDefinition(name="lookup_order", description="Look up", parameters={"type": "object"})],
        max_tokens=1024,
    )
    call = ToolCallBlock(id="call_1", name="lookup_order", arguments={"order_number": 7})
    chat.finish(
        vendor="anthropic",
        model="claude-sonnet-4-6-20261101",
        usage=USAGE,
        stop_reason="tool_use",
        response_id="msg_1",
        message=Message(role="assistant", content=[call]),
    )
    tool = run.tool(call, source="shop-server")
    tool.finish(ToolResultBlock(tool_call_id="call_1", content="order 7: shipped", is_error=True))
    run.finish(
        status="success",
        usage=USAGE,
        iterations=1,
        response_model="claude-sonnet-4-6-20261101",
        replay=SUMMARY,
        layout="appendOnly",
        cost_usd=0.0123,
    )
    return run


def test_span_tree_names_kinds_and_attributes(exporter: InMemorySpanExporter) -> None:
    one_run(Telemetry(tracer_provider=provider(exporter)))
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_agent shop", "chat claude-sonnet-4-6", "execute_tool lookup_order"}
    run, chat, tool = spans["invoke_agent shop"], spans["chat claude-sonnet-4-6"], spans["execute_tool lookup_order"]
    assert (run.kind, chat.kind, tool.kind) == (SpanKind.INTERNAL, SpanKind.CLIENT, SpanKind.INTERNAL)
    assert run.parent is None and chat.parent is not None and tool.parent is not None
    assert chat.parent.span_id == run.context.span_id and tool.parent.span_id == run.context.span_id
    # The attribute names are the conventions' own, as opentelemetry-semantic-conventions spells them.
    assert run.attributes is not None and chat.attributes is not None and tool.attributes is not None
    assert run.attributes[semconv.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert run.attributes[semconv.GEN_AI_CONVERSATION_ID] == "r1"
    assert run.attributes[semconv.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert run.attributes["segue.run.id"] == "r3" and run.attributes["segue.run.status"] == "success"
    assert run.attributes["segue.replay.reasoning_kept"] == 1 and run.attributes["segue.replay.reasoning_dropped"] == 1
    assert run.attributes["segue.replay.warning_causes"] == ("tools",)
    assert run.attributes["segue.layout.mode"] == "appendOnly" and run.attributes["segue.cost.usd"] == 0.0123
    for span in (run, chat):
        assert span.attributes[semconv.GEN_AI_USAGE_INPUT_TOKENS] == 1200
        assert span.attributes[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] == 40
        assert span.attributes[semconv.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 1000
        assert span.attributes[semconv.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 150
    assert chat.attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert chat.attributes[semconv.GEN_AI_REQUEST_MODEL] == "claude-sonnet-4-6"
    assert chat.attributes[semconv.GEN_AI_RESPONSE_MODEL] == "claude-sonnet-4-6-20261101"
    assert chat.attributes[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_call",)  # the conventions' value
    assert chat.attributes[semconv.GEN_AI_RESPONSE_ID] == "msg_1"
    assert chat.attributes[semconv.GEN_AI_REQUEST_MAX_TOKENS] == 1024
    assert tool.attributes[semconv.GEN_AI_OPERATION_NAME] == "execute_tool"
    assert tool.attributes[semconv.GEN_AI_TOOL_NAME] == "lookup_order"
    assert tool.attributes[semconv.GEN_AI_TOOL_CALL_ID] == "call_1"
    assert tool.attributes[semconv.GEN_AI_TOOL_TYPE] == "extension"
    assert tool.attributes["segue.tool.source"] == "shop-server"
    assert tool.attributes["error.type"] == "tool_error" and tool.status.status_code is StatusCode.ERROR


CONTENT = (
    semconv.GEN_AI_INPUT_MESSAGES,
    semconv.GEN_AI_OUTPUT_MESSAGES,
    semconv.GEN_AI_SYSTEM_INSTRUCTIONS,
    semconv.GEN_AI_TOOL_DEFINITIONS,
    semconv.GEN_AI_TOOL_CALL_ARGUMENTS,
    semconv.GEN_AI_TOOL_CALL_RESULT,
)


def recorded_content(exporter: InMemorySpanExporter) -> dict[str, str]:
    return {k: str(v) for s in exporter.get_finished_spans() for k, v in (s.attributes or {}).items() if k in CONTENT}


def test_contents_are_off_by_default(exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONTENT_ENV, raising=False)
    one_run(Telemetry(tracer_provider=provider(exporter)))
    assert recorded_content(exporter) == {}
    assert all(s.status.description is None for s in exporter.get_finished_spans())


@pytest.mark.parametrize("value", ["true", "SPAN_ONLY", "span_and_event"])
def test_the_conventions_switch_turns_contents_on(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(CONTENT_ENV, value)
    one_run(Telemetry(tracer_provider=provider(exporter)))
    content = recorded_content(exporter)
    assert set(content) == set(CONTENT)
    assert json.loads(content[semconv.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "user", "parts": [{"type": "text", "content": "where is order 7?"}]}
    ]
    assert json.loads(content[semconv.GEN_AI_OUTPUT_MESSAGES]) == [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup_order", "arguments": {"order_number": 7}}],
            "finish_reason": "tool_call",
        }
    ]
    assert content[semconv.GEN_AI_TOOL_CALL_RESULT] == "order 7: shipped"


def test_an_explicit_choice_beats_the_environment(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONTENT_ENV, "true")
    one_run(Telemetry(tracer_provider=provider(exporter), capture_content=False))
    assert recorded_content(exporter) == {}
    monkeypatch.setenv(CONTENT_ENV, "NO_CONTENT")
    exporter.clear()
    one_run(Telemetry(tracer_provider=provider(exporter), capture_content=True))
    assert set(recorded_content(exporter)) == set(CONTENT)


def test_without_a_tracer_provider_nothing_is_recorded() -> None:
    """The global provider is the API's no-op until an app sets one: the run's trace holds no span at all."""
    run = Telemetry().run(agent="a", vendor="openai", model="gpt-5")
    assert run.span is None and run.context is None
    chat = run.chat(vendor="openai", model="gpt-5", iteration=1)
    assert chat.span is None
    with attached(chat):  # a no-op, not an error
        pass
    run.finish(status="success", usage=USAGE, iterations=1, response_model="gpt-5")


def test_attached_makes_the_span_current_only_inside(exporter: InMemorySpanExporter) -> None:
    from opentelemetry import trace

    run = Telemetry(tracer_provider=provider(exporter)).run(agent="a", vendor="openai", model="gpt-5")
    chat = run.chat(vendor="openai", model="gpt-5", iteration=1)
    outside = trace.get_current_span()
    with attached(chat):
        assert chat.span is not None and trace.get_current_span() is chat.span
    assert trace.get_current_span() is outside
