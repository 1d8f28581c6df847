"""OpenTelemetry without double counting (issue 26, point 8), with the anthropic SDK's real spans.

The pinned anthropic SDK (2.14) emits its own `CLIENT` span per API call (instrumentation scope
`com.anthropic.sdk.python`, `anthropic/_tracing.py`), with the call's usage (`gen_ai.usage.input_tokens` counting
cached tokens in, as segue's does: `anthropic/lib/_tracing/_response.py`). Under segue's `chat` span that would
count each request twice. One span per request carries usage: clients segue builds have the SDK's spans off (its
`open_telemetry` option, `traces.enabled: False`); an app's client whose spans go where segue's go carries the
usage itself, and segue's chat span says so (`segue.usage.on_sdk_span`).

Also: the conventions' finish reasons on every vendor's spans, `gen_ai.output.type`, `gen_ai.request.stream`,
`server.address` / `server.port`, tool results as `response` parts, and content over the limit cut so that it
stays valid JSON.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from segue import Agent, tool
from segue._core.telemetry_content import CONTENT_LIMIT, CUT_MARKER, content_json, semconv_message
from segue.generated import Message, ToolResultBlock
from segue.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider
from segue.providers.anthropic import without_sdk_spans
from segue.telemetry import Telemetry
from segue_twin import Twin

SDK_SCOPE = "com.anthropic.sdk.python"
SYSTEM = "You answer questions about orders, precisely and briefly. " * 150  # above the cache minimum: writes


@tool
def lookup_order(order_number: int) -> str:
    """Look up an order's shipping status by its order number."""
    return f"order {order_number}: shipped"


def tracing() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def attrs_of(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def inference_spans(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """Every span that reports one request (segue's chat spans and the SDK's own), not the run's invoke_agent."""
    return [s for s in spans if attrs_of(s).get("gen_ai.operation.name") == "chat"]


@pytest.mark.parametrize("streaming", [False, True], ids=["run", "stream"])
async def test_an_apps_client_with_the_sdks_own_spans_counts_each_requests_usage_once(streaming: bool) -> None:
    tp, exporter = tracing()
    client = Twin().anthropic_client(open_telemetry={"tracer_provider": tp})  # the SDK's spans on, to tp
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=client),
        SYSTEM,
        [lookup_order],
        telemetry=Telemetry(tracer_provider=tp),
    )
    question = "Use lookup_order for order 7."
    if streaming:
        events = [e async for e in agent.stream(question)]
        result = events[-1].result
        assert result is not None
    else:
        result = await agent.run(question)
    assert result.status == "success" and result.iterations == 2 and result.usage.cache_write_tokens

    spans = list(exporter.get_finished_spans())
    sdk = [s for s in spans if s.instrumentation_scope and s.instrumentation_scope.name == SDK_SCOPE]
    chats = [s for s in spans if s.name.startswith("chat ") and s not in sdk]
    assert len(sdk) == 2 and len(chats) == 2, "the SDK's real spans are there, one per request"
    # each SDK span is a child of segue's chat span for the same request
    assert sorted(s.parent.span_id for s in sdk if s.parent) == sorted(c.context.span_id for c in chats)
    carrying = [s for s in inference_spans(spans) if "gen_ai.usage.input_tokens" in attrs_of(s)]
    assert len(carrying) == 2 and all(s in sdk for s in carrying), "one span per request carries usage"
    assert all(attrs_of(c)["segue.usage.on_sdk_span"] is True for c in chats)
    assert sum(attrs_of(s)["gen_ai.usage.input_tokens"] for s in carrying) == result.usage.input_tokens
    assert sum(attrs_of(s)["gen_ai.usage.output_tokens"] for s in carrying) == result.usage.output_tokens
    # every usage count is on one span per request: the SDK's cache-write count has a name of its own, so segue's
    # chat span keeps the conventions' gen_ai.usage.cache_creation.input_tokens
    for chat in chats:
        request = [chat, *(s for s in sdk if s.parent and s.parent.span_id == chat.context.span_id)]
        keys = [k for s in request for k in attrs_of(s) if k.startswith("gen_ai.usage.")]
        assert len(keys) == len(set(keys)), keys
    assert sum(attrs_of(c).get("gen_ai.usage.cache_creation.input_tokens", 0) for c in chats) == (
        result.usage.cache_write_tokens or 0
    )


def test_the_usage_left_to_the_sdks_span_is_what_the_pinned_sdk_sets() -> None:
    """SDK_SPAN_USAGE is read off the pinned SDK: its response attribute table, plus the input count it sets in
    lib/_tracing/_response.py (cached tokens included). A bump that changes them fails here."""
    from anthropic._tracing import SPAN_ATTRIBUTES

    from segue.telemetry import SDK_SPAN_USAGE

    table = SPAN_ATTRIBUTES["anthropic.messages.create"]["response"]
    sdk_usage = {k for k in table if k.startswith("gen_ai.usage.")} | {"gen_ai.usage.input_tokens"}
    assert SDK_SPAN_USAGE == sdk_usage - {"gen_ai.usage.cache_write.input_tokens"}


async def test_a_client_segue_turned_the_sdk_spans_off_on_leaves_the_usage_on_segues_chat_span() -> None:
    tp, exporter = tracing()
    client = without_sdk_spans(Twin().anthropic_client(open_telemetry={"tracer_provider": tp}))
    assert client.open_telemetry["traces"]["enabled"] is False and client.open_telemetry["propagation"] is True
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=client),
        "You help.",
        [lookup_order],
        telemetry=Telemetry(tracer_provider=tp),
    )
    result = await agent.run("Use lookup_order for order 7.")
    spans = list(exporter.get_finished_spans())
    assert not [s for s in spans if s.instrumentation_scope and s.instrumentation_scope.name == SDK_SCOPE]
    chats = inference_spans(spans)
    assert len(chats) == 2 and all("segue.usage.on_sdk_span" not in attrs_of(c) for c in chats)
    assert sum(attrs_of(c)["gen_ai.usage.input_tokens"] for c in chats) == result.usage.input_tokens


