"""Traces of real runs on the twin, read from the OpenTelemetry SDK's in-memory exporter: the span tree of a replayed
tool-using run, its attributes (the cache tokens equal the run's usage), contents off by default, failures, streams,
and the MCP SDK's own client span nested under segue's execute_tool span."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from segue import Agent, RunStore, tool
from segue.providers import AnthropicProvider, OpenAIResponsesProvider
from segue.telemetry import CONTENT_ENV, Telemetry
from segue_twin import ScriptedPolicy, Twin
from tests._support.mcp_helpers import SERVER

SYSTEM = "You answer questions about orders, precisely and briefly. " * 150  # above the cache minimums


@tool
def lookup_order(order_number: int) -> str:
    """Look up an order's shipping status by its order number.

    Args:
        order_number: the number printed on the receipt
    """
    return f"order {order_number}: shipped"


def traced(exporter: InMemorySpanExporter, **kw: Any) -> Telemetry:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Telemetry(tracer_provider=provider, **kw)


def tree(spans: list[ReadableSpan]) -> list[tuple[str, str | None]]:
    """(span name, parent span name), in start order."""
    by_id = {s.context.span_id: s.name for s in spans}
    ordered = sorted(spans, key=lambda s: s.start_time or 0)
    return [(s.name, by_id.get(s.parent.span_id) if s.parent else None) for s in ordered]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_the_span_tree_and_attributes_of_a_replayed_tool_using_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CONTENT_ENV, raising=False)
    exporter = InMemorySpanExporter()
    store = RunStore(f"sqlite:///{tmp_path}/segue.db")
    provider = AnthropicProvider("claude-sonnet-4-6", thinking={"type": "adaptive"}, client=Twin().anthropic_client())
    agent = Agent(provider, SYSTEM, [lookup_order], store, name="orders", telemetry=traced(exporter))
    first = await agent.run("Use lookup_order for order 1042.")
    exporter.clear()
    second = await agent.run("Use lookup_order for order 7.", runs=[first.run_id], replay_last="all")
    store.close()

    spans = list(exporter.get_finished_spans())
    assert tree(spans) == [
        ("invoke_agent orders", None),
        ("chat claude-sonnet-4-6", "invoke_agent orders"),
        ("execute_tool lookup_order", "invoke_agent orders"),
        ("chat claude-sonnet-4-6", "invoke_agent orders"),
    ]
    run = next(s for s in spans if s.name == "invoke_agent orders")
    chats = [s for s in spans if s.name.startswith("chat ")]
    call = next(s for s in spans if s.name.startswith("execute_tool"))
    assert (run.kind, chats[0].kind, call.kind) == (SpanKind.INTERNAL, SpanKind.CLIENT, SpanKind.INTERNAL)
    assert run.status.status_code is StatusCode.UNSET and call.status.status_code is StatusCode.UNSET

    a = attrs(run)
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.agent.name"] == "orders"
    assert a["gen_ai.provider.name"] == "anthropic" and a["gen_ai.request.model"] == "claude-sonnet-4-6"
    assert a["gen_ai.response.model"] == "claude-sonnet-4-6"
    assert a["gen_ai.conversation.id"] == first.run_id  # the first run of the replay chain
    assert a["segue.run.id"] == second.run_id and a["segue.run.status"] == "success"
    assert a["segue.run.iterations"] == 2 and a["segue.tenant.id"] == "default"
    # the run's usage, cache reads and writes included, exactly as the run reports it
    assert second.usage.cache_read_tokens and second.usage.cache_read_tokens > 0
    assert a["gen_ai.usage.input_tokens"] == second.usage.input_tokens
    assert a["gen_ai.usage.output_tokens"] == second.usage.output_tokens
    assert a["gen_ai.usage.cache_read.input_tokens"] == second.usage.cache_read_tokens
    assert a["gen_ai.usage.cache_creation.input_tokens"] == second.usage.cache_write_tokens
    # ... and the requests' own usage adds up to it
    assert sum(attrs(c)["gen_ai.usage.cache_read.input_tokens"] for c in chats) == second.usage.cache_read_tokens
    assert sum(attrs(c)["gen_ai.usage.input_tokens"] for c in chats) == second.usage.input_tokens
    assert a["segue.replay.runs_full"] == 1 and a["segue.replay.reasoning_kept"] == 1
    assert a["segue.replay.reasoning_dropped"] == 0 and a["segue.replay.warnings"] == 0
    # The twin served it: no cost (its price at the vendor's rates is the run's RunCost.twin_usd), and it says so.
    assert a["segue.served_by"] == "twin" and "segue.cost.usd" not in a

    c = attrs(chats[0])
    assert c["gen_ai.operation.name"] == "chat" and c["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert str(c["gen_ai.response.id"]).startswith("msg_") and c["segue.iteration"] == 1
    assert attrs(chats[1])["gen_ai.response.finish_reasons"] == ("stop",)
    t = attrs(call)
    assert t["gen_ai.tool.name"] == "lookup_order" and t["gen_ai.tool.type"] == "function"
    assert str(t["gen_ai.tool.call.id"]).startswith("toolu_")
    # no message content by default
    content_keys = {k for s in spans for k in attrs(s) if k.startswith(("gen_ai.input.", "gen_ai.output.messages"))}
    content_keys |= {
        k for s in spans for k in attrs(s) if k in ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result")
    }
    assert content_keys == set()


async def test_contents_are_recorded_when_the_agent_opts_in(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()),
        "You help.",
        [lookup_order],
        telemetry=traced(exporter, capture_content=True),
    )
    await agent.run("Use lookup_order for order 12.")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    call = attrs(spans["execute_tool lookup_order"])
    assert json.loads(str(call["gen_ai.tool.call.arguments"])) == {"order_number": 12}
    assert call["gen_ai.tool.call.result"] == "order 12: shipped"
    chat = next(attrs(s) for s in exporter.get_finished_spans() if s.name.startswith("chat"))
    first_input = json.loads(str(chat["gen_ai.input.messages"]))
    assert first_input == [{"role": "user", "parts": [{"type": "text", "content": "Use lookup_order for order 12."}]}]
    assert json.loads(str(chat["gen_ai.system_instructions"])) == [{"type": "text", "content": "You help."}]


async def test_a_failed_request_marks_the_chat_and_run_spans() -> None:
    exporter = InMemorySpanExporter()
    exhausted = Twin(policy=ScriptedPolicy([]))  # answers a 400: the script has no turn for the request
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=exhausted.anthropic_client()), "p", telemetry=traced(exporter)
    )
    result = await agent.run("hello")
    assert result.status == "error"
    spans = {s.name: s for s in exporter.get_finished_spans()}
    chat, run = spans["chat claude-sonnet-4-6"], spans["invoke_agent agent"]
    assert chat.status.status_code is StatusCode.ERROR and attrs(chat)["error.type"] == "ProviderError"
    assert attrs(chat)["segue.error.kind"] == "bad_request"
    assert run.status.status_code is StatusCode.ERROR and attrs(run)["error.type"] == "ProviderError"
    assert attrs(run)["segue.run.status"] == "error"
    assert chat.status.description is None  # the message may quote content: only with capture on


async def test_a_streamed_run_is_traced_and_the_consumer_never_runs_inside_a_segue_span() -> None:
    exporter = InMemorySpanExporter()
    telemetry = traced(exporter)
    agent = Agent(
        OpenAIResponsesProvider("gpt-5", client=Twin().openai_client()), "p", [lookup_order], telemetry=telemetry
    )
    outer = trace.get_current_span()
    seen = []
    async for event in agent.stream("Use lookup_order for order 3."):
        seen.append(event.type)
        assert trace.get_current_span() is outer  # between events the app's own context is current
    assert seen[-1] == "RUN_COMPLETED"
    names = [name for name, _ in tree(list(exporter.get_finished_spans()))]
    assert names == ["invoke_agent agent", "chat gpt-5", "execute_tool lookup_order", "chat gpt-5"]


def test_the_mcp_sdks_client_span_nests_under_execute_tool(tmp_path: Path) -> None:
    """With a global tracer provider (which the vendor SDKs' own tracers use), their spans nest in segue's: the MCP
    SDK's `MCP send tools/call` under execute_tool, its `tools/list` under the run (the tools are read in the run),
    the anthropic SDK's `anthropic.messages.create` under chat, all in the run's trace. The server's handshake is
    a trace of its own: the session outlives the run that started it. In a process of its own: a global provider
    is set once per process."""
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, json, sys
            from opentelemetry import trace
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
            from segue import Agent
            from segue.mcp import MCPTools
            from segue.providers import AnthropicProvider
            from segue_twin import ScriptedPolicy, Twin

            exporter = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)

            async def main():
                source = MCPTools.stdio(sys.executable, [{str(SERVER)!r}], name="fixture")
                provider = AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client())
                async with Agent(provider, "p", [source]) as agent:
                    result = await agent.run("Use add for 2 and 2.")
                    assert result.answer == "add returned: 4", result

            asyncio.run(main())
            spans = exporter.get_finished_spans()
            by_id = {{s.context.span_id: s for s in spans}}
            run = next(s for s in spans if s.name == "invoke_agent agent")
            print(json.dumps([
                [s.name, by_id[s.parent.span_id].name if s.parent and s.parent.span_id in by_id else None,
                 s.context.trace_id == run.context.trace_id]
                for s in spans
            ]))
            """
        )
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    spans = json.loads(out.stdout.strip().splitlines()[-1])
    assert ["MCP send tools/call add", "execute_tool add", True] in spans
    assert ["execute_tool add", "invoke_agent agent", True] in spans
    assert ["MCP send tools/list", "invoke_agent agent", True] in spans
    assert ["anthropic.messages.create", "chat claude-sonnet-4-6", True] in spans
    assert ["MCP send server/discover", None, False] in spans
