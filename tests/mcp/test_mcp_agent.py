"""Agents whose tools come from MCP servers written with the official SDK
(tests/_support/mcp_servers/fixture_server.py),
end to end on the twin: a replayed conversation whose server lists its tools in another order on every start,
a tool added between turns, failures that become error results, approval, images, errors before a run, and no
server process left behind."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from segue import Agent, InputError, RunStore, tool
from segue.generated import ImageBlock, RunResult, ToolResultBlock
from segue.mcp import MCPTools, MCPToolsError
from segue.providers import AnthropicProvider
from segue_twin import Twin
from tests._support.mcp_agent import Recording, anthropic, store_at
from tests._support.mcp_helpers import http_server, records, stdio, wait_gone

SYSTEM = "You answer questions about orders and the weather, precisely and briefly. " * 150  # above cache minimums
TURNS = [
    "Use lookup_order for order 1042.",
    "Use get_weather for 'Lisbon', 3 days.",
    "Use add for 2 and 3.",
]


async def converse(
    tmp: Path, transport: str, *, restart: bool, add_tool_before_turn_3: bool = False
) -> tuple[list[RunResult], Recording, RunStore, list[dict[str, Any]]]:
    """Three turns, each replaying the earlier ones in full. restart: a new server process (so another listing
    order and other schema key orders) and a new agent for every turn, as an app restarted between turns."""
    twin = Twin()
    wire = Recording(twin)
    record = tmp / f"{transport}-{'restart' if restart else 'one'}"
    record.mkdir()
    store = RunStore(f"sqlite:///{record}/segue.db")
    results: list[RunResult] = []
    async with servers(tmp, transport, record) as start:
        source = start()
        for i, question in enumerate(TURNS):
            if restart and i:
                await source.aclose()
                source = start()
            if add_tool_before_turn_3 and i == 2:
                admin = {t.name: t for t in await source.tools()}["enable_extra"]
                assert (await admin.invoke("admin", {})).result.content == "extra_tool added"
            agent = Agent(anthropic(wire, twin), SYSTEM, [source], store)
            result = await agent.run(question, runs=[r.run_id for r in results] or None, replay_last="all")
            assert result.status == "success", result
            results.append(result)
        await source.aclose()
    return results, wire, store, records(record)


@asynccontextmanager
async def servers(tmp: Path, transport: str, record: Path) -> AsyncIterator[Any]:
    """A function that starts the fixture server (scrambled listing) and returns its MCPTools."""
    if transport == "stdio":
        yield lambda: stdio(record, "--scramble")
        return
    started: list[Any] = []

    def start() -> MCPTools:
        if started:  # an app restart: the previous HTTP server process goes away, a new one comes up
            started.pop().__exit__(None, None, None)
        cm = http_server(tmp, "--scramble", "--record", str(record))
        url, _ = cm.__enter__()
        started.append(cm)
        return MCPTools.http(url, name="fixture")

    try:
        yield start
    finally:
        for cm in started:
            cm.__exit__(None, None, None)


def tools_of(body: bytes) -> list[Any]:
    tools: list[Any] = json.loads(body)["tools"]
    return tools


async def test_a_replayed_conversation_keeps_its_tool_blocks_byte_identical_across_restarts(tmp_path: Path) -> None:
    """The same three turns three times: over stdio with one server start, over stdio with a server (and agent)
    restarted every turn, and over Streamable HTTP. Every start lists the tools in another order and, scrambled,
    renders every schema's keys in another order: the requests stay byte for byte the same."""
    one, one_wire, one_store, one_started = await converse(tmp_path, "stdio", restart=False)
    again, again_wire, again_store, again_started = await converse(tmp_path, "stdio", restart=True)
    http, http_wire, http_store, http_started = await converse(tmp_path, "http", restart=False)
    try:
        # the restarted server listed its tools in a different order each time
        assert len(one_started) == 1 and len(again_started) == 3 and len(http_started) == 1
        orders = [tuple(r["order"]) for r in [*one_started, *again_started, *http_started]]
        assert len(set(orders)) >= 4, orders
        # every request is byte for byte the request of the conversation that never restarted
        assert len(one_wire.bodies) == 6  # a tool call and an answer per turn
        assert again_wire.bodies == one_wire.bodies
        assert http_wire.bodies == one_wire.bodies
        blocks = {json.dumps(tools_of(b)) for b in again_wire.bodies}
        assert len(blocks) == 1, "the tool blocks are the same on every request"
        names = [t["name"] for t in tools_of(again_wire.bodies[0])]
        assert names == sorted(names) and "lookup_order" in names
        # reasoning kept on every replay, no warning, and the cache read the same share as without restarts
        for results in (one, again, http):
            assert results[1].replay is not None and results[1].replay.reasoning_kept == [results[0].run_id]
            assert results[2].replay is not None
            assert results[2].replay.reasoning_kept == [results[0].run_id, results[1].run_id]
            assert results[2].replay.warnings == []
        for r_one, r_again, r_http in zip(one, again, http, strict=True):
            assert r_again.usage == r_one.usage == r_http.usage
        assert again[2].usage.cache_read_tokens and again[2].usage.cache_read_tokens > 0.8 * again[2].usage.input_tokens
        # the MCP results reached the model
        assert again[0].answer is not None and "order 1042: shipped on 2026-11-02" in again[0].answer
        assert again[2].answer == "add returned: 5"
    finally:
        for store in (one_store, again_store, http_store):
            store.close()
    for r in [*one_started, *again_started]:
        assert wait_gone(r["pid"]), f"server {r['pid']} was left behind"


