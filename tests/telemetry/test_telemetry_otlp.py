"""segue's spans over OTLP/HTTP, as Langfuse or Phoenix receive them: the SDK's OTLP exporter posts to a receiver on
loopback, which decodes the body with the OpenTelemetry protobuf definitions (opentelemetry-proto)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from segue import Agent, RunStore, tool
from segue.providers import AnthropicProvider
from segue.telemetry import Telemetry
from segue_twin import Twin


class Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP traces endpoint: POST /v1/traces with an ExportTraceServiceRequest (application/x-protobuf)."""

    received: list[tuple[str, str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, self.headers["Content-Type"], body))
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    received: list[tuple[str, str, bytes]] = []
    handler = type("Handler", (Receiver,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", received
    finally:
        server.shutdown()
        server.server_close()


def attributes(span: SpanProto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        value = kv.value
        kind = value.WhichOneof("value")
        if kind == "array_value":
            out[kv.key] = [getattr(v, v.WhichOneof("value")) for v in value.array_value.values]
        else:
            out[kv.key] = getattr(value, kind)
    return out


@tool
def lookup_order(order_number: int) -> str:
    """Look up an order's shipping status by its order number.

    Args:
        order_number: the number printed on the receipt
    """
    return f"order {order_number}: shipped"


async def test_a_runs_spans_exported_over_otlp_http_decode_with_the_protobuf_definitions(
    receiver: tuple[str, list[tuple[str, str, bytes]]],
) -> None:
    endpoint, received = receiver
    provider = TracerProvider(resource=Resource.create({"service.name": "shop-agent"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    twin = Twin()
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()),
        "You answer questions about orders, precisely and briefly. " * 150,
        [lookup_order],
        RunStore("sqlite:///:memory:"),
        name="shop",
        telemetry=Telemetry(tracer_provider=provider),
    )
    first = await agent.run("Use lookup_order for order 1042.")
    second = await agent.run("Use lookup_order for order 7.", runs=[first.run_id], replay_last="all")
    await asyncio.to_thread(provider.shutdown)  # the exporter posts from this thread: keep the loop free

    assert {path for path, _, _ in received} == {"/v1/traces"}
    assert {ctype for _, ctype, _ in received} == {"application/x-protobuf"}
    spans: list[SpanProto] = []
    for _, _, body in received:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
            assert service["service.name"] == "shop-agent"
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "segue"
                spans.extend(scope_spans.spans)
    runs = {attributes(s)["segue.run.id"]: s for s in spans if s.name == "invoke_agent shop"}
    assert set(runs) == {first.run_id, second.run_id}
    root = runs[second.run_id]
    children = [s for s in spans if s.parent_span_id == root.span_id]
    assert sorted(s.name for s in children) == [
        "chat claude-sonnet-4-6",
        "chat claude-sonnet-4-6",
        "execute_tool lookup_order",
    ]
    assert {s.trace_id for s in children} == {root.trace_id} and root.trace_id != runs[first.run_id].trace_id
    assert all(s.kind == SpanProto.SPAN_KIND_CLIENT for s in children if s.name.startswith("chat"))
    run = attributes(root)
    assert run["gen_ai.conversation.id"] == first.run_id
    assert second.usage.cache_read_tokens
    assert run["gen_ai.usage.cache_read.input_tokens"] == second.usage.cache_read_tokens
    assert run["gen_ai.usage.cache_creation.input_tokens"] == second.usage.cache_write_tokens
    assert run["gen_ai.usage.input_tokens"] == second.usage.input_tokens
    assert run["segue.replay.reasoning_kept"] == 0 and run["segue.replay.runs_full"] == 1
    tool_span = next(s for s in children if s.name.startswith("execute_tool"))
    assert attributes(tool_span)["gen_ai.tool.call.id"].startswith("toolu_")
    assert not any(k.startswith(("gen_ai.input.", "gen_ai.output.messages")) for s in spans for k in attributes(s))
