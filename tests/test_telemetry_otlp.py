"""segue's spans over OTLP/HTTP, as Langfuse or Phoenix receive them: the SDK's OTLP exporter posts to a receiver on
loopback, which decodes the body with the OpenTelemetry protobuf definitions (opentelemetry-proto)."""

from __future__ import annotations

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
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from segue.generated import Message, ToolCallBlock, ToolResultBlock, Usage
from segue.telemetry import Telemetry


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


def test_spans_exported_over_otlp_http_decode_with_the_protobuf_definitions(
    receiver: tuple[str, list[tuple[str, str, bytes]]],
) -> None:
    endpoint, received = receiver
    provider = TracerProvider(resource=Resource.create({"service.name": "shop-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    usage = Usage(input_tokens=5000, output_tokens=60, cache_read_tokens=4800, cache_write_tokens=120)

    run = Telemetry(tracer_provider=provider).run(agent="shop", vendor="anthropic", model="claude-sonnet-4-6")
    run.started(run_id="run_2", conversation_id="run_1", tenant_id="acme", replay=None, continued_from="run_1")
    chat = run.chat(vendor="anthropic", model="claude-sonnet-4-6", iteration=1)
    call = ToolCallBlock(id="toolu_1", name="lookup_order", arguments={"order_number": 1042})
    chat.finish(
        vendor="anthropic",
        model="claude-sonnet-4-6",
        usage=usage,
        stop_reason="tool_use",
        response_id="msg_1",
        message=Message(role="assistant", content=[call]),
    )
    tool = run.tool(call, source="orders")
    tool.finish(ToolResultBlock(tool_call_id="toolu_1", content="shipped"))
    run.finish(status="success", usage=usage, iterations=1, response_model="claude-sonnet-4-6")
    provider.shutdown()

    assert {path for path, _, _ in received} == {"/v1/traces"}
    assert {ctype for _, ctype, _ in received} == {"application/x-protobuf"}
    spans: dict[str, SpanProto] = {}
    for _, _, body in received:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
            assert service["service.name"] == "shop-agent"
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "segue"
                spans.update({s.name: s for s in scope_spans.spans})
    assert set(spans) == {"invoke_agent shop", "chat claude-sonnet-4-6", "execute_tool lookup_order"}
    root = spans["invoke_agent shop"]
    assert spans["chat claude-sonnet-4-6"].parent_span_id == root.span_id
    assert spans["execute_tool lookup_order"].parent_span_id == root.span_id
    assert {s.trace_id for s in spans.values()} == {root.trace_id}
    assert spans["chat claude-sonnet-4-6"].kind == SpanProto.SPAN_KIND_CLIENT
    chat_attributes = attributes(spans["chat claude-sonnet-4-6"])
    assert chat_attributes["gen_ai.usage.cache_read.input_tokens"] == 4800
    assert chat_attributes["gen_ai.usage.cache_creation.input_tokens"] == 120
    assert chat_attributes["gen_ai.response.finish_reasons"] == ["tool_use"]
    root_attributes = attributes(root)
    assert root_attributes["gen_ai.conversation.id"] == "run_1"
    assert root_attributes["segue.run.id"] == "run_2" and root_attributes["gen_ai.usage.input_tokens"] == 5000
    assert attributes(spans["execute_tool lookup_order"])["segue.tool.source"] == "orders"
    assert not any(k.startswith("gen_ai.input") for s in spans.values() for k in attributes(s))
