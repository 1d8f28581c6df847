"""Agent.run_sync: the same run for scripts and notebooks, refused inside a running event loop."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from segue import Agent
from tests._support.helpers import lookup, policy_provider


def test_run_sync_takes_runs_arguments_and_returns_its_result(sqlite_store: Any) -> None:
    agent = Agent(policy_provider(), "Be brief.", [lookup], sqlite_store)
    first = agent.run_sync("Which tables are there?", tenant_id="acme", metadata={"user": "u1"})
    assert first.status == "success" and first.answer == "answer 2"
    second = agent.run_sync("And the orders?", runs=[first.run_id], tenant_id="acme")
    assert second.status == "success" and second.replay is not None
    assert [s.run_id for s in sqlite_store.list_runs(tenant_id="acme")] == [second.run_id, first.run_id]
    assert inspect.signature(Agent.run_sync).parameters == inspect.signature(Agent.run).parameters


def test_run_sync_raises_bad_input_like_run(sqlite_store: Any) -> None:
    agent = Agent(policy_provider(), "", [lookup], sqlite_store)
    with pytest.raises(Exception, match="replay_last"):
        agent.run_sync("q", replay_last=-1)
    assert sqlite_store.list_runs() == []


async def test_run_sync_refuses_inside_a_running_event_loop(sqlite_store: Any) -> None:
    agent = Agent(policy_provider(), "", [lookup], sqlite_store)
    with pytest.raises(RuntimeError, match=r"run_sync\(\) cannot run inside a running event loop.*await agent\.run"):
        agent.run_sync("q")
    assert sqlite_store.list_runs() == []
    assert (await agent.run("q")).status == "success"
