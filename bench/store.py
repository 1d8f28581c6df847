"""Benchmark: RunStore writes and reads vs raw sqlite3 doing the same inserts and selects, in one run.

1,000 runs of 10 traces each. segue writes each run as the agent does (run row + first trace in one
transaction, then the rest in one `record_iteration` transaction) and reads each back with `load_runs`; raw
sqlite3 runs the same statements on the same table layout with the same transactions. Prints traces/s for both
and the ratio (target: segue within 3x). Run: python bench/store.py [--runs N]
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

from ulid import ULID

from segue.generated import Message, RunMeta, TextBlock, ToolCallBlock, ToolResultBlock, Usage
from segue.store import NewRun, RunStore

TRACES_PER_RUN = 10


def conversation(i: int) -> list[Message]:
    messages = [Message(role="user", content=[TextBlock(text=f"question {i}: revenue per month in 2025?")])]
    for k in range(4):
        messages.append(
            Message(
                role="assistant",
                content=[
                    ToolCallBlock(
                        id=f"c{i}_{k}", name="run_query", arguments={"sql": "SELECT month, SUM(total) FROM orders"}
                    )
                ],
            )
        )
        messages.append(
            Message(
                role="tool",
                content=[ToolResultBlock(tool_call_id=f"c{i}_{k}", content='[{"month": "2025-01", "total": 1234.5}]')],
            )
        )
    messages.append(Message(role="assistant", content=[TextBlock(text="January: $1,234.50; February: $987.00.")]))
    assert len(messages) == TRACES_PER_RUN
    return messages


def bench_segue(path: Path, runs: list[tuple[str, list[Message]]]) -> tuple[float, float]:
    store = RunStore(f"sqlite:///{path}")
    usage = Usage(input_tokens=100, output_tokens=10)
    started = time.perf_counter()
    for run_id, messages in runs:
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
            ),
            messages[:1],
        )
        store.record_iteration(run_id, iteration=1, first_index=1, traces=messages[1:], interaction=None, usage=usage)
    write = time.perf_counter() - started
    started = time.perf_counter()
    for run_id, _ in runs:
        loaded = store.load_runs([run_id])
        assert len(loaded[run_id].traces) == TRACES_PER_RUN
    read = time.perf_counter() - started
    store.close()
    return write, read


def bench_raw(path: Path, runs: list[tuple[str, list[Message]]]) -> tuple[float, float]:
    """The same table layout and transactions, with JSON already serialised the way segue stores it."""
    from segue.generated import get_converter

    conv = get_converter()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=wal")
    db.execute(
        "CREATE TABLE agent_runs (id TEXT PRIMARY KEY, tenant_id TEXT, status TEXT, input TEXT, meta TEXT,"
        " usage TEXT, iterations INTEGER)"
    )
    db.execute("CREATE TABLE react_traces (id INTEGER PRIMARY KEY, run_id TEXT, idx INTEGER, role TEXT, content TEXT)")
    db.execute("CREATE UNIQUE INDEX tr ON react_traces (run_id, idx)")
    import json

    started = time.perf_counter()
    for run_id, messages in runs:
        rows = [(run_id, i, m.role, json.dumps(conv.unstructure(m.content, list))) for i, m in enumerate(messages)]
        db.execute("BEGIN")
        db.execute("INSERT INTO agent_runs VALUES (?, 't', 'running', 'q', '{}', '{}', 0)", (run_id,))
        db.execute("INSERT INTO react_traces (run_id, idx, role, content) VALUES (?, ?, ?, ?)", rows[0])
        db.execute("COMMIT")
        db.execute("BEGIN")
        db.executemany("INSERT INTO react_traces (run_id, idx, role, content) VALUES (?, ?, ?, ?)", rows[1:])
        db.execute("UPDATE agent_runs SET usage = '{}', iterations = 1 WHERE id = ?", (run_id,))
        db.execute("COMMIT")
    write = time.perf_counter() - started
    started = time.perf_counter()
    for run_id, _ in runs:
        got = db.execute(
            "SELECT r.id, r.status, t.idx, t.role, t.content FROM agent_runs r LEFT JOIN react_traces t "
            "ON t.run_id = r.id WHERE r.id = ? ORDER BY t.idx",
            (run_id,),
        ).fetchall()
        decoded = [json.loads(row[4]) for row in got]
        assert len(decoded) == TRACES_PER_RUN
    read = time.perf_counter() - started
    db.close()
    return write, read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    runs = [(str(ULID()), conversation(i)) for i in range(args.runs)]
    traces = args.runs * TRACES_PER_RUN
    with tempfile.TemporaryDirectory() as tmp:
        raw_w, raw_r = bench_raw(Path(tmp) / "raw.db", runs)
        seg_w, seg_r = bench_segue(Path(tmp) / "segue.db", runs)
    print(f"{args.runs} runs x {TRACES_PER_RUN} traces on SQLite (WAL)")
    print(f"{'':8}{'raw sqlite3':>16}{'segue':>16}{'ratio':>10}")
    print(f"{'write':8}{traces / raw_w:>12,.0f} t/s{traces / seg_w:>12,.0f} t/s{seg_w / raw_w:>9.2f}x")
    print(f"{'read':8}{traces / raw_r:>12,.0f} t/s{traces / seg_r:>12,.0f} t/s{seg_r / raw_r:>9.2f}x")
    print("target: segue within 3x of raw sqlite3")


if __name__ == "__main__":
    main()
