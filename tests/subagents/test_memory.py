"""Issue 41, item 2: the sub-agent remembers. Within one conversation of its caller, a sub-agent's later runs replay
its earlier ones (found from the caller's runs: the app keeps only the caller's run ids), so it does not explore
again what it learned; another conversation starts it afresh; `remember=False` never replays."""

from __future__ import annotations

from segue import Agent, RunStore, tool
from segue.testing import ScriptedProvider, call, canonical_messages, text

explored: list[str] = []


@tool
def read_schema(table: str) -> str:
    """Read a table's schema (slow: the specialist should remember it)."""
    explored.append(table)
    return f"{table}(id int, total numeric)"


def agents(sqlite_store: RunStore, *, remember: bool = True) -> tuple[Agent, ScriptedProvider, ScriptedProvider]:
    child_provider = ScriptedProvider.of(
        call("read_schema", {"table": "orders"}), text("orders has id and total"),  # turn 1: explores
        text("sum(total) from orders"),  # turn 2: answers from what it replays
        text("count(id) from orders"),  # turn 3 (or a new conversation's first turn)
    )  # fmt: skip
    child = Agent(child_provider, "You know the database.", [read_schema], sqlite_store, name="db_expert")
    parent_provider = ScriptedProvider.of(
        call("db_expert", {"task": "what is in orders?"}, id="p1"), text("orders: id, total"),
        call("db_expert", {"task": "revenue query?"}, id="p2"), text("sum(total)"),
        call("db_expert", {"task": "count query?"}, id="p3"), text("count(id)"),
    )  # fmt: skip
    parent = Agent(parent_provider, "Coordinate.", [child.as_tool(remember=remember)], sqlite_store, name="lead")
    return parent, parent_provider, child_provider


async def test_a_sub_agents_later_runs_replay_its_earlier_ones_in_the_conversation(sqlite_store: RunStore) -> None:
    parent, _, child_provider = agents(sqlite_store)
    explored.clear()
    runs: list[str] = []
    children = []
    for question in ("what is in orders?", "revenue?", "count?"):
        result = await parent.run(question, runs=runs or None)
        assert result.status == "success"
        runs.append(result.run_id)
        children.extend(c.run_id for c in result.children or [])
    assert explored == ["orders"]  # explored on turn 1 only
    first, second, third = children
    # The second sub-run replays the first: its request carries the first sub-run's exploration, then its task.
    second_request = canonical_messages(child_provider.requests[2])
    assert [m["role"] for m in second_request] == ["user", "assistant", "tool", "assistant", "user"]
    assert second_request[0]["content"][0]["text"] == "what is in orders?"
    assert second_request[-1]["content"][0]["text"] == "revenue query?"
    third_request = canonical_messages(child_provider.requests[3])
    assert len(third_request) == 7 and third_request[-1]["content"][0]["text"] == "count query?"
    # The store says so: each later sub-run continued from the one before, found from the parent's run ids only.
    for earlier, later in ((first, second), (second, third)):
        detail = sqlite_store.get_run(later)
        assert detail is not None and detail.continued_from == earlier
        assert detail.replay is not None and earlier in detail.replay.runs_full


async def test_another_conversation_starts_the_sub_agent_afresh(sqlite_store: RunStore) -> None:
    parent, _, child_provider = agents(sqlite_store)
    await parent.run("what is in orders?")
    await parent.run("count?")  # a new conversation: no runs= for the parent
    fresh = canonical_messages(child_provider.requests[2])
    assert [m["role"] for m in fresh] == ["user"]


async def test_remember_false_never_replays(sqlite_store: RunStore) -> None:
    parent, _, child_provider = agents(sqlite_store, remember=False)
    first = await parent.run("what is in orders?")
    await parent.run("revenue?", runs=[first.run_id])
    assert [m["role"] for m in canonical_messages(child_provider.requests[2])] == ["user"]
