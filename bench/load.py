"""Load: 50 concurrent conversations x 5 replayed turns against the twin, on one SQLite file and on PostgreSQL.

Each conversation is the demo's database chat (Anthropic driver on a shared twin, thinking on), every turn
replaying all earlier runs of its conversation; each conversation is its own tenant. Afterwards it checks that
every run is terminal, that every trace and llm interaction is in the store (counted against what the model
was sent), and that no "database is locked" escaped. It prints runs/s, p50/p95 per-run overhead excluding the
model's time (run wall time minus the provider calls' time), and how long the event loop was ever blocked
(a 1 ms ticker measures its own lateness while the runs share one event loop).

With PostgreSQL it then runs the same load once more on a server of its own (bench/pg_server.py: initdb into a
temporary folder, another port), restarting that server in the middle: it reports that every run still ended
terminal with its traces as sent, how long the restart took, how many runs were in flight during it, and how
many of those failed with a clear error (a run failing outside the restart, or with an unclear message, fails
the benchmark).

With `--processes N` it runs the load in N processes at once on each store instead (N app workers, or N
`segue serve`s, sharing one SQLite file or one PostgreSQL database), each with tenants of its own, started
together after their warm-up; then it checks, from the store, that every run the callers were told about holds
`success` and that none is left `running` (the restart phase runs in the single-process mode only).

Run: python bench/load.py [--conversations 50] [--turns 5] [--processes 1] [--pg postgresql://...]
(PostgreSQL runs when --pg or SEGUE_TEST_PG_URL is given; .ci/run passes the server it starts.)
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import os
import queue
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
from pg_server import NoPostgres, PgServer, throwaway_postgres

from segue import Agent, RunStore
from segue._core.contracts import Provider, ProviderRequest, ProviderResponse, StreamEvent
from segue.demo.chat import PROMPT, QUESTIONS, demo_tools
from segue.errors import StoreError
from segue.generated import ModelSettings
from segue.providers import AnthropicProvider
from segue_twin import Twin
from segue_twin.server import serve


class Timed(Provider):
    """Wraps a provider: counts calls and sums the time spent inside them (the 'model time')."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.vendor = inner.vendor
        self.model = inner.model
        self.requires_stable_reasoning_prefix = inner.requires_stable_reasoning_prefix
        self.prefix_settings = inner.prefix_settings
        self.calls = 0
        self.seconds: dict[str, float] = {}
        self.current: str | None = None

    @property
    def reasoning_vendor(self) -> str | None:
        return self.inner.reasoning_vendor

    def check_settings(self, settings: ModelSettings) -> None:
        self.inner.check_settings(settings)

    def default_max_tokens(self, model: str) -> int | None:
        return self.inner.default_max_tokens(model)

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        started = time.perf_counter()
        try:
            return await self.inner.complete(request)
        finally:
            self.calls += 1
            key = request.cache_key or ""
            self.seconds[key] = self.seconds.get(key, 0.0) + time.perf_counter() - started

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        return self.inner.stream(request)


async def conversation(
    index: int, agent: Agent, turns: int, overheads: list[float], timed: Timed, tenants: str = "tenant"
) -> list[str]:
    tenant = f"{tenants}-{index:03d}"
    ids: list[str] = []
    for question in QUESTIONS[:turns]:
        before = timed.seconds.get(tenant, 0.0)
        started = time.perf_counter()
        result = await agent.run(question, runs=ids or None, replay_last="all", tenant_id=tenant)
        wall = time.perf_counter() - started
        overheads.append(wall - (timed.seconds.get(tenant, 0.0) - before))
        if result.status != "success":
            raise RuntimeError(f"{tenant} turn {len(ids) + 1}: {result.status}: {result.error}")
        ids.append(result.run_id)
    return ids


async def ticker(lags: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - started - 0.001)


