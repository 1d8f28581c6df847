"""The drivers post the bytes segue encoded through the official client's `post` (segue.providers._common): what
the vendor receives is `WireRequest.encoded()` of the stored body, on the route the SDK's typed `create()` uses,
with the SDK's own JSON content type, timeout rule and deprecation warning; a client whose own spans are recorded
goes through the typed `create()` instead. BodyEncoder's remembered elements give the same bytes as encoding the
body whole."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping
from typing import Any

import httpx2
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from segue import Agent, RunStore, tool
from segue._core.contracts import ProviderRequest
from segue.generated import Message, ModelSettings, TextBlock
from segue.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider
from segue.wire.common import BodyEncoder, WireRequest
from segue_twin import Twin
from segue_twin.transport import TwinAsyncTransport
from tests._support.vendor_http import Recorder, anthropic_client, json_response

SYSTEM = "You answer questions about orders, precisely and briefly. Prices in euro (€)."


@tool
def lookup_order(order_number: int) -> str:
    """Look up an order's shipping status by its order number."""
    return f"order {order_number}: shipped to Zürich"


class Posted:
    """A twin handler that keeps every POST the official client sent: its path, headers and bytes."""

    def __init__(self, twin: Twin) -> None:
        self.twin = twin
        self.posts: list[tuple[str, Mapping[str, str], bytes]] = []

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes, **options: Any) -> Any:
        if method == "POST":
            self.posts.append((path, dict(headers), body))
        return self.twin.handle(method, path, headers, body, **options)


def driver(vendor: str, posted: Posted, **client: Any) -> Any:
    http = httpx2.AsyncClient(transport=TwinAsyncTransport(posted))
    if vendor == "anthropic":
        return AnthropicProvider("claude-sonnet-4-6", client=posted.twin.anthropic_client(http_client=http, **client))
    if vendor == "responses":
        return OpenAIResponsesProvider("gpt-5", client=posted.twin.openai_client(http_client=http))
    return OpenAIChatProvider("gpt-4.1", client=posted.twin.openai_client(http_client=http))


ROUTES = {"anthropic": "/v1/messages", "responses": "/v1/responses", "chat": "/v1/chat/completions"}


@pytest.mark.parametrize("vendor", list(ROUTES))
async def test_every_driver_posts_the_encoding_of_the_body_it_records(vendor: str) -> None:
    posted = Posted(Twin())
    store = RunStore("sqlite:///:memory:")
    agent = Agent(driver(vendor, posted), SYSTEM, [lookup_order], store)
    first = await agent.run("Use lookup_order for order 7.")
    second = await agent.run("Use lookup_order for order 8.", runs=[first.run_id], replay_last="all")
    assert first.status == second.status == "success" and first.iterations == second.iterations == 2
    bodies = [c.provider_request for r in (first, second) for c in store.get_run(r.run_id).llm_interactions]  # type: ignore[union-attr]
    assert len(bodies) == len(posted.posts) == 4
    for (path, headers, sent), body in zip(posted.posts, bodies, strict=True):
        assert path == ROUTES[vendor]
        assert headers["content-type"] == "application/json"
        # the recorded body is what was sent, byte for byte (compact, the euro sign and umlaut as UTF-8)
        assert sent == WireRequest(body=body).encoded()
        assert "€".encode() in sent and b"\\u20ac" not in sent


async def test_a_client_whose_own_spans_are_recorded_goes_through_the_typed_create() -> None:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    posted = Posted(Twin())
    store = RunStore("sqlite:///:memory:")
    client = {"open_telemetry": {"tracer_provider": tp}}
    agent = Agent(driver("anthropic", posted, **client), SYSTEM, [lookup_order], store)
    result = await agent.run("Use lookup_order for order 7.")
    assert result.iterations == 2
    scope = "com.anthropic.sdk.python"
    sdk_spans = [
        s for s in exporter.get_finished_spans() if s.instrumentation_scope and s.instrumentation_scope.name == scope
    ]
    assert [s.name for s in sdk_spans] == ["anthropic.messages.create"] * 2, "the SDK's own span of each call"
    # the typed create() encodes the same JSON (in its own key order)
    bodies = [c.provider_request for c in store.get_run(result.run_id).llm_interactions]  # type: ignore[union-attr]
    assert [json.loads(sent) for _, _, sent in posted.posts] == bodies


def anthropic_answer() -> dict[str, Any]:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-5",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }


def hello(max_tokens: int | None = None) -> ProviderRequest:
    return ProviderRequest(
        system="You help.",
        messages=[Message(role="user", content=[TextBlock(text="Hi")])],
        settings=ModelSettings(max_tokens=max_tokens),
    )


async def test_the_sdks_timeout_rule_for_a_call_that_does_not_stream_holds_on_the_posted_bytes() -> None:
    """anthropic's messages.create, non-streaming on the default timeout: a timeout for max_tokens (connect 5 s,
    the rest 600 s), and 'Streaming is required for operations that may take longer than 10 minutes' above it
    (the pinned SDK's _calculate_nonstreaming_timeout: expected time = 3600 s * max_tokens / 128,000)."""
    rec = Recorder(json_response(anthropic_answer()))
    provider = AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(rec))
    await provider.complete(hello(4096))
    timeout = rec.requests[0].extensions["timeout"]
    assert timeout == {"connect": 5.0, "read": 600, "write": 600, "pool": 600}
    with pytest.raises(ValueError, match="Streaming is required"):
        await provider.complete(hello(64_000))  # 3600 * 64,000 / 128,000 = 1,800 s > 600 s
    assert len(rec.requests) == 1, "the refused call was never sent"


