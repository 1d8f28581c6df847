"""Replay overhead of a run that replays a 50-run and a 200-run conversation, as a ratio to the floor, in one run;
and beside dendrux's overhead on the same conversation shape.

    python bench/replay.py [--sizes 50 200] [--rounds 3] [--dendrux-runs 50]

The conversation: N runs of 10 traces each (the question, four thinking + tool_use turns with their results, the
answer), every run replaying all earlier ones, so every prefix descriptor matches and all reasoning is kept. It is
made with a ScriptedProvider that answers as Anthropic would (same vendor, model and reasoning blocks); then each
round times one more run replaying all N (`runs=ids, replay_last="all"`, 5 iterations) through AnthropicProvider
and the official `anthropic` client against an in-process vendor (httpx2.MockTransport).

- overhead: the run's wall time minus the time the mocked vendor took: validation, the store read, the replay
  plan, laying out, the wire bodies, the official client, parsing and recording each iteration.
- floor: what any implementation has to do: fetch the N runs' rows (one raw sqlite3 query, JSON-decoded) plus one
  `json.dumps` of each request body the run sent.

Each round measures both back to back; the ratio printed is the median of the rounds' ratios (target <= 3x,
the long-conversation issue's acceptance).
The databases are on /dev/shm when the machine has it, so the numbers are work, not the disk's fsync latency.
dendrux 0.4.1 (installed into its own virtual environment on first use, skipped if the registry cannot provide
it) runs the same conversation shape against the same in-process vendor answers (bench/peers/_dendrux_overhead.py);
segue's overhead is compared with dendrux's, median of `--rounds` each (target: at most 1/10).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))  # _peer_venv, beside the peer benches
import anthropic
import httpx2
from _anthropic_answers import SQL
from _anthropic_answers import answer as answer_to
from _peer_venv import peer_python

from segue import Agent, RunStore
from segue._core.contracts import ProviderRequest
from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock
from segue.providers import AnthropicProvider
from segue.testing import ScriptedProvider

MODEL = "claude-sonnet-4-6"
PROMPT = "You answer from the database."
THINKING = {"type": "enabled", "budget_tokens": 1024}
CALLS_PER_RUN = 4  # -> 1 user + 4 x (assistant, tool) + 1 answer = 10 traces


def run_query(sql: str) -> list[dict[str, Any]]:
    """Run a read-only query."""
    return [{"month": f"{m:02d}", "total": 1000 + m} for m in range(1, 13)]


class Scripted:
    """The conversation's author: answers as Anthropic would, in canonical blocks."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, request: ProviderRequest) -> Message:
        self.n += 1
        own = 0
        for m in reversed(request.messages):
            if m.role == "user" and all(isinstance(b, TextBlock) for b in m.content):
                break
            own += m.role == "assistant"
        if own < CALLS_PER_RUN:
            thinking = ReasoningBlock(
                vendor="anthropic",
                model=MODEL,
                format="anthropic.thinking",
                text=f"I need the monthly totals, step {self.n}.",
                signature=f"sig-{self.n:06d}" * 4,
            )
            call = ToolCallBlock(id=f"toolu_{self.n}", name="run_query", arguments={"sql": SQL})
            return Message(role="assistant", content=[thinking, call])
        return Message(role="assistant", content=[TextBlock(text=f"Revenue by month, answer {self.n}: Jan $1,234.")])


class Vendor:
    """The measured runs' vendor, in process: the same answers as Anthropic JSON. Times itself."""

    def __init__(self) -> None:
        self.n = 0
        self.seconds = 0.0
        self.cpu = 0.0  # CPU seconds of this thread inside the vendor
        self.bodies: list[bytes] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        started, cpu = time.perf_counter(), time.thread_time()
        body = json.loads(request.content)
        self.bodies.append(request.content)
        self.n += 1
        answer = httpx2.Response(200, json=answer_to(body, self.n, CALLS_PER_RUN, MODEL))
        self.seconds += time.perf_counter() - started
        self.cpu += time.thread_time() - cpu
        return answer