@dataclass
class OnTwin:
    """The demo's agent on a store, its model the twin served on loopback in its own thread, like a vendor: the
    twin's work is the "model time", and it never runs on the event loop the agents share."""

    agent: Agent
    timed: Timed
    store: RunStore
    client: anthropic.AsyncAnthropic
    server: Any

    @classmethod
    def start(cls, url: str) -> OnTwin:
        server = serve("127.0.0.1", 0, twin=Twin())
        client = anthropic.AsyncAnthropic(api_key="load-test", base_url=server.url, max_retries=0)
        store = RunStore(url)
        thinking = {"type": "enabled", "budget_tokens": 1024}
        timed = Timed(AnthropicProvider("claude-sonnet-4-6", cache_ttl="1h", thinking=thinking, client=client))
        agent = Agent(timed, PROMPT, demo_tools(), store, name="load", max_iterations=8)
        return cls(agent=agent, timed=timed, store=store, client=client, server=server)

    async def close(self) -> None:
        self.store.close()
        await self.client.close()
        self.server.close()


async def load(
    url: str, conversations: int, turns: int, *, tenants: str = "tenant", ready: Callable[[], object] | None = None
) -> dict[str, Any]:
    """The load on one store from this process. `tenants` prefixes the conversations' tenants; `ready` is called
    (in a thread) after the warm-up, just before the concurrent part, to start several processes together."""
    setup = OnTwin.start(url)
    agent, timed, store = setup.agent, setup.timed, setup.store
    # One conversation alone first: it warms up imports, converters and the twin, and gives the per-run overhead
    # without contention (with 50 runs sharing one event loop, each run also waits for the others' CPU slices).
    solo: list[float] = []
    await conversation(conversations, agent, turns, solo, timed, tenants)
    timed.calls = 0
    if ready is not None:
        await asyncio.to_thread(ready)
    overheads: list[float] = []
    lags: list[float] = []
    stop = asyncio.Event()
    tick = asyncio.create_task(ticker(lags, stop))
    started = time.perf_counter()
    results = await asyncio.gather(
        *(conversation(i, agent, turns, overheads, timed, tenants) for i in range(conversations)),
        return_exceptions=True,
    )
    elapsed = time.perf_counter() - started
    stop.set()
    await tick
    errors = [r for r in results if isinstance(r, BaseException)]
    locked = [e for e in errors if "locked" in str(e)]
    run_ids = [run_id for r in results if isinstance(r, list) for run_id in r]
    # Every run terminal; every trace and provider call stored (2 traces per iteration: the user message and
    # the answer, plus assistant + tool for each tool-calling iteration).
    details = [store.get_run(run_id, all_tenants=True) for run_id in run_ids]
    terminal = sum(1 for d in details if d is not None and d.status in ("success", "error", "max_iterations"))
    expected_traces = sum(2 * len(d.llm_interactions) for d in details if d is not None)
    counts = store.counts(run_ids)
    await setup.close()
    return {
        "runs": len(run_ids),
        "run_ids": run_ids,
        "errors": errors,
        "locked": locked,
        "terminal": terminal,
        "traces_ok": counts["react_traces"] == expected_traces,
        "traces": counts["react_traces"],
        "interactions_ok": counts["llm_interactions"] == timed.calls,
        "interactions": counts["llm_interactions"],
        "calls": timed.calls,
        "runs_per_s": len(run_ids) / elapsed,
        "solo_p50": statistics.median(solo) * 1000,
        "solo_max": max(solo) * 1000,
        "p50": statistics.median(overheads) * 1000,
        "p95": statistics.quantiles(overheads, n=20)[18] * 1000,
        "model_s": sum(timed.seconds.values()),
        "elapsed": elapsed,
        "lag_max": max(lags) * 1000,
        "lag_p99": statistics.quantiles(lags, n=100)[98] * 1000,
    }


