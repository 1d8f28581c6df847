"""Benchmark: what OpenTelemetry tracing adds to a replayed run, measured side by side in one process.

A 50-run conversation is made by a real Agent on a ScriptedProvider (each run: a user message, four reasoning +
tool-call turns with their results, an answer; every run replays all earlier ones). Then the 51st turn, replaying
all 50 runs in full, is run again and again by two agents that differ only in tracing:
  off: segue's default, no tracer provider set (the API's no-op: segue makes no span at all);
  on:  an OpenTelemetry SDK TracerProvider with a SimpleSpanProcessor into an in-memory exporter, so every span
       (1 invoke_agent + 5 chat + 4 execute_tool per run) is created, filled, ended and exported synchronously.
The two alternate, round after round, so drift in the machine hits both alike; the median of each is compared.
Target: tracing adds less than 5% to the replay overhead (the time segue spends on a replayed run, the model being
scripted). Run: python bench/tracing.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay import CALLS_PER_RUN, RUNS, Policy, make_conversation, run_query

from segue import Agent, RunStore
from segue.telemetry import Telemetry
from segue.testing import ScriptedProvider

TARGET = 1.05


def agent(store: RunStore, telemetry: Telemetry | None) -> Agent:
    return Agent(
        ScriptedProvider(replies=[Policy()] * 100_000),
        "You answer from the database.",
        [run_query],
        store,
        max_iterations=CALLS_PER_RUN + 1,
        telemetry=telemetry,
    )


async def measure(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'segue.db'}"
        ids = await make_conversation(url)
        store = RunStore(url)
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        agents = {"off": agent(store, None), "on": agent(store, Telemetry(tracer_provider=provider))}
        times: dict[str, list[float]] = {"off": [], "on": []}
        question = "What was the revenue per month, once more?"
        for _ in range(3):  # warm up both: imports, caches, the SQLite page cache
            for a in agents.values():
                await a.run(question, runs=ids, replay_last="all")
        exporter.clear()
        for i in range(rounds):
            order = ("off", "on") if i % 2 == 0 else ("on", "off")
            for name in order:
                started = time.perf_counter()
                result = await agents[name].run(question, runs=ids, replay_last="all")
                times[name].append(time.perf_counter() - started)
                assert result.status == "success" and result.replay is not None
                assert result.replay.reasoning_kept == ids, "every descriptor matches: reasoning is kept"
        spans = len(exporter.get_finished_spans())
        store.close()
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    ratio = on / off
    fastest = min(times["on"]) / min(times["off"])
    print(f"turn {RUNS + 1} of a replayed conversation ({RUNS} runs in full, reasoning kept), {rounds} rounds each")
    print(f"  tracing off (no tracer provider):          {off * 1e3:8.2f} ms per run (median)")
    print(f"  tracing on (SDK, every span exported):     {on * 1e3:8.2f} ms per run (median)")
    print(f"  spans per traced run: {spans // rounds}; fastest on / fastest off: {fastest:.3f}x")
    verdict = "ok" if ratio < TARGET else "OVER TARGET"
    print(f"  tracing adds {(ratio - 1) * 100:+.1f}% ({ratio:.3f}x; target < {TARGET:.2f}x): {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=30)
    asyncio.run(measure(parser.parse_args().rounds))


if __name__ == "__main__":
    main()
