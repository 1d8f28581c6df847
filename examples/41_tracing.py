"""OpenTelemetry traces of a replayed conversation: segue's invoke_agent / chat / execute_tool spans with their
GenAI-convention attributes, cache reads and writes included, collected by the OpenTelemetry SDK's in-memory
exporter and printed as a tree. Offline, on the twin. Needs `pip install 'segue[otel]' opentelemetry-sdk`.
Swap the exporter for ConsoleSpanExporter() to see every attribute, or OTLPSpanExporter() to send the spans to
Phoenix or Langfuse (docs/observability.md). Run: python examples/41_tracing.py
"""

from __future__ import annotations

import asyncio

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from segue import Agent, RunStore
from segue.providers import AnthropicProvider
from segue.twin import Twin, sample_db

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)  # segue traces to the global provider; without one it records nothing


def show(spans: list[ReadableSpan]) -> None:
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        children.setdefault(span.parent.span_id if span.parent else None, []).append(span)

    def walk(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            a = span.attributes or {}
            usage = ""
            if "gen_ai.usage.input_tokens" in a:
                read = a.get("gen_ai.usage.cache_read.input_tokens", "-")
                written = a.get("gen_ai.usage.cache_creation.input_tokens", "-")
                usage = (
                    f"  input {a['gen_ai.usage.input_tokens']}, cache read {read}, cache write {written}, "
                    f"output {a['gen_ai.usage.output_tokens']}"
                )
            extra = f"  conversation {a['gen_ai.conversation.id']}" if "gen_ai.conversation.id" in a else ""
            print(f"{'  ' * depth}{span.name}{usage}{extra}")
            walk(span.context.span_id, depth + 1)

    walk(None, 0)


async def main() -> None:
    tools = [sample_db.list_tables, sample_db.describe_table, sample_db.run_query]
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()),
        "You answer questions about the shop database using the tools. " * 60,
        tools,
        RunStore("sqlite:///:memory:"),
        name="shop-analyst",
    )
    first = await agent.run("Which tables are there?")
    second = await agent.run("How many customers are in each country?", runs=[first.run_id], replay_last="all")
    print(f"run 2 usage: {second.usage}")
    show(list(exporter.get_finished_spans()))


if __name__ == "__main__":
    asyncio.run(main())
