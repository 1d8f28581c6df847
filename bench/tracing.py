"""Benchmark: what OpenTelemetry tracing adds to a replayed run, measured side by side in one process.

A 50-run conversation is made by a real Agent on a ScriptedProvider (each run: a user message, four reasoning +
tool-call turns with their results, an answer; every run replays all earlier ones). Then the 51st turn, replaying
all 50 runs in full, is run again and again by two agents that differ only in tracing:
  off: segue's default, no tracer provider set (the API's no-op: segue makes no span at all);
  on:  an OpenTelemetry SDK TracerProvider with a SimpleSpanProcessor into an in-memory exporter, so every span
       (1 invoke_agent + 5 chat + 4 execute_tool per run) is created, filled, ended and exported synchronously.
The two alternate, round after round, so drift in the machine hits both alike. Each run is timed in CPU time of
the process (time.process_time: the event loop and the store's worker threads, not the other programs of a shared
machine) and in wall-clock time; the verdict is the median of the rounds' own on / off CPU-time ratios (the medians
of each side are printed too). Target: tracing adds less than 5% to the replay overhead (the time segue spends on
a replayed run, the model being scripted). Run: python bench/tracing.py [--rounds N]
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
from replay import CALLS_PER_RUN, MODEL, Scripted, make_conversation, run_query

from segue import Agent, RunStore
from segue.telemetry import Telemetry
from segue.testing import ScriptedProvider

TARGET = 1.05
RUNS = 50  # the conversation's length: the 51st turn replays all of them


def agent(store: RunStore, telemetry: Telemetry | None) -> Agent:
    return Agent(
        ScriptedProvider(replies=[Scripted()] * 100_000, vendor="anthropic", model=MODEL),
        "You answer from the database.",
        [run_query],
        store,
        max_iterations=CALLS_PER_RUN + 1,
        telemetry=telemetry,
    )


async def measure(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'segue.db'}"
        ids = await make_conversation(url, RUNS)
        store = RunStore(url)
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        agents = {"off": agent(store, None), "on": agent(store, Telemetry(tracer_provider=provider))}
        cpu: dict[str, list[float]] = {"off": [], "on": []}
        wall: dict[str, list[float]] = {"off": [], "on": []}
        question = "What was the revenue per month, once more?"
        for _ in range(3):  # warm up both: imports, caches, the SQLite page cache
            for a in agents.values():
                await a.run(question, runs=ids, replay_last="all")
        exporter.clear()
        for i in range(rounds):
            order = ("off", "on") if i % 2 == 0 else ("on", "off")
            for name in order:
                started, started_cpu = time.perf_counter(), time.process_time()
                result = await agents[name].run(question, runs=ids, replay_last="all")
                cpu[name].append(time.process_time() - started_cpu)
                wall[name].append(time.perf_counter() - started)
                assert result.status == "success" and result.replay is not None
                assert result.replay.reasoning_kept == ids, "every descriptor matches: reasoning is kept"
        spans = len(exporter.get_finished_spans())
        store.close()
    print(f"turn {RUNS + 1} of a replayed conversation ({RUNS} runs in full, reasoning kept), {rounds} rounds each")
    print(f"  spans per traced run: {spans // rounds}")
    for label, times in (("CPU time", cpu), ("wall clock", wall)):
        off, on = statistics.median(times["off"]), statistics.median(times["on"])
        pairs = statistics.median(a / b for a, b in zip(times["on"], times["off"], strict=True))
        print(f"  {label:10}  tracing off (no tracer provider):      {off * 1e3:8.2f} ms per run (median)")
        print(f"  {label:10}  tracing on (SDK, every span exported): {on * 1e3:8.2f} ms per run (median)")
        print(f"  {label:10}  on / off: {on / off:.3f}x (medians), {pairs:.3f}x (median of the rounds' own ratios)")
    ratio = statistics.median(a / b for a, b in zip(cpu["on"], cpu["off"], strict=True))
    verdict = "ok" if ratio < TARGET else "OVER TARGET"
    adds = f"{(ratio - 1) * 100:+.1f}% CPU time per replayed run ({ratio:.3f}x; target < {TARGET:.2f}x)"
    print(f"  tracing adds {adds}: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=30)
    asyncio.run(measure(parser.parse_args().rounds))


if __name__ == "__main__":
    main()
