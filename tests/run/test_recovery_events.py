"""Issue 36: a recovered run's event stream continues its sequence. The run is streamed in a child process that is
SIGKILLed at each point (tests/_support/durable_agent.py logs every event it received as it arrives); another process
recovers it as a stream. A consumer of both sees one run: seq 1, 2, 3, ... with no gap and no repeat, the
recovered RUN_STARTED naming the seq it continues after (segue.run.events)."""

from __future__ import annotations

from pathlib import Path

import pytest

from segue import Agent, RunStore
from segue.testing import ScriptedProvider, call, text
from segue.tools import tool
from segue_twin.server import TwinServer
from tests._support.durable_agent import POINTS, build, event_entry
from tests._support.recovery import kill_at, lines, store_url, twin

__all__ = ["twin"]  # fixture


@pytest.mark.parametrize(
    ("kind", "point"), [*(("sqlite", p) for p in POINTS), ("postgres", "tool"), ("postgres", "tool_safe")]
)
async def test_a_recovered_run_continues_the_dead_ones_event_sequence(
    kind: str, point: str, tmp_path: Path, twin: TwinServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEGUE_TEST_EVENTS", "1")
    url = store_url(kind, tmp_path)
    kill_at(point, url, tmp_path, twin.url)
    received = lines(tmp_path, "events.jsonl")
    assert received and received[0]["type"] == "RUN_STARTED", point
    agent = build(url, tmp_path, twin.url)
    (run_id,) = [r.run_id for r in agent.store.list_runs(status="running")]
    recovered = [event_entry(e) async for e in agent.recover_stream(run_id)]
    agent.store.close()

    started, *rest = recovered
    assert started["type"] == "RUN_STARTED" and started["after"] == received[-1]["seq"], (point, received, started)
    assert rest and rest[-1]["type"] == "RUN_COMPLETED", point
    seqs = [e["seq"] for e in received + recovered]
    assert seqs == list(range(1, len(seqs) + 1)), (point, received, recovered)
    # What the dead process never got to announce is announced by the recovered one (no event lost).
    calls = [e for e in received + recovered if e["type"] == "TOOL_CALL"]
    results = [e for e in received + recovered if e["type"] == "TOOL_RESULT"]
    assert len(results) == 2 and len(calls) >= 2, (point, received, recovered)


async def test_a_resumed_run_continues_the_paused_ones_event_sequence(tmp_path: Path) -> None:
    """Paused for approval and resumed (a new stream): the resumed stream's events number on from the pause's."""

    @tool(requires_approval=True)
    def refund(cents: int) -> str:
        """Refund the customer."""
        return f"refunded {cents}"

    store = RunStore(f"sqlite:///{tmp_path}/runs.db")
    agent = Agent(ScriptedProvider.of(call("refund", {"cents": 5}), text("Refunded.")), "You help.", [refund], store)
    paused = [e async for e in agent.stream("refund me")]
    assert [e.type for e in paused][-1] == "RUN_PAUSED"
    resumed = [e async for e in agent.resume_stream(paused[-1].run_id, approved=True)]
    assert [e.type for e in resumed][-1] == "RUN_COMPLETED"
    seqs = [e.seq for e in paused + resumed]
    assert seqs == list(range(1, len(seqs) + 1)), [(e.seq, e.type) for e in paused + resumed]
    store.close()