def scratch_dir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="segue-bench-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


async def make_conversation(url: str, runs: int) -> list[str]:
    store = RunStore(url)
    author = ScriptedProvider(replies=[Scripted()] * (runs * (CALLS_PER_RUN + 1)), vendor="anthropic", model=MODEL)
    agent = Agent(author, PROMPT, [run_query], store, max_iterations=CALLS_PER_RUN + 1)
    ids: list[str] = []
    for i in range(runs):
        result = await agent.run(f"What was the revenue per month, take {i}?", runs=ids or None, replay_last="all")
        assert result.status == "success", result
        ids.append(result.run_id)
        author.requests.clear()
    store.close()
    return ids


def floor_fetch(path: Path, ids: list[str]) -> tuple[float, float]:
    """Seconds to fetch the runs' rows with one raw query and decode their JSON (wall, CPU)."""
    raw = sqlite3.connect(path)
    sql = (
        "SELECT r.id, r.tenant_id, r.status, r.input, r.answer, r.meta, r.usage, t.idx, t.role, t.content, t.meta "
        f"FROM agent_runs r LEFT JOIN react_traces t ON t.run_id = r.id WHERE r.id IN ({','.join('?' * len(ids))}) "
        "ORDER BY r.id, t.idx"
    )
    started, cpu = time.perf_counter(), time.process_time()
    for row in raw.execute(sql, ids).fetchall():
        json.loads(row[5])
        if row[9] is not None:
            json.loads(row[9])
        if row[10] is not None:
            json.loads(row[10])
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    raw.close()
    return seconds, cpu


def floor_encode(bodies: list[bytes]) -> tuple[float, float]:
    decoded = [json.loads(b) for b in bodies]
    started, cpu = time.perf_counter(), time.process_time()
    for body in decoded:
        json.dumps(body)
    return time.perf_counter() - started, time.process_time() - cpu


async def segue_side(runs: int, rounds: int) -> dict[str, Any]:
    with scratch_dir() as tmp:
        return await _segue_side(Path(tmp) / "segue.db", runs, rounds)


async def _segue_side(path: Path, runs: int, rounds: int) -> dict[str, Any]:
    made = time.perf_counter()
    ids = await make_conversation(f"sqlite:///{path}", runs)
    made = time.perf_counter() - made
    vendor = Vendor()
    client = anthropic.AsyncAnthropic(
        api_key="bench", http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(vendor)), max_retries=0
    )
    provider = AnthropicProvider(MODEL, thinking=THINKING, cache_ttl="5m", client=client)
    in_client = [0.0]  # seconds inside the official client's call, the vendor's included
    post = provider._post

    async def timed_post(wire: Any, model: str, *, retries: int | None = None) -> Any:
        started = time.perf_counter()
        try:
            return await post(wire, model, retries=retries)
        finally:
            in_client[0] += time.perf_counter() - started

    provider._post = timed_post  # type: ignore[method-assign]
    store = RunStore(f"sqlite:///{path}")
    agent = Agent(provider, PROMPT, [run_query], store, max_iterations=CALLS_PER_RUN + 1)
    overheads, floors, clients, cpu_ratios = [], [], [], []
    for r in range(rounds + 1):  # round 0 warms the process (imports, the catalog) and is not counted
        vendor.seconds, vendor.cpu, vendor.bodies, in_client[0] = 0.0, 0.0, [], 0.0
        started, cpu = time.perf_counter(), time.process_time()
        result = await agent.run(f"And the next month, round {r}?", runs=ids, replay_last="all")
        overhead = time.perf_counter() - started - vendor.seconds
        overhead_cpu = time.process_time() - cpu - vendor.cpu
        assert result.status == "success" and result.iterations == CALLS_PER_RUN + 1, result
        assert result.replay is not None and result.replay.reasoning_kept == ids, "every run's reasoning is replayed"
        (fetch, fetch_cpu), (encode, encode_cpu) = floor_fetch(path, ids), floor_encode(vendor.bodies)
        floor, floor_cpu = fetch + encode, fetch_cpu + encode_cpu
        if r:
            overheads.append(overhead)
            floors.append(floor)
            clients.append(in_client[0] - vendor.seconds)
            cpu_ratios.append(overhead_cpu / floor_cpu)
    store.close()
    return {
        "runs": runs,
        "made": made,
        "body_bytes": len(vendor.bodies[-1]),
        "overheads": overheads,
        "floors": floors,
        "client": statistics.median(clients),
        "ratio": statistics.median(o / f for o, f in zip(overheads, floors, strict=True)),
        "cpu_ratio": statistics.median(cpu_ratios),
    }