def report(name: str, r: dict[str, Any], conversations: int, turns: int) -> bool:
    ok = (
        not r["errors"]
        and r["terminal"] == r["runs"] == conversations * turns
        and r["traces_ok"]
        and r["interactions_ok"]
    )
    print(
        f"{name}: {r['runs']} runs ({conversations} conversations x {turns} turns) in {r['elapsed']:.1f} s, "
        f"{r['runs_per_s']:.1f} runs/s; model time {r['model_s']:.1f} s"
    )
    print(
        f"  per-run overhead excluding the model, {conversations} at once: p50 {r['p50']:.1f} ms, "
        f"p95 {r['p95']:.1f} ms; one conversation alone: p50 {r['solo_p50']:.1f} ms, max {r['solo_max']:.1f} ms"
    )
    print(
        f"  event loop lateness under load: max {r['lag_max']:.1f} ms, p99 {r['lag_p99']:.2f} ms "
        "(store calls run in worker threads; this is segue's own CPU work between awaits)"
    )
    print(
        f"  terminal runs {r['terminal']}/{r['runs']}; traces {r['traces']} (as sent: {r['traces_ok']}); "
        f"llm interactions {r['interactions']} = provider calls {r['calls']}: {r['interactions_ok']}; "
        f"'database is locked' escaped: {len(r['locked'])}"
    )
    for e in r["errors"][:3]:
        print(f"  error: {type(e).__name__}: {e}")
    return ok


def _process(url: str, index: int, conversations: int, turns: int, barrier: Any, results: Any) -> None:
    """One of several processes: the load on `url` with tenants of its own, started together with the others."""
    logging.getLogger("segue").setLevel(logging.ERROR)
    try:
        r = asyncio.run(load(url, conversations, turns, tenants=f"p{index}", ready=barrier.wait))
    except Exception as e:  # its warm-up conversation failed: the others must not wait for it
        barrier.abort()
        results.put({"failed": f"process {index}: {type(e).__name__}: {e}"})
        return
    r["errors"] = [f"{type(e).__name__}: {e}" for e in r["errors"]]  # exceptions may not pickle
    r["locked"] = [str(e) for e in r["locked"]]
    results.put(r)


def load_processes(url: str, processes: int, conversations: int, turns: int) -> dict[str, Any]:
    """The load in `processes` processes at once on one store (app workers, or `segue serve`s, sharing a file),
    then what the store holds for every run they were told about."""
    RunStore(url).close()  # migrated once, before the writers start
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    workers = [
        ctx.Process(target=_process, args=(url, k, conversations, turns, barrier, results)) for k in range(processes)
    ]
    for w in workers:
        w.start()
    got: list[dict[str, Any]] = []
    while len(got) < processes:
        try:
            got.append(results.get(timeout=1))
        except queue.Empty:
            if any(w.exitcode not in (None, 0) for w in workers):
                barrier.abort()  # a process died: the others stop waiting for it, and the report says so
                break
    for w in workers:
        w.join(timeout=60)
        if w.is_alive():
            w.terminate()
    failed = [r["failed"] for r in got if "failed" in r]
    got = [r for r in got if "failed" not in r]
    run_ids = [run_id for r in got for run_id in r["run_ids"]]
    store = RunStore(url, read_only=True)
    statuses: dict[str, int] = {}
    for run_id in run_ids:
        detail = store.get_run(run_id, all_tenants=True)
        status = detail.status if detail is not None else "missing"
        statuses[status] = statuses.get(status, 0) + 1
    running = len(store.list_runs(status="running", all_tenants=True, limit=10_000))
    store.close()
    elapsed = max((r["elapsed"] for r in got), default=0.0)
    return {
        "processes": processes,
        "crashed": [w.exitcode for w in workers if w.exitcode != 0],
        "failed": failed,
        "each": got,
        "runs": len(run_ids),
        "statuses": statuses,
        "running": running,
        "elapsed": elapsed,
        "runs_per_s": len(run_ids) / elapsed if elapsed else 0.0,
    }