async def test_sdk_spans_that_go_elsewhere_leave_the_usage_on_segues_chat_span() -> None:
    """The app's client traces to another provider (here the global no-op one): its spans are not in segue's
    backend, so segue's chat span keeps the usage."""
    tp, exporter = tracing()
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()),
        "You help.",
        telemetry=Telemetry(tracer_provider=tp),
    )
    result = await agent.run("hello")
    (chat,) = inference_spans(list(exporter.get_finished_spans()))
    assert attrs_of(chat)["gen_ai.usage.input_tokens"] == result.usage.input_tokens


def test_clients_segue_builds_have_the_sdks_spans_off(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_OPEN_TELEMETRY_PROPAGATION",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    default = AnthropicProvider("claude-sonnet-4-6")
    monkeypatch.setenv("ANTHROPIC_OPEN_TELEMETRY_PROPAGATION", "false")
    keyed = AnthropicProvider("claude-sonnet-4-6")
    assert default.client.open_telemetry["traces"]["enabled"] is False
    assert keyed.client.open_telemetry["traces"]["enabled"] is False
    # the rest of the option is the one the client resolved from the environment
    assert default.client.open_telemetry["propagation"] is True and keyed.client.open_telemetry["propagation"] is False
    mine = Twin().anthropic_client()
    assert AnthropicProvider("claude-sonnet-4-6", client=mine).client is mine, "an app's client is left as it is"


@pytest.mark.parametrize("driver", ["chat", "responses"])
async def test_openai_spans_report_the_conventions_finish_reasons_output_type_stream_and_server(driver: str) -> None:
    tp, exporter = tracing()
    twin = Twin()
    provider: Any = (
        OpenAIChatProvider("gpt-4.1", client=twin.openai_client())
        if driver == "chat"
        else OpenAIResponsesProvider("gpt-5", client=twin.openai_client())
    )
    agent = Agent(provider, "You help.", [lookup_order], telemetry=Telemetry(tracer_provider=tp))
    await agent.run("Use lookup_order for order 7.")
    chats = sorted(inference_spans(list(exporter.get_finished_spans())), key=lambda s: s.start_time or 0)
    assert [attrs_of(c)["gen_ai.response.finish_reasons"] for c in chats] == [("tool_call",), ("stop",)]
    first = attrs_of(chats[0])
    assert first["gen_ai.output.type"] == "text" and first["gen_ai.request.stream"] is False
    assert (first["server.address"], first["server.port"]) == ("twin.segue.invalid", 80)


@attrs.frozen
class Count:
    n: int


async def test_structured_output_and_streaming_show_on_the_chat_span() -> None:
    tp, exporter = tracing()
    twin = Twin()
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()),
        "You count.",
        telemetry=Telemetry(tracer_provider=tp),
    )
    [e async for e in agent.stream("How many?", output_type=Count)]
    (chat,) = inference_spans(list(exporter.get_finished_spans()))
    a = attrs_of(chat)
    assert a["gen_ai.output.type"] == "json" and a["gen_ai.request.stream"] is True
    assert a["gen_ai.response.finish_reasons"] == ("stop",) and a["server.address"] == "twin.segue.invalid"


def test_tool_results_are_response_parts() -> None:
    message = Message(role="tool", content=[ToolResultBlock(tool_call_id="c1", content="shipped")])
    assert semconv_message(message) == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": "shipped"}],
    }


def test_content_over_the_limit_is_cut_inside_its_strings_and_stays_valid_json() -> None:
    big = "x" * (CONTENT_LIMIT + 5000)
    messages = [{"role": "user", "parts": [{"type": "text", "content": "hi"}, {"type": "text", "content": big}]}]
    text = content_json(messages)
    assert len(text) <= CONTENT_LIMIT
    value = json.loads(text)  # valid JSON
    kept = value[0]["parts"][1]["content"]
    assert kept.endswith(CUT_MARKER.format(total=len(big))) and kept.startswith("xxx")
    assert value[0]["parts"][0] == {"type": "text", "content": "hi"}
    # text that is itself JSON (a tool's arguments) is cut the same way; a structure too big for any cut is a marker
    cut = json.loads(content_json({"a": "é" * 50, "b": "y" * 80}, limit=130))
    assert cut["a"] == "é" * 50 and cut["b"].startswith("y") and cut["b"].endswith(CUT_MARKER.format(total=80))
    assert json.loads(content_json(list(range(100)), limit=40)).startswith("…[segue: cut from")


async def test_a_captured_tool_result_over_the_limit_keeps_a_marker() -> None:
    tp, exporter = tracing()
    telemetry = Telemetry(tracer_provider=tp, capture_content=True)
    run = telemetry.run(agent="a", vendor="anthropic", model="m")
    from segue.generated import ToolCallBlock

    trace = run.tool(ToolCallBlock(id="c1", name="dump", arguments={}), source=None)
    trace.finish(ToolResultBlock(tool_call_id="c1", content="z" * (CONTENT_LIMIT + 1)))
    (span,) = exporter.get_finished_spans()
    result = str(attrs_of(span)["gen_ai.tool.call.result"])
    assert len(result) <= CONTENT_LIMIT and result.endswith(CUT_MARKER.format(total=CONTENT_LIMIT + 1))
