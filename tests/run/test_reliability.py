"""Faults and bad input: nothing half-written, abandoned runs recoverable, clear errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from segue import Agent, InputError, ReplayRunError, RunStore
from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock
from segue.testing import ScriptedProvider, call, text
from tests._support.helpers import lookup, policy_provider

REPO = Path(__file__).resolve().parents[2]


async def test_ten_megabyte_message_is_refused_before_any_row(sqlite_store: RunStore) -> None:
    agent = Agent(ScriptedProvider.of(text("never")), "p", [], sqlite_store)
    with pytest.raises(InputError, match=r"10,000,000 characters, over the limit of 1,000,000"):
        await agent.run("x" * 10_000_000)
    assert sqlite_store.counts()["agent_runs"] == 0


@pytest.mark.parametrize("bad", ["not-a-ulid", "01J0000000000000000000000", "01J0000000000000000000000U!"])
async def test_run_ids_must_be_ulids(sqlite_store: RunStore, bad: str) -> None:
    agent = Agent(policy_provider(), "p", [lookup], sqlite_store)
    with pytest.raises(ReplayRunError, match="ULID") as info:
        await agent.run("x", runs=[bad])
    assert info.value.reason == "invalid"
    with pytest.raises(InputError, match="ULID"):
        await agent.retry(bad)
    with pytest.raises(InputError, match="ULID"):
        await agent.resume(bad)
    assert sqlite_store.counts()["agent_runs"] == 0


async def test_replayed_run_whose_traces_were_deleted(sqlite_store: RunStore) -> None:
    agent = Agent(policy_provider(), "p", [lookup], sqlite_store)
    first = await agent.run("a")
    sqlite_store.db.execute_sql("DELETE FROM react_traces WHERE run_id = ?", (first.run_id,))
    before = sqlite_store.counts()
    with pytest.raises(ReplayRunError, match="no stored traces") as info:
        await agent.run("b", runs=[first.run_id])
    assert info.value.run_id == first.run_id and sqlite_store.counts() == before


def test_reasoning_with_an_empty_signature_is_rejected() -> None:
    with pytest.raises(ValueError, match="signature"):
        ReasoningBlock(vendor="anthropic", format="anthropic.thinking", text="t", signature="")


async def test_provider_returning_an_unstorable_block_ends_the_run_in_error(sqlite_store: RunStore) -> None:
    def bad_reply(request: object) -> Message:
        block = ReasoningBlock(vendor="x", format="x.y", text="t", signature="")  # raises: rejected before storage
        return Message(role="assistant", content=[block])

    agent = Agent(ScriptedProvider.of(bad_reply), "p", [], sqlite_store)
    result = await agent.run("go")
    assert result.status == "error" and "signature" in (result.error or "")
    detail = sqlite_store.get_run(result.run_id)
    assert detail is not None and detail.status == "error" and [t.message.role for t in detail.traces] == ["user"]


KILLED_RUN = textwrap.dedent(
    """
    import asyncio, sys
    from segue import Agent, RunStore
    from segue.generated import Message, ToolCallBlock
    from segue.testing import ScriptedProvider

    def lookup(q: str) -> str:
        return "facts about " + q

    async def hang(request):
        await asyncio.sleep(3600)

    class Hanging(ScriptedProvider):
        async def complete(self, request):
            if len(self.requests) >= 1:
                await asyncio.sleep(3600)
            return await super().complete(request)

    provider = Hanging(replies=[Message(role="assistant", content=[ToolCallBlock(id="c1", name="lookup",
                                                                                 arguments={"q": "x"})])])
    agent = Agent(provider, "p", [lookup], RunStore(sys.argv[1]), lease_seconds=30)
    asyncio.run(agent.run("dig"))
    """
)


async def test_killed_process_leaves_a_recoverable_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/segue.db"
    RunStore(url).close()
    proc = subprocess.Popen([sys.executable, "-c", KILLED_RUN, url], cwd=REPO)
    store = RunStore(url)
    try:
        deadline = time.time() + 30
        # The tool's row is written twice: its start (before `lookup`, not retry_safe, runs) and its result with the
        # round's tool message (the third trace); wait for the second.
        while time.time() < deadline and store.counts()["react_traces"] < 3:
            time.sleep(0.05)
        # The response was recorded before its tool ran, and the tool's result (with the round's tool message).
        assert store.counts()["llm_interactions"] == 1 and store.counts()["tool_calls"] == 1
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    (run,) = store.list_runs()
    assert run.status == "running"
    assert store.sweep() == [], "the lease has not lapsed yet"
    assert store.sweep(now=time.time() + 31) == [run.run_id]
    detail = store.get_run(run.run_id)
    assert detail is not None and detail.status == "error" and "lease expired" in (detail.error or "")
    assert [t.message.role for t in detail.traces] == ["user", "assistant", "tool"]

    provider = ScriptedProvider.of(text("picked up"))
    await Agent(provider, "p", [lookup], store).run("continue", runs=[run.run_id], replay_last="all")
    sent = provider.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert isinstance(sent[1].content[0], ToolCallBlock)
    note = sent[3].content[0]
    assert isinstance(note, TextBlock) and "ended without an answer: error" in note.text


async def test_cancelled_task_marks_the_run_cancelled(sqlite_store: RunStore) -> None:
    import asyncio

    started = asyncio.Event()

    class Slow(ScriptedProvider):
        async def complete(self, request: object) -> object:  # type: ignore[override]
            started.set()
            await asyncio.sleep(3600)
            raise AssertionError("unreachable")

    agent = Agent(Slow(replies=[]), "p", [], sqlite_store)
    task = asyncio.create_task(agent.run("wait"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (run,) = sqlite_store.list_runs()
    assert run.status == "cancelled"


async def test_tool_calls_of_one_turn_run_concurrently(sqlite_store: RunStore) -> None:
    import asyncio

    from segue import tool

    running = 0
    peak = 0

    @tool
    async def slow(n: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        return n

    reply = Message(
        role="assistant", content=[ToolCallBlock(id=f"c{i}", name="slow", arguments={"n": i}) for i in range(3)]
    )
    result = await Agent(ScriptedProvider.of(reply, text("ok")), "p", [slow], sqlite_store).run("go")
    assert result.status == "success" and peak == 3
    assert [c.result for c in sqlite_store.get_run(result.run_id).tool_calls] == ["0", "1", "2"]  # type: ignore[union-attr]


async def test_stream_error_event_carries_the_error_type(sqlite_store: RunStore) -> None:
    from segue.errors import ProviderError

    provider = ScriptedProvider.of(
        call("lookup", {"q": "a"}), ProviderError("rate limited", vendor="v", kind="rate_limit", status_code=429)
    )
    events = [e async for e in Agent(provider, "p", [lookup], sqlite_store).stream("go")]
    assert events[-1].type == "RUN_ERROR" and events[-1].meta["error_type"] == "ProviderError"
    assert "rate_limit error from v: rate limited" == events[-1].error


async def test_store_calls_never_run_on_the_event_loop_thread(tmp_path: Path) -> None:
    """The store is synchronous (Peewee); the agent must call it from worker threads so runs never block."""
    import threading

    loop_thread = threading.get_ident()
    seen: list[tuple[str, int]] = []

    class Watched(RunStore):
        pass

    store = Watched(f"sqlite:///{tmp_path}/w.db")
    for name in ("create_run", "record_iteration", "finish_run", "load_runs", "find_idempotent", "get_run"):
        original = getattr(store, name)

        def wrapper(*args: object, __name: str = name, __original: object = original, **kwargs: object) -> object:
            seen.append((__name, threading.get_ident()))
            return __original(*args, **kwargs)  # type: ignore[operator]

        setattr(store, name, wrapper)
    agent = Agent(policy_provider(), "p", [lookup], store)
    first = await agent.run("a", idempotency_key="k1")
    await agent.run("b", runs=[first.run_id], replay_last="all")
    names = {n for n, _ in seen}
    assert {"create_run", "record_iteration", "finish_run", "load_runs", "find_idempotent"} <= names
    assert all(thread != loop_thread for _, thread in seen), seen


async def test_an_exception_in_app_code_ends_the_run_in_error_and_surfaces(sqlite_store: RunStore) -> None:
    """A bug in code segue calls outside the provider call (here the app's trailing_state) is not segue's to
    swallow: it reaches the caller unchanged, and the stored run is terminal with the exception named, so it
    never stays `running` for a sweep to find."""

    def broken_state(state: object) -> str:
        raise KeyError("orders_open")

    agent = Agent(ScriptedProvider.of(text("never sent")), "p", [], sqlite_store, trailing_state=broken_state)
    with pytest.raises(KeyError, match="orders_open"):
        await agent.run("go")
    events = []
    with pytest.raises(KeyError, match="orders_open"):
        async for event in agent.stream("go again"):
            events.append(event)
    assert [e.type for e in events] == ["RUN_STARTED"]
    runs = sqlite_store.list_runs()
    assert len(runs) == 2 and {r.status for r in runs} == {"error"}
    for summary in runs:
        detail = sqlite_store.get_run(summary.run_id)
        assert detail is not None and detail.error == "KeyError: 'orders_open'"
    assert sqlite_store.counts()["llm_interactions"] == 0, "nothing was sent"
