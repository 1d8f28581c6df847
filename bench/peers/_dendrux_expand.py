"""Run INSIDE dendrux's own virtual environment (bench/replay.py starts it): time dendrux's replay expansion.

Reads the conversation shape bench/replay.py exported (runs with traces) from the JSON file named on the
command line, builds dendrux's own read models in memory and times `expand_replay` (its planner, without its
store: dendrux fetches each run with two queries, which this deliberately leaves out). Prints seconds per plan.
"""

import json
import sys
import timeit

from dendrux.runtime.replay import CurrentPrefix, LoadedRun, ReplayRequest, expand_replay
from dendrux.runtime.state import RunRecord, TraceRecord


def main() -> None:
    shape = json.load(open(sys.argv[1]))
    loaded = []
    for run in shape["runs"]:
        record = RunRecord(
            id=run["id"],
            agent_name="bench",
            status="success",
            answer=run["answer"],
            input_data={"input": run["input"]},
            meta={},
        )
        traces = [
            TraceRecord(
                id=f"{run['id']}-{t['index']}",
                role=t["role"],
                content=t["content"],
                order_index=t["index"],
                meta=t["meta"],
            )
            for t in run["traces"]
        ]
        loaded.append(LoadedRun(record=record, traces=traces))
    request = ReplayRequest(runs=tuple(r["id"] for r in shape["runs"]), replay_last="all", replay_reasoning=True)
    current = CurrentPrefix(provider="bench", model="bench-model", system_hash="s", tools_hash="t")
    plan = expand_replay(loaded, request, current=current)
    assert len(plan.messages) >= len(loaded) * 2, len(plan.messages)
    rounds = 20
    best = min(timeit.repeat(lambda: expand_replay(loaded, request, current=current), number=rounds, repeat=3))
    print(json.dumps({"seconds": best / rounds, "messages": len(plan.messages)}))


main()