def dendrux_side(runs: int, rounds: int) -> dict[str, Any] | str:
    python = peer_python("dendrux", "0.4.1", extras="anthropic")
    if python is None:
        return "skipped (dendrux[anthropic]==0.4.1 could not be installed here)"
    with scratch_dir() as tmp:
        return _dendrux_side(python, Path(tmp), runs, rounds)


def _dendrux_side(python: Path, tmp: Path, runs: int, rounds: int) -> dict[str, Any] | str:
    config = tmp / "config.json"
    config.write_text(
        json.dumps(
            {
                "runs": runs,
                "rounds": rounds,
                "calls": CALLS_PER_RUN,
                "model": MODEL,
                "prompt": PROMPT,
                "db_url": f"sqlite+aiosqlite:///{tmp}/dendrux.db",
            }
        )
    )
    script = Path(__file__).resolve().parent / "peers" / "_dendrux_overhead.py"
    out = subprocess.run([str(python), str(script), str(config)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return f"failed: {(out.stderr.strip().splitlines() or ['?'])[-1]}"
    measured: dict[str, Any] = json.loads(out.stdout)
    return measured


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200], help="replayed runs per conversation")
    parser.add_argument("--rounds", type=int, default=3, help="timed runs per size (median)")
    parser.add_argument("--dendrux-runs", type=int, default=50, help="conversation size for dendrux (0: skip)")
    args = parser.parse_args()
    import logging

    logging.getLogger("segue").setLevel(logging.ERROR)
    iterations = CALLS_PER_RUN + 1
    print(f"a run replaying N runs ({iterations} iterations), AnthropicProvider + official client, vendor in process")
    print(f"median of {args.rounds} rounds; target: overhead <= 3x the floor (row fetch + one json.dumps per body)")
    results = {}
    for runs in args.sizes:
        r = asyncio.run(segue_side(runs, args.rounds))
        results[runs] = r
        overhead, floor = statistics.median(r["overheads"]), statistics.median(r["floors"])
        print(
            f"  N={runs:<4} body {r['body_bytes'] / 1e3:7.0f} kB   overhead {ms(overhead)}   floor {ms(floor)}   "
            f"ratio {r['ratio']:5.2f}x  {'ok' if r['ratio'] <= 3 else 'MISSED'}   (made in {r['made']:.0f} s)"
        )
        print(f"         of the overhead, inside the official client's call: {ms(r['client'])}")
        print(f"         the same ratio in CPU time (which the machine's load moves less): {r['cpu_ratio']:.2f}x")
    if args.dendrux_runs <= 0:
        return
    runs = args.dendrux_runs
    if runs not in results:
        results[runs] = asyncio.run(segue_side(runs, args.rounds))
    mine = statistics.median(results[runs]["overheads"])
    print(f"\nbeside dendrux 0.4.1, N={runs}, median of {args.rounds} each; target: segue <= 1/10 of dendrux")
    started = time.perf_counter()
    theirs = dendrux_side(runs, args.rounds)
    if isinstance(theirs, str):
        print(f"  dendrux: {theirs}")
        return
    other = statistics.median(theirs["overheads"])
    print(f"  segue   overhead {ms(mine)}")
    print(f"  dendrux overhead {ms(other)}   (last body {theirs['body_bytes'] / 1e3:.0f} kB)")
    print(
        f"  segue / dendrux = {mine / other:.3f}  {'ok' if mine / other <= 0.1 else 'MISSED'}   "
        f"(dendrux side took {time.perf_counter() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
