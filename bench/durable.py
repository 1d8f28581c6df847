"""Benchmark: segue's journal per step vs DBOS's per step, side by side in one run (issue 36).

segue journals a run's steps in its own store (segue.run.loop): a model step's response (its request body, answer,
usage and meta) in one transaction before any tool runs, a non-retry_safe tool's start, and each tool result as it
completes. Here each "turn" is one model step and one tool step, written through RunStore exactly as the recorder
writes them (record_iteration, record_tool_starts, record_tool_call). DBOS (`pip install 'segue[dbos]'`; in the dev
extra) journals a workflow's steps in its system database: the same turn is a workflow with two @DBOS.step calls
returning a small reference, which is what the adapter stores there (the history stays in segue's store).

Where segue's time went, timed one write at a time and profiled: Peewee building each statement's SQL (about 0.1
ms a statement, three times SQLite's own insert and commit; the per-step writes now make theirs once, in
segue.store.statements), then the sync of each commit. segue's store runs SQLite in WAL mode with `synchronous`
NORMAL (segue.store.connection.sqlite_synchronous): a commit survives a killed process, which is what recovery is
for, and the log is synced at checkpoints rather than at every commit. `?synchronous=full` on the store URL syncs
every commit (a commit then survives a power cut too): measured beside it, with a `retry_safe` tool's turn, which
journals no start row (two transactions, not three). DBOS runs its SQLite with its own settings (rollback-journal mode).

Both on SQLite files in one temporary folder, on this machine, measured back to back; the printed ratio is segue's
time per step over DBOS's (target <= 0.25x). Run: python bench/durable.py [--turns N]

Then the DBOS adapter (segue.durable.dbos.DBOSAgent): one run of 10 turns and one of 100 (a tool call each, then
the answer), and the bytes DBOS's system database holds for each run's workflow (its step rows and its status row,
every stored value counted), per turn: flat, because a step's output is a reference into segue's store, not the
history.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from ulid import ULID

from segue.generated import LlmInteraction, Message, RunMeta, TextBlock, ToolCallBlock, ToolCallRecord, Usage
from segue.store import NewRun, RunStore

USAGE = Usage(input_tokens=1200, output_tokens=80)


def segue_steps(folder: Path, turns: int, *, retry_safe: bool = False, synchronous: str = "") -> float:
    """Seconds per step (a model step, a tool start, a tool result: two steps per turn) through RunStore. A call of
    a `retry_safe` tool journals no start: its turn is two transactions, not three. `synchronous`: the store URL's
    `?synchronous=` (empty: the default, NORMAL)."""
    name = f"segue{'-safe' if retry_safe else ''}{'-' + synchronous if synchronous else ''}.db"
    store = RunStore(f"sqlite:///{folder}/{name}" + (f"?synchronous={synchronous}" if synchronous else ""))
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
        if not retry_safe:
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


def adapter_bytes(folder: Path, sizes: list[int]) -> dict[int, int]:
    """Bytes DBOS's system database holds for a DBOSAgent run of each number of turns (its workflow's rows)."""
    import sqlite3

    from dbos import DBOS

    from segue import Agent, tool
    from segue.durable.dbos import DBOSAgent
    from segue.testing import ScriptedProvider, call, text

    database = folder / "adapter.sqlite"
    DBOS(config={"name": "segue-bench-adapter", "system_database_url": f"sqlite:///{database}"})

    @tool(retry_safe=True)
    def lookup(q: str) -> str:
        """Look an order up."""
        return f"{q}: shipped"

    replies = [r for n in sizes for r in [*(call("lookup", {"q": f"order {i}"}) for i in range(n)), text("done")]]
    store = RunStore(f"sqlite:///{folder}/a.db")
    agent = Agent(ScriptedProvider.of(*replies), "You settle orders.", [lookup], store, max_iterations=max(sizes) + 1)
    durable = DBOSAgent(agent, name="bench")
    DBOS.launch()
    try:
        results = {n: asyncio.run(durable.run(f"settle {n} orders")) for n in sizes}
        assert all(r.status == "success" and r.iterations == n + 1 for n, r in results.items()), results
        run_ids = {n: r.run_id for n, r in results.items()}
    finally:
        DBOS.destroy()
    found = {}
    with sqlite3.connect(database) as db:
        for n, run_id in run_ids.items():
            stored = 0
            for table in ("operation_outputs", "workflow_status"):
                rows = db.execute(f"SELECT * FROM {table} WHERE workflow_uuid = ?", (run_id,)).fetchall()
                stored += sum(len(str(v).encode()) for row in rows for v in row if v is not None)
            found[n] = stored
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        segue_step = segue_steps(folder, args.turns)
        safe_step = segue_steps(folder, args.turns, retry_safe=True)
        full_step = segue_steps(folder, args.turns, synchronous="full")
        dbos_step, _ = dbos_steps(folder, args.turns)
        stored = adapter_bytes(folder, [10, 100])
    print(f"turns: {args.turns} (a model step and a tool step each), SQLite, one machine, back to back")
    print(f"segue journal per step: {segue_step * 1000:.2f} ms (response + request body + tool start + result)")
    print(f"  with a retry_safe tool: {safe_step * 1000:.2f} ms (no start row: two transactions a turn, not three)")
    print(f"  ?synchronous=full:      {full_step * 1000:.2f} ms (a sync per commit: survives a power cut too)")
    print(f"DBOS step per step:     {dbos_step * 1000:.2f} ms (a step returning a reference)")
    print(f"ratio segue / DBOS:     {segue_step / dbos_step:.2f}x (target <= 0.25x)")
    print(f"  with a retry_safe tool: {safe_step / dbos_step:.2f}x")
    print(f"  ?synchronous=full:      {full_step / dbos_step:.2f}x")
    for n, size in stored.items():
        print(f"DBOSAgent, engine database per turn at {n} turns: {size / n:.0f} bytes ({size} for the run)")


if __name__ == "__main__":
    main()