async def test_a_model_the_pinned_sdk_lists_as_deprecated_warns_as_its_create_would() -> None:
    from anthropic._data import DEPRECATED_MODELS

    assert "claude-opus-4-5" in DEPRECATED_MODELS
    rec = Recorder(json_response(anthropic_answer()))
    provider = AnthropicProvider("claude-opus-4-5", client=anthropic_client(rec))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await provider.complete(hello())
    (warning,) = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert f"will reach end-of-life on {DEPRECATED_MODELS['claude-opus-4-5']}" in str(warning.message)


def compact(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def test_the_encoder_gives_the_bytes_of_the_whole_body_however_its_elements_are_shared() -> None:
    encoder = BodyEncoder()
    head = [{"role": "user", "content": [{"type": "text", "text": f"question {i} ü"}]} for i in range(5)]
    first = {"model": "m", "system": [{"type": "text", "text": "sys"}], "messages": [*head], "stream": False}
    assert encoder.encode(first) == compact(first)
    # the next call shares the head's dicts, marks a copy of the last one and appends
    marked = {**head[-1], "cache_control": {"type": "ephemeral"}}
    second = {**first, "messages": [*head[:-1], marked, {"role": "assistant", "content": "ok"}], "n": [1, 2.5, None]}
    assert encoder.encode(second) == compact(second)
    assert encoder.encode({"messages": [], "tools": ["a", 1]}) == compact({"messages": [], "tools": ["a", 1]})
    with pytest.raises(ValueError):
        encoder.encode({"temperature": math.nan})


def test_the_encoders_memory_is_bounded_and_starts_over() -> None:
    encoder = BodyEncoder(size=4)
    messages = [{"i": i} for i in range(10)]
    for end in range(1, 11):
        body = {"messages": messages[:end]}
        assert encoder.encode(body) == compact(body)
    assert len(encoder._seen) <= 4


def test_spans_to_the_global_provider_count_once_the_app_has_set_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The anthropic client's default option sends its spans to the global tracer provider, which records nothing
    until the app sets one (OpenTelemetry's default is a proxy): only then do calls take the typed create()."""
    from opentelemetry import trace

    from segue.providers._common import sdk_spans_recorded

    client = Twin().anthropic_client()  # the SDK's spans on, to the global provider
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.ProxyTracerProvider())
    assert not sdk_spans_recorded(client)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: TracerProvider())
    assert sdk_spans_recorded(client)
    assert not sdk_spans_recorded(Twin().openai_client()), "the openai client emits no spans of its own"


@pytest.mark.parametrize("streaming", [False, True], ids=["run", "stream"])
async def test_a_client_of_another_class_than_the_sdks_own_gets_the_typed_create(streaming: bool) -> None:
    """Azure OpenAI's client names the deployment in the URL from the typed call's body (`/deployments/{model}`,
    the pinned openai SDK's lib/azure.py `_build_request`), as Anthropic's Bedrock and Vertex clients do with the
    model: a subclass of the SDK's client gets the typed create(), so its routing still sees the body."""
    import openai

    answer = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "gpt-4.1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
    chunks = [
        (
            None,
            {
                **answer,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            },
        ),
    ]
    from tests._support.vendor_http import sse

    rec = Recorder(sse(chunks, done=True) if streaming else json_response(answer))
    client = openai.AsyncAzureOpenAI(
        api_key="az-test",
        api_version="2024-10-21",
        azure_endpoint="https://example-resource.openai.azure.com",
        http_client=httpx2.AsyncClient(transport=rec.transport()),
        max_retries=0,
    )
    provider = OpenAIChatProvider("gpt-4.1", client=client)
    if streaming:
        events = [e async for e in provider.stream(hello())]
        assert events
    else:
        await provider.complete(hello())
    (request,) = rec.requests
    assert request.url.path == "/openai/deployments/gpt-4.1/chat/completions"
    assert json.loads(request.content)["model"] == "gpt-4.1"


async def test_enabled_thinking_on_a_model_the_pinned_sdk_moves_to_adaptive_warns_as_its_create_would() -> None:
    from anthropic._data import MODELS_TO_WARN_WITH_THINKING_ENABLED

    model = sorted(MODELS_TO_WARN_WITH_THINKING_ENABLED)[0]
    answers = [json_response({**anthropic_answer(), "model": model}) for _ in range(2)]
    rec = Recorder(*answers)
    thinking = {"type": "enabled", "budget_tokens": 1024}
    for config, warned in ((thinking, True), ({"type": "adaptive"}, False)):
        provider = AnthropicProvider(model, thinking=config, client=anthropic_client(rec))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            await provider.complete(hello())
        said = [w for w in caught if "'thinking.type=enabled' is deprecated" in str(w.message)]
        assert len(said) == (1 if warned else 0), config
