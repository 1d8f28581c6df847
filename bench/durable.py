"""Benchmark: segue's journal per step vs DBOS's per step, side by side in one run (issue 36).

segue journals a run's steps in its own store (segue.run.loop): a model step's response (its request body, answer,
usage and meta) in one transaction before any tool runs, a non-retry_safe tool's start, and each tool result as it
completes. Here each "turn" is one model step and one tool step, written through RunStore exactly as the recorder
writes them (record_iteration, record_tool_starts, record_tool_call). DBOS (`pip install dbos==3.4.0`; not in the
dev extra, because it brings psycopg 3, which Peewee then picks when psycopg2 is missing, and
tests/project/test_missing_driver.py expects the psycopg2 message) journals a workflow's steps in its system
database: the same turn is a workflow with two @DBOS.step calls
returning a small reference, which is what a segue adapter would store there (the history stays in segue's store).

Both on SQLite files in one temporary folder, on this machine, measured back to back; the printed ratio is segue's
time per step over DBOS's (target <= 0.25x). Run: python bench/durable.py [--turns N]

Not measured here: the DBOS adapter's engine database bytes per turn (the adapter is not built).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ulid import ULID

from segue.generated import LlmInteraction, Message, RunMeta, TextBlock, ToolCallBlock, ToolCallRecord, Usage
from segue.store import NewRun, RunStore

USAGE = Usage(input_tokens=1200, output_tokens=80)


def segue_steps(folder: Path, turns: int) -> float:
    """Seconds per step (a model step, a tool start, a tool result: two steps per turn) through RunStore."""
    store = RunStore(f"sqlite:///{folder}/segue.db")
    run_id = str(ULID())
    owner = "bench"
    store.create_run(
        NewRun(
            run_id=run_id,
            tenant_id="t",
            agent_name="bench",
            input="q",
            model="m",
            vendor="v",
            meta=RunMeta(),
            metadata={},
            lease_seconds=300,
            lease_owner=owner,
        ),
        [Message(role="user", content=[TextBlock(text="settle order 7")])],
    )
    history: list[dict[str, object]] = [{"role": "user", "content": "settle order 7"}]
    started = time.perf_counter()
    index = 1
    for turn in range(1, turns + 1):
        call = ToolCallBlock(id=f"c{turn}", name="lookup", arguments={"q": f"order {turn}"})
        assistant = Message(role="assistant", content=[call])
        history = [*history, {"role": "assistant", "content": f"call lookup {turn}"}]
        interaction = LlmInteraction(
            iteration=turn,
            vendor="v",
            model="m",
            provider_request={"system": "You settle orders. " * 50, "messages": history},
            provider_response={"content": [{"type": "tool_use", "id": call.id}]},
            usage=USAGE,
            latency_ms=1.0,
        )
        store.record_iteration(
            run_id,
            iteration=turn,
            first_index=index,
            traces=[assistant],
            interaction=interaction,
            usage=USAGE,
            lease_seconds=300,
            owner=owner,
        )
        index += 1
        record = ToolCallRecord(
            call_id=call.id, iteration=turn, name="lookup", arguments=call.arguments, is_error=False, duration_ms=0.0
        )
        store.record_tool_starts(run_id, [record], owner=owner)
        done = ToolCallRecord(
            call_id=call.id,
            iteration=turn,
            name="lookup",
            arguments=call.arguments,
            result=f"order {turn}: shipped",
            is_error=False,
            duration_ms=1.0,
        )
        store.record_tool_call(run_id, done, lease_seconds=300, owner=owner)
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed / (2 * turns)


def dbos_steps(folder: Path, turns: int) -> tuple[float, int]:
    """Seconds per DBOS step, and the system database's size, for `turns` turns of two steps each."""
    try:
        from dbos import DBOS
    except ImportError:
        raise SystemExit("bench/durable.py compares with DBOS: pip install dbos==3.4.0") from None

    database = folder / "dbos.sqlite"
    DBOS(config={"name": "segue-bench", "system_database_url": f"sqlite:///{database}"})

    @DBOS.step()
    def model_step(turn: int) -> dict[str, object]:
        return {"run_id": "bench", "iteration": turn}

    @DBOS.step()
    def tool_step(turn: int) -> dict[str, object]:
        return {"run_id": "bench", "iteration": turn, "call_id": f"c{turn}"}

    @DBOS.workflow()
    def workflow(n: int) -> int:
        for turn in range(1, n + 1):
            model_step(turn)
            tool_step(turn)
        return n

    DBOS.launch()
    try:
        started = time.perf_counter()
        workflow(turns)
        elapsed = time.perf_counter() - started
    finally:
        DBOS.destroy()
    return elapsed / (2 * turns), database.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        segue_step = segue_steps(folder, args.turns)
        dbos_step, _ = dbos_steps(folder, args.turns)
    print(f"turns: {args.turns} (a model step and a tool step each), SQLite, one machine, back to back")
    print(f"segue journal per step: {segue_step * 1000:.2f} ms (response + request body + tool start + result)")
    print(f"DBOS step per step:     {dbos_step * 1000:.2f} ms (a step returning a reference)")
    print(f"ratio segue / DBOS:     {segue_step / dbos_step:.2f}x (target <= 0.25x)")


if __name__ == "__main__":
    main()
