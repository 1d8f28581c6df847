"""Benchmark: planning a replay of a 50-run conversation vs a raw sqlite3 fetch of the same rows, in one run.

The conversation is made by a real Agent on a ScriptedProvider: 50 runs of 10 traces each (user message, four
reasoning + tool-call turns with their results, final answer), every run replaying all earlier ones, so every
prefix descriptor matches and reasoning is kept. Planning = one store query for all 50 runs + the planner
(window, descriptors, reasoning keep/drop, tool checks). The raw baseline runs the same join with sqlite3 and
decodes the JSON. Target: planning within 3x of the raw fetch. When the `dendrux` package can be installed into
its own virtual environment, its expansion of the same conversation shape is printed too.
Run: python bench/replay.py
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _peer_venv import peer_python

from segue import Agent, RunStore
from segue.contracts import ProviderRequest
from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from segue.replay import plan_replay
from segue.testing import ScriptedProvider

RUNS = 50
CALLS_PER_RUN = 4  # -> 1 user + 4 x (assistant, tool) + 1 answer = 10 traces


class Policy:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, request: ProviderRequest) -> Message:
        self.n += 1
        own = 0
        for m in reversed(request.messages):
            if m.role == "user":
                break
            own += m.role == "assistant"
        if own < CALLS_PER_RUN:
            return Message(
                role="assistant",
                content=[
                    ReasoningBlock(
                        vendor="scripted",
                        model="scripted-1",
                        format="scripted.reasoning",
                        text=f"I need the monthly totals, step {self.n}.",
                        signature=f"sig-{self.n:06d}" * 4,
                    ),
                    ToolCallBlock(
                        id=f"call_{self.n}",
                        name="run_query",
                        arguments={"sql": "SELECT strftime('%m', placed_at) AS month, SUM(total) FROM orders"},
                    ),
                ],
            )
        return Message(role="assistant", content=[TextBlock(text=f"Revenue by month, answer {self.n}: Jan $1,234.")])


def run_query(sql: str) -> list[dict[str, Any]]:
    """Run a read-only query."""
    return [{"month": f"{m:02d}", "total": 1000 + m} for m in range(1, 13)]


async def make_conversation(url: str) -> list[str]:
    agent = Agent(
        ScriptedProvider(replies=[Policy()] * 10_000),
        "You answer from the database.",
        [run_query],
        RunStore(url),
        max_iterations=CALLS_PER_RUN + 1,
    )
    ids: list[str] = []
    for i in range(RUNS):
        result = await agent.run(f"What was the revenue per month, take {i}?", runs=ids or None, replay_last="all")
        assert result.status == "success", result
        ids.append(result.run_id)
    return ids


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "segue.db"
        url = f"sqlite:///{path}"
        ids = asyncio.run(make_conversation(url))
        store = RunStore(url)
        agent = Agent(ScriptedProvider(replies=[]), "You answer from the database.", [run_query], store)
        request = agent._pipeline.validate(
            {
                "user_input": "next",
                "history": None,
                "context": None,
                "runs": ids,
                "replay_last": "all",
                "replay_reasoning": True,
                "replay_budget_tokens": None,
                "tenant_id": "default",
                "metadata": None,
                "idempotency_key": None,
                "model": None,
                "vendor": None,
            }
        )
        knobs = request.knobs
        assert knobs is not None
        current = agent._config.snapshot(request).current

        def plan() -> Any:
            return plan_replay(store.load_runs(ids), knobs, "default", current)

        result = plan()
        assert result.summary.reasoning_kept == ids, "every descriptor matches: reasoning is kept"
        traces = sum(len(r.traces) for r in store.load_runs(ids).values())

        raw = sqlite3.connect(path)
        sql = (
            "SELECT r.id, r.tenant_id, r.status, r.input, r.answer, r.meta, r.usage, t.idx, t.role, t.content, t.meta "
            f"FROM agent_runs r LEFT JOIN react_traces t ON t.run_id = r.id WHERE r.id IN ({','.join('?' * len(ids))}) "
            "ORDER BY r.id, t.idx"
        )

        def fetch() -> int:
            rows = raw.execute(sql, ids).fetchall()
            return sum(len(json.loads(row[9])) for row in rows)

        fetch()
        rounds = 20
        t_plan = min(timeit.repeat(plan, number=rounds, repeat=5)) / rounds
        t_raw = min(timeit.repeat(fetch, number=rounds, repeat=5)) / rounds
        print(f"replay plan of a {RUNS}-run conversation ({traces} traces, reasoning on, replay_last='all')")
        print(f"  raw sqlite3 fetch + JSON decode: {t_raw * 1e3:8.2f} ms")
        print(f"  segue: one query + planner:      {t_plan * 1e3:8.2f} ms   ({t_plan / t_raw:.2f}x raw; target <= 3x)")
        print(f"  messages planned: {len(result.messages)}")
        dendrux(store, ids, t_plan)
        raw.close()
        store.close()


def dendrux(store: RunStore, ids: list[str], t_plan: float) -> None:
    """The same conversation shape through dendrux's planner, in its own virtual environment."""
    started = time.perf_counter()
    python = peer_python("dendrux", "0.4.1")
    if python is None:
        print("  dendrux: skipped (not installable here)")
        return
    runs = []
    for run_id, run in store.load_runs(ids).items():
        traces = []
        for t in run.traces:
            m = t.message
            meta: dict[str, Any] = {}
            content = "".join(b.text for b in m.content if isinstance(b, TextBlock))
            calls = [b for b in m.content if isinstance(b, ToolCallBlock)]
            thinking = [b for b in m.content if isinstance(b, ReasoningBlock)]
            results = [b for b in m.content if isinstance(b, ToolResultBlock)]
            if calls:
                meta["tool_calls"] = [{"name": c.name, "params": c.arguments, "id": c.id} for c in calls]
            if thinking:
                meta["reasoning_blocks"] = [
                    {"type": "thinking", "thinking": b.text, "signature": b.signature} for b in thinking
                ]
            if results:
                content = results[0].content
                meta.update(call_id=results[0].tool_call_id, tool_name="run_query")
            traces.append({"index": t.index, "role": m.role, "content": content, "meta": meta})
        runs.append({"id": run_id, "input": run.input, "answer": run.answer, "traces": traces})
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"runs": runs}, fh)
    script = Path(__file__).resolve().parent / "_dendrux_expand.py"
    out = subprocess.run([str(python), str(script), fh.name], capture_output=True, text=True, check=False)
    Path(fh.name).unlink()
    if out.returncode != 0:
        print(f"  dendrux: failed to run its planner: {out.stderr.strip().splitlines()[-1:]}")
        return
    measured = json.loads(out.stdout)
    print(
        f"  dendrux 0.4.1 expand_replay only (no store reads): {measured['seconds'] * 1e3:8.2f} ms "
        f"({measured['messages']} messages; segue plan incl. its query = {t_plan / measured['seconds']:.2f}x)"
    )
    print(f"  (dendrux environment ready in {time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