async def test_a_tool_added_between_turns_two_and_three_gives_the_tools_warning(tmp_path: Path) -> None:
    results, wire, store, started = await converse(tmp_path, "stdio", restart=False, add_tool_before_turn_3=True)
    try:
        third = results[2].replay
        assert third is not None
        assert (third.warnings[0].run_id, third.warnings[0].cause) == (results[0].run_id, "tools")
        assert third.reasoning_kept == [] and third.reasoning_dropped == [results[0].run_id, results[1].run_id]
        before, after = tools_of(wire.bodies[3]), tools_of(wire.bodies[4])
        assert "extra_tool" not in [t["name"] for t in before] and "extra_tool" in [t["name"] for t in after]
    finally:
        store.close()
    assert wait_gone(started[0]["pid"])


async def test_failing_calls_are_error_results_and_runs_finish_and_images_follow_the_results(
    tmp_path: Path,
) -> None:
    """One agent, one server: a hanging tool, a malformed result and a crashing server each give the model an error
    result and the run finishes; the next run starts the server again; an image follows the tool results."""
    twin = Twin()
    wire = Recording(twin)
    source = stdio(tmp_path, prefix="shop", requires_approval=["add"], timeout=1.0)
    with store_at(tmp_path, "runs") as store:
        async with Agent(anthropic(wire, twin), "p", [source], store) as agent:
            for question, expected in [
                ("Use shop_hang please.", "tool shop_hang did not finish within 1 s and was abandoned"),
                ("Use shop_broken please.", "MCP server fixture answered broken with a malformed result: "),
                ("Use shop_crash please.", "MCP server fixture stopped while crash was running"),
            ]:
                result = await agent.run(question)
                assert result.status == "success" and result.iterations == 2, result
                detail = store.get_run(result.run_id)
                assert detail is not None
                (call,) = detail.tool_calls
                assert call.is_error and call.result.startswith(expected), call.result
                assert result.answer is not None and expected in result.answer  # the model saw the error

            # the crashed server starts again for the next run; an image comes after the tool results
            picture = await agent.run("Use shop_picture please.")
            assert picture.status == "success"
            detail = store.get_run(picture.run_id)
            assert detail is not None
            tool_turn = next(t.message for t in detail.traces if t.message.role == "tool")
            assert isinstance(tool_turn.content[0], ToolResultBlock) and isinstance(tool_turn.content[1], ImageBlock)
            sent = json.loads(wire.bodies[-1])["messages"][-1]["content"]
            assert [b["type"] for b in sent] == ["tool_result", "image"]
            assert sent[1]["source"]["media_type"] == "image/png"

            # approval applies to an MCP tool as to a Python one (here with the server's tools prefixed)
            paused = await agent.run("Use shop_add for 4 and 5.")
            assert paused.status == "waiting_approval"
            done = await agent.resume(paused.run_id, approved=True)
            assert done.status == "success" and done.answer == "shop_add returned: 9"
            denied = await agent.run("Use shop_add for 1 and 2.")
            refused = await agent.resume(denied.run_id, approved=False)
            assert refused.answer is not None and "did not approve" in refused.answer
    pids = [r["pid"] for r in records(tmp_path)]
    assert len(pids) == 2  # the first process crashed; the second stopped with the agent
    assert all(wait_gone(pid) for pid in pids)


async def test_a_server_that_cannot_start_fails_the_first_run_and_writes_nothing(tmp_path: Path) -> None:
    with store_at(tmp_path, "runs") as store:
        hanging = stdio(tmp_path, "--hang-handshake", connect_timeout=1.0)
        agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()), "p", [hanging], store)
        with pytest.raises(MCPToolsError, match=r"^MCP server fixture: did not finish the MCP handshake within 1 s"):
            await agent.run("Use add for 1 and 2.")

        invalid = Agent(
            AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()),
            "p",
            [stdio(tmp_path, "--bad-schema")],
            store,
        )
        async with invalid:
            with pytest.raises(MCPToolsError, match=r"^MCP server fixture: tool 'bad_tool' has an input schema") as bad:
                await invalid.run("Use add for 1 and 2.")
            assert "at properties/x/type: 'strng' is not valid under any of the given schemas" in str(bad.value)
            # on a stream, the same refusal is one RUN_ERROR event naming the source
            events = [e async for e in invalid.stream("Use add for 1 and 2.")]
            assert [e.type for e in events] == ["RUN_ERROR"]
            assert events[0].meta == {"error_type": "MCPToolsError", "source": "fixture"}
            assert events[0].error is not None and events[0].error.startswith("MCP server fixture: tool 'bad_tool'")
        assert store.list_runs() == []
    assert all(wait_gone(r["pid"]) for r in records(tmp_path))


def test_a_command_that_does_not_exist_fails_where_the_agent_is_built() -> None:
    with pytest.raises(MCPToolsError, match=r"^MCP server orders: command 'no-such-orders-server' was not found"):
        Agent(
            AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()),
            "p",
            [MCPTools.stdio("no-such-orders-server", name="orders")],
        )


async def test_a_tool_name_offered_twice_is_refused_before_the_run(tmp_path: Path) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers, the app's way."""
        return a + b

    source = stdio(tmp_path)
    with store_at(tmp_path, "runs") as store:
        async with Agent(
            AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()), "p", [add, source], store
        ) as agent:
            with pytest.raises(
                InputError, match=r"tool 'add' is offered by the agent's own tools and by MCPTools\('fixture'\)"
            ):
                await agent.run("Use add for 1 and 2.")
        assert store.list_runs() == []
    assert all(wait_gone(r["pid"]) for r in records(tmp_path))
