"""Issue 36: a round in which a tool returned an image, its process SIGKILLed once that tool's result was journaled
(the round's other call still running), recovered by another process: the next request carries the image as the
uninterrupted run's did, byte for byte (the vendor's cache and the thinking bound to that prefix stay valid).

Images follow a round's results in its tool message (segue.run.tool_calls), which is stored with the round's last
result; a call that finished before it journals its images beside its result (segue.store.tool_calls)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from segue_twin.server import TwinServer
from tests._support.durable_agent import METADATA, Shelf, build, run_then_resume, served, twin_server
from tests._support.recovery import kill_at, store_url, tools

pytestmark = pytest.mark.slow  # each kill starts a process


@pytest.fixture
def shelf_twin() -> Iterator[TwinServer]:
    with twin_server(Shelf()) as server:
        yield server


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The Shelf conversation without a kill: the requests the twin served and the run's traces."""
    folder = tmp_path_factory.mktemp("shown")
    with twin_server(Shelf()) as server:
        agent = build(f"sqlite:///{folder}/segue.db", folder, server.url, images=True)
        result = asyncio.run(agent.run("settle order 7", metadata=METADATA))
        detail = agent.store.get_run(result.run_id)
        assert detail is not None and result.status == "success"
        return {"served": served(server), "result": result, "detail": detail}


def _images(body: dict[str, Any]) -> list[Any]:
    return [b for m in body["messages"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "image"]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_recovered_round_sends_the_image_a_finished_tool_returned(
    kind: str, tmp_path: Path, shelf_twin: TwinServer, shown: dict[str, Any]
) -> None:
    url = store_url(kind, tmp_path)
    kill_at("image", url, tmp_path, shelf_twin.url)
    # (the two run concurrently: logged in either order)
    assert sorted(tools(tmp_path)) == ["lookup", "snapshot"], "killed with the snapshot done and the lookup running"
    agent = build(url, tmp_path, shelf_twin.url, images=True)
    (run_id,) = [r.run_id for r in agent.store.list_runs(status="running")]
    result = await agent.recover(run_id)

    sent, base = served(shelf_twin), shown["served"]
    assert len(base) == 2 and len(_images(base[1])) == 1, "the uninterrupted run's second request shows the image"
    assert sent == base  # the first request once, the next one byte-identical: the image where it was
    assert sorted(tools(tmp_path)) == ["lookup", "lookup", "snapshot"], "the snapshot once; the retry_safe lookup again"
    assert (result.status, result.answer) == ("success", shown["result"].answer)
    detail = agent.store.get_run(run_id)
    assert detail is not None
    assert [t.message for t in detail.traces] == [t.message for t in shown["detail"].traces]
    agent.store.close()


async def test_an_approved_call_asked_again_resumes_beside_the_image_the_journal_holds(tmp_path: Path) -> None:
    """A charge that requires approval, approved and running beside a snapshot, its process SIGKILLed once the
    snapshot's result is journaled: recovery asks for the charge's approval again (segue.run.loop), and the resume
    runs it beside the snapshot's journaled result and image. The request after the round is the uninterrupted
    run's, byte for byte (SQLite; the journal's images are read the same way as by recovery, on both stores)."""
    folder = tmp_path / "shown"
    folder.mkdir()
    with twin_server(Shelf(charging=True)) as server:
        plain = build(f"sqlite:///{folder}/segue.db", folder, server.url, images=True, approval=True)
        expected = await run_then_resume(plain)
        base = served(server)
    assert expected.status == "success" and len(base) == 2 and len(_images(base[1])) == 1

    with twin_server(Shelf(charging=True)) as server:
        url = store_url("sqlite", tmp_path)
        kill_at("approval_image", url, tmp_path, server.url)
        assert sorted(tools(tmp_path)) == ["charge", "snapshot"]  # (run concurrently: logged in either order)
        agent = build(url, tmp_path, server.url, images=True, approval=True)
        (run_id,) = [r.run_id for r in agent.store.list_runs(status="running")]
        asked = await agent.recover(run_id)
        assert asked.status == "waiting_approval" and [p.name for p in asked.pending_approvals or []] == ["charge"]
        done = await agent.resume(run_id, approved=True)
        sent = served(server)
    assert (done.status, done.answer) == ("success", expected.answer)
    assert sent == base  # the image the snapshot returned before the kill is where it was
    assert sorted(tools(tmp_path)) == ["charge", "charge", "snapshot"], "the snapshot once; the charge approved twice"
    agent.store.close()