def report_processes(name: str, r: dict[str, Any], conversations: int, turns: int) -> bool:
    each = r["each"]
    expected = r["processes"] * conversations * turns
    errors = [*r["failed"], *(e for p in each for e in p["errors"])]
    ok = (
        not r["crashed"]
        and not errors
        and r["runs"] == expected
        and r["statuses"] == {"success": expected}
        and r["running"] == 0
        and all(p["traces_ok"] and p["interactions_ok"] and p["terminal"] == p["runs"] for p in each)
    )
    print(
        f"{name}, {r['processes']} processes at once: {r['runs']} runs ({r['processes']} x {conversations} "
        f"conversations x {turns} turns) in {r['elapsed']:.1f} s, {r['runs_per_s']:.1f} runs/s; per process "
        + ", ".join(f"{p['runs_per_s']:.1f}" for p in each)
        + " runs/s"
    )
    print(
        "  per-run overhead excluding the model (p50 / p95 per process): "
        + ", ".join(f"{p['p50']:.0f} / {p['p95']:.0f} ms" for p in each)
    )
    print(
        f"  the store holds {r['statuses']} for the {r['runs']} runs the callers were told about; left running: "
        f"{r['running']}; traces and llm interactions as sent: "
        f"{all(p['traces_ok'] and p['interactions_ok'] for p in each)}; 'database is locked' escaped: "
        f"{sum(len(p['locked']) for p in each)}; processes that failed: {len(r['failed']) + len(r['crashed'])}"
    )
    for e in errors[:3]:
        print(f"  error: {e}")
    return ok


@dataclass
class Outcome:
    started: float
    ended: float
    status: str  # a run status, or "refused": the run failed before its row was written
    run_id: str | None
    error: str | None


async def tolerant_conversation(index: int, agent: Agent, turns: int, outcomes: list[Outcome]) -> None:
    """A conversation that goes on when a turn fails (it then replays only the turns that succeeded)."""
    tenant = f"tenant-{index:03d}"
    ids: list[str] = []
    for question in QUESTIONS[:turns]:
        started = time.monotonic()
        try:
            result = await agent.run(question, runs=ids or None, replay_last="all", tenant_id=tenant)
        except StoreError as e:
            outcomes.append(Outcome(started, time.monotonic(), "refused", None, str(e)))
            continue
        outcomes.append(Outcome(started, time.monotonic(), result.status, result.run_id, result.error))
        if result.status == "success":
            ids.append(result.run_id)


async def load_with_restart(server: PgServer, conversations: int, turns: int) -> dict[str, Any]:
    """The load on `server`, which is restarted once a third of the runs have finished."""
    setup = OnTwin.start(server.url)
    agent, timed, store = setup.agent, setup.timed, setup.store
    outcomes: list[Outcome] = []
    window: list[float] = []

    async def restart_midway() -> None:
        while len(outcomes) < conversations * turns // 3:
            await asyncio.sleep(0.01)
        window.append(time.monotonic())
        await asyncio.to_thread(server.restart)
        window.append(time.monotonic())

    restarting = asyncio.create_task(restart_midway())
    started = time.perf_counter()
    await asyncio.gather(*(tolerant_conversation(i, agent, turns, outcomes) for i in range(conversations)))
    elapsed = time.perf_counter() - started
    await restarting
    t0, t1 = window
    during = [o for o in outcomes if o.started < t1 and o.ended > t0]
    failed = [o for o in outcomes if o.status != "success"]
    run_ids = [o.run_id for o in outcomes if o.run_id is not None]
    details = {run_id: store.get_run(run_id, all_tenants=True) for run_id in run_ids}
    terminal = sum(1 for d in details.values() if d is not None and d.status in ("success", "error", "max_iterations"))
    # Traces as sent: the user message, assistant + tool per tool-calling iteration, the final answer. A run that
    # failed after some iterations keeps the user message and the iterations it recorded: twice its calls, plus one.
    traces_ok = all(
        d is not None and len(d.traces) == 2 * len(d.llm_interactions) + (0 if d.status == "success" else 1)
        for d in details.values()
    )
    await setup.close()
    return {
        "runs": len(outcomes),
        "elapsed": elapsed,
        "restart_s": t1 - t0,
        "restart_at": sum(1 for o in outcomes if o.ended <= t0),
        "during": len(during),
        "failed": failed,
        "outside": [o for o in failed if o not in during],
        "unclear": [o for o in failed if "run store at" not in (o.error or "")],
        "terminal": terminal,
        "rows": len(run_ids),
        "traces_ok": traces_ok,
        "calls": timed.calls,
        "interactions": sum(len(d.llm_interactions) for d in details.values() if d is not None),
    }


