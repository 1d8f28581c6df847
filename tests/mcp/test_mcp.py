"""segue.mcp against real MCP servers written with the official SDK (tests/_support/mcp_servers/fixture_server.py), over
stdio (a subprocess) and Streamable HTTP (loopback): canonical tool definitions, results of every kind, failures
that become error results, change notifications, and no server process left behind."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from segue._core.hashing import canonical_json
from segue.generated import get_converter
from segue.mcp import MCPTools, MCPToolsError, canonical_schema
from segue.tools import Tool
from tests._support.mcp_helpers import SERVER, http_server, records, running, stdio, wait_gone


def blocks(tools: list[Tool]) -> str:
    """The tool definitions exactly as segue hands them to a driver, as one string."""
    conv = get_converter()
    return "\n".join(canonical_json(conv.unstructure(t.definition)) for t in tools)


def named(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


def test_canonical_schema_sorts_keys_and_sets_but_not_data() -> None:
    schema = {
        "type": "object",
        "required": ["b", "a"],
        "properties": {
            "b": {"type": ["string", "null"], "default": {"z": 1, "a": [3, 1]}},
            "a": {"enum": [2, "x", None], "examples": [["q", "p"]], "anyOf": [{"type": "integer", "minimum": 1}]},
            "required": {"type": "string"},  # a property named like a keyword is a property
        },
    }
    out = canonical_schema(schema)
    assert list(out) == ["properties", "required", "type"] and out["required"] == ["a", "b"]
    assert list(out["properties"]) == ["a", "b", "required"]
    assert out["properties"]["b"] == {"default": {"a": [3, 1], "z": 1}, "type": ["null", "string"]}
    assert out["properties"]["a"]["enum"] == ["x", 2, None]  # sorted by canonical JSON: '"x"' < '2' < 'null'
    assert out["properties"]["a"]["examples"] == [["q", "p"]]  # data keeps its order
    assert out["properties"]["a"]["anyOf"] == [{"minimum": 1, "type": "integer"}]
    assert out["properties"]["required"] == {"type": "string"}


async def test_one_session_results_failures_cancellation_list_changes_and_a_crash(tmp_path: Path) -> None:
    """One server (starting one costs a second of imports), in the order a session may meet them: results of every
    kind, failures that become error results, a cancelled call, a list change, then the server dying."""
    source = stdio(tmp_path, timeout=1.0)
    try:
        tools = named(await source.tools())
        added = await tools["add"].invoke("c1", {"a": 2, "b": 3})
        assert added.result.content == "5" and added.result.is_error is None

        # structured content with its serialized text: the model sees the data once
        weather = await tools["get_weather"].invoke("c2", {"city": "Lisbon", "days": 2})
        assert weather.result.is_error is None
        assert json.loads(weather.result.content) == {"city": "Lisbon", "days": 2, "unit": "celsius", "high": 21}

        # isError from the server
        failed = await tools["fail"].invoke("c3", {})
        assert failed.result.is_error is True and "Error executing tool fail" in failed.result.content

        # an image: a block the model sees after the results, named in the text
        picture = await tools["picture"].invoke("c4", {})
        assert picture.result.content == "[image 1: image/png, shown after the tool results]"
        (image,) = picture.images
        assert image.source.type == "base64" and image.source.media_type == "image/png"
        assert base64.b64decode(image.source.data).startswith(b"\x89PNG")

        # a malformed result (the server's middleware sends content without text and a non-boolean isError)
        broken = await tools["broken"].invoke("c5", {})
        assert broken.result.is_error is True
        assert broken.result.content.startswith("MCP server fixture answered broken with a malformed result: ")

        # a call that hangs is abandoned after the tool's timeout; the session goes on
        started = time.monotonic()
        hung = await tools["hang"].invoke("c6", {})
        assert hung.result.is_error is True
        assert hung.result.content == "tool hang did not finish within 1 s and was abandoned"
        assert time.monotonic() - started < 5
        assert (await tools["add"].invoke("c7", {"a": 1, "b": 1})).result.content == "2"

        # a call cancelled by the app (its run was cancelled) leaves the session usable
        call = asyncio.ensure_future(tools["hang"].invoke("c8", {}))
        await asyncio.sleep(0.2)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert (await tools["add"].invoke("c9", {"a": 2, "b": 2})).result.content == "4"

        # arguments are checked against the canonical schema before the server sees them
        invalid = await tools["add"].invoke("c10", {"a": "two", "b": 1})
        assert invalid.result.is_error is True and invalid.result.content.startswith("invalid arguments for add: a:")

        # notifications/tools/list_changed marks the list for the next run only
        assert "extra_tool" not in tools
        assert (await tools["enable_extra"].invoke("c11", {})).result.content == "extra_tool added"
        for _ in range(100):  # the notification arrives on the subscriptions/listen stream
            if source._stale:
                break
            await asyncio.sleep(0.02)
        assert source._stale, "notifications/tools/list_changed did not mark the list"
        run_two = named(await source.tools())
        assert "extra_tool" in run_two
        assert (await run_two["extra_tool"].invoke("c12", {"note": "hi"})).result.content == "extra: hi"
        # no change since: the next run reuses the list without asking the server
        assert named(await source.tools()) == run_two and not source._stale

        # the server dies mid-call: an error result, then "not running" until the next run starts it again
        crashed = await run_two["crash"].invoke("c13", {})
        assert crashed.result.is_error is True
        assert crashed.result.content.startswith("MCP server fixture stopped while crash was running")
        after = await run_two["add"].invoke("c14", {"a": 1, "b": 2})
        assert after.result.is_error is True and after.result.content.startswith("MCP server fixture is not running")
        first = records(tmp_path)[0]["pid"]
        assert wait_gone(first)
        restarted = named(await source.tools())  # the next run: a new process
        assert (await restarted["add"].invoke("c15", {"a": 1, "b": 2})).result.content == "3"
        pids = [r["pid"] for r in records(tmp_path)]
        assert len(pids) == 2 and running(pids[1])
    finally:
        await source.aclose()
    assert wait_gone(pids[1])


async def test_streamable_http_on_loopback(tmp_path: Path) -> None:
    with http_server(tmp_path, "--scramble") as (url, process):
        source = MCPTools.http(url, headers={"X-Test": "1"}, timeout=1.0)
        try:
            tools = await source.tools()
            assert source.name == url
            names = [t.name for t in tools]
            assert names == sorted(names)  # canonical order, whatever the server listed
            assert (await named(tools)["lookup_order"].invoke("c1", {"order_number": 7})).result.content == (
                "order 7: shipped on 2026-11-02"
            )
            hung = await named(tools)["hang"].invoke("c2", {})
            assert hung.result.is_error is True and "did not finish within 1 s" in hung.result.content
            process.kill()  # the server dies mid-run
            process.wait()
            lost = await named(tools)["add"].invoke("c3", {"a": 1, "b": 2})
            assert lost.result.is_error is True and lost.result.content.startswith("MCP server http://127.0.0.1:")
        finally:
            await source.aclose()


def test_a_command_that_does_not_exist_is_refused_when_declared() -> None:
    with pytest.raises(MCPToolsError) as caught:
        MCPTools.stdio("segue-no-such-mcp-server", ["--x"], name="files")
    assert caught.value.server == "files"
    assert str(caught.value).startswith("MCP server files: command 'segue-no-such-mcp-server' was not found")


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"prefix": ""}, "prefix must be a short string"),
        ({"requires_approval": "add"}, "requires_approval must be True, False or a list of tool names"),
        ({"timeout": 0}, "timeout must be a number of seconds > 0"),
        ({"connect_timeout": -1}, "connect_timeout must be a number of seconds > 0"),
    ],
)
def test_bad_options_are_refused_naming_the_server(tmp_path: Path, kw: dict[str, Any], expected: str) -> None:
    with pytest.raises(MCPToolsError, match=f"^MCP server fixture: {expected}"):
        stdio(tmp_path, **kw)


def test_http_urls_are_checked_and_credentials_kept_out_of_the_name() -> None:
    with pytest.raises(MCPToolsError, match="url must be an http:// or https:// URL, got 'ftp://x'"):
        MCPTools.http("ftp://x")
    assert MCPTools.http("https://user:secret@example.com/mcp?token=abc").name == "https://example.com/mcp"


async def test_a_source_started_in_one_event_loop_restarts_in_the_next(tmp_path: Path) -> None:
    """asyncio.run() cancels the session's task at its end, which stops the server; the next loop starts anew."""
    source = stdio(tmp_path)

    async def one_run() -> str:
        tools = named(await source.tools())
        return (await tools["add"].invoke("c", {"a": 1, "b": 2})).result.content

    assert await asyncio.to_thread(asyncio.run, one_run()) == "3"
    first = records(tmp_path)[0]["pid"]
    assert wait_gone(first)  # no aclose(): the loop's end stopped it
    assert await asyncio.to_thread(asyncio.run, one_run()) == "3"
    assert len(records(tmp_path)) == 2
    assert wait_gone(records(tmp_path)[1]["pid"])


def test_keyboard_interrupt_stops_the_server(tmp_path: Path) -> None:
    """Ctrl-C in an app waiting on an MCP tool: asyncio.run cancels the session's task, which stops the server
    (started in a session of its own, so the terminal's SIGINT never reached it)."""
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, sys
            sys.path[:0] = [{str(SERVER.parents[3])!r}]  # the repository, for the package tests._support
            from tests._support.mcp_helpers import stdio
            from pathlib import Path

            async def main():
                tools = {{t.name: t for t in await stdio(Path({str(tmp_path)!r}), timeout=None).tools()}}
                print("calling", flush=True)
                await tools["hang"].invoke("c", {{}})

            asyncio.run(main())
            """
        )
    )
    app = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(SERVER.parent.parent)
    )
    try:
        assert app.stdout is not None and app.stdout.readline() == b"calling\n"
        (server,) = records(tmp_path)
        assert running(server["pid"])
        time.sleep(0.3)
        app.send_signal(signal.SIGINT)
        _, err = app.communicate(timeout=30)
    finally:
        if app.poll() is None:
            app.kill()
    assert b"KeyboardInterrupt" in err
    assert wait_gone(server["pid"]), f"server {server['pid']} outlived the app"
