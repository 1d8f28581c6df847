"""segue.mcp against answers and processes an SDK server does not produce (tests/_support/mcp_servers/raw_server.py, a
hand-written stdio server): the server's own children, a JSON-RPC error reply, a line the client library cannot
parse, and an image larger than the result limit."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import pytest

from segue import Agent
from segue.generated import ToolResultBlock
from segue.tools import Tool
from segue_twin import Twin
from tests._support.mcp_agent import Recording, anthropic, store_at
from tests._support.mcp_helpers import raw_stdio, records, running, wait_gone


def named(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


async def test_the_servers_own_children_stop_with_it_on_aclose_and_at_the_loops_end(tmp_path: Path) -> None:
    """docs/mcp.md: stopping the server ends its process group. The server exits on its own when its stdin closes;
    its child (here `sleep 3600`, as a worker or a shell command would be) must not be left to PID 1."""
    source = raw_stdio(tmp_path, "--child")
    try:
        assert (await named(await source.tools())["count"].invoke("c1", {})).result.content == "1"
        (server,) = records(tmp_path)
        assert running(server["pid"]) and running(server["child"])
    finally:
        await source.aclose()
    assert wait_gone(server["pid"])
    assert wait_gone(server["child"]), f"the server's child {server['child']} outlived aclose()"

    async def one_run() -> str:  # no aclose(): asyncio.run() ending stops the server
        return (await named(await source.tools())["count"].invoke("c2", {})).result.content

    assert await asyncio.to_thread(asyncio.run, one_run()) == "1"
    later = next(r for r in records(tmp_path) if r["pid"] != server["pid"])
    assert wait_gone(later["pid"])
    assert wait_gone(later["child"]), f"the server's child {later['child']} outlived the event loop"


async def test_a_json_rpc_error_reply_is_one_error_result_and_the_same_server_goes_on(tmp_path: Path) -> None:
    """-32000 is the first of JSON-RPC's server-error codes (and the SDK's own code for a closed connection): a
    server's error reply is that call's error result; the session, and the process with its state, stay."""
    source = raw_stdio(tmp_path, timeout=10)
    try:
        tools = named(await source.tools())
        assert (await tools["count"].invoke("c1", {})).result.content == "1"
        failed = await tools["rpc_error"].invoke("c2", {})
        assert failed.result.is_error is True
        assert failed.result.content == "MCP server raw answered rpc_error with error -32000: the warehouse is closed"
        assert (await tools["count"].invoke("c3", {})).result.content == "2", "the next call of the run failed"
        next_run = named(await source.tools())
        assert (await next_run["count"].invoke("c4", {})).result.content == "3", "the server's state was lost"
        assert len(records(tmp_path)) == 1, "the next run started another server process"
    finally:
        await source.aclose()


async def test_an_unparseable_answer_is_that_calls_error_at_once_without_tracebacks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A lone surrogate escape (\\ud800) is JSON Python reads and MCP's models refuse: the call it answers gets an
    error result at once (not after its timeout), and the log gets no traceback. A line that is no JSON-RPC message
    names no call: one log line, and the session goes on."""
    caplog.set_level(logging.DEBUG)
    source = raw_stdio(tmp_path, timeout=3)
    try:
        tools = named(await source.tools())
        started = time.monotonic()
        bad = await tools["unparseable"].invoke("c1", {})
        assert time.monotonic() - started < 2, "the unparseable answer was waited out as a timeout"
        assert bad.result.is_error is True
        assert bad.result.content.startswith(
            "MCP server raw answered unparseable with a message that cannot be parsed (Invalid JSON: "
        ), bad.result.content
        assert bad.result.content.endswith("; the server is still running")
        assert (await tools["count"].invoke("c2", {})).result.content == "1"

        garbage = await tools["garbage"].invoke("c3", {})
        assert garbage.result.content == "tool garbage did not finish within 3 s and was abandoned"
        assert (await tools["count"].invoke("c4", {})).result.content == "2"
    finally:
        await source.aclose()
    assert [r for r in caplog.records if r.exc_info] == [], "a traceback was logged"
    (skipped,) = [r for r in caplog.records if "no JSON-RPC message" in r.getMessage()]
    assert skipped.levelno == logging.WARNING and "'this is not JSON'" in skipped.getMessage()


async def test_an_image_over_the_result_limit_is_named_not_stored_or_replayed(tmp_path: Path) -> None:
    """An image counts against max_result_chars by its base64 length: one that does not fit is left out and named
    with its size and the limit, so the stored result and every later request that replays it stay bounded."""
    source = raw_stdio(tmp_path, "--image-chars", "400000", max_result_chars=10_000)
    try:
        tools = named(await source.tools())
        small = await tools["image"].invoke("c1", {"chars": 4000})
        assert small.result.content == "[image 1: image/png, shown after the tool results]" and len(small.images) == 1
        large = await tools["image"].invoke("c2", {})
        assert large.images == ()
        assert large.result.content == (
            "[image/png image of 400,000 characters (base64) left out: a result's text and images together are "
            "limited to max_result_chars=10,000]"
        )

        twin = Twin()
        wire = Recording(twin)
        with store_at(tmp_path, "runs") as store:
            agent = Agent(anthropic(wire, twin), "p", [source], store)
            first = await agent.run("Use image please.")
            assert first.status == "success", first
            detail = store.get_run(first.run_id)
            assert detail is not None
            (call,) = detail.tool_calls
            assert call.result == large.result.content
            stored = [t.message for t in detail.traces if t.message.role == "tool"]
            assert [type(b) for b in stored[0].content] == [ToolResultBlock], "the image was stored"
            second = await agent.run("Thanks.", runs=[first.run_id], replay_last="all")
            assert second.status == "success", second
        body = json.loads(wire.bodies[-1])
        assert all(b["type"] != "image" for m in body["messages"] for b in m["content"] if isinstance(b, dict))
        assert max(len(b) for b in wire.bodies) < 50_000, [len(b) for b in wire.bodies]
    finally:
        await source.aclose()


async def test_arguments_json_cannot_carry_are_that_calls_error_and_the_session_goes_on(tmp_path: Path) -> None:
    """A lone surrogate in a model's arguments cannot be encoded as UTF-8: that call is not sent and gets an error
    result; the session goes on (the writer task must not die with it)."""
    source = raw_stdio(tmp_path, timeout=5)
    try:
        tools = named(await source.tools())
        unsendable = await tools["count"].invoke("c1", {"note": "\ud800"})
        assert unsendable.result.is_error is True
        assert unsendable.result.content.startswith(
            "MCP server raw was not sent the call to count: its arguments cannot be encoded as JSON ("
        ), unsendable.result.content
        assert (await tools["count"].invoke("c2", {})).result.content == "1", "the server saw the first call"
        assert len(records(tmp_path)) == 1
    finally:
        await source.aclose()