def report_restart(r: dict[str, Any], conversations: int, turns: int) -> bool:
    ok = (
        r["runs"] == conversations * turns
        and r["terminal"] == r["rows"]
        and r["traces_ok"]
        and not r["outside"]
        and not r["unclear"]
    )
    print(
        f"PostgreSQL restarted mid-load (its own server): {r['runs']} runs in {r['elapsed']:.1f} s; the restart "
        f"began after {r['restart_at']} runs and took {r['restart_s']:.1f} s; {r['during']} runs were in flight "
        "during it"
    )
    print(
        f"  failed with a clear error: {len(r['failed'])} (of the {r['during']} in flight; "
        f"{sum(1 for o in r['failed'] if o.status == 'refused')} before their row was written); "
        f"failures outside the restart: {len(r['outside'])}; unclear messages: {len(r['unclear'])}"
    )
    print(
        f"  terminal runs {r['terminal']}/{r['rows']} stored; traces as sent: {r['traces_ok']}; "
        f"llm interactions {r['interactions']} of {r['calls']} provider calls (a call whose run failed before "
        "recording it is not stored)"
    )
    for o in (r["unclear"] or r["failed"])[:3]:
        print(f"  failure: {o.status}: {o.error}")
    return ok


def restart_phase(conversations: int, turns: int) -> bool:
    try:
        with throwaway_postgres() as server:
            return report_restart(asyncio.run(load_with_restart(server, conversations, turns)), conversations, turns)
    except NoPostgres as e:
        print(f"PostgreSQL restart: cannot start a server of its own ({e})")
        return not os.environ.get("CI")  # CI installs PostgreSQL: there, this is a failure


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--pg", default=os.environ.get("SEGUE_TEST_PG_URL"), help="PostgreSQL URL (scratch DB)")
    parser.add_argument(
        "--processes", type=int, default=1, help="run the load in N processes at once on each store (default 1)"
    )
    args = parser.parse_args()
    logging.getLogger("segue").setLevel(logging.ERROR)
    if args.processes > 1:
        return processes_main(args.processes, args.conversations, args.turns, args.pg)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'load.db'}"
        ok &= report("SQLite", asyncio.run(load(url, args.conversations, args.turns)), args.conversations, args.turns)
    if args.pg:
        drop_segue_tables(args.pg)
        ok &= report(
            "PostgreSQL", asyncio.run(load(args.pg, args.conversations, args.turns)), args.conversations, args.turns
        )
        ok &= restart_phase(args.conversations, args.turns)
    else:
        print("PostgreSQL: skipped (pass --pg URL or set SEGUE_TEST_PG_URL)")
    return 0 if ok else 1


def processes_main(processes: int, conversations: int, turns: int, pg: str | None) -> int:
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'load.db'}"
        ok &= report_processes(
            "SQLite (one file)", load_processes(url, processes, conversations, turns), conversations, turns
        )
    if pg:
        drop_segue_tables(pg)
        ok &= report_processes("PostgreSQL", load_processes(pg, processes, conversations, turns), conversations, turns)
    else:
        print("PostgreSQL: skipped (pass --pg URL or set SEGUE_TEST_PG_URL)")
    return 0 if ok else 1


def drop_segue_tables(url: str) -> None:
    from segue.store.models import Bound

    scratch = RunStore(url)
    scratch.db.drop_tables(Bound(scratch.db).all, safe=True, cascade=True)
    scratch.close()


if __name__ == "__main__":
    raise SystemExit(main())
