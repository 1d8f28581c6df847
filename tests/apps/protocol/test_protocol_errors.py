"""Bad input to `segue serve`: malformed frames, bad envelopes, unknown methods, params that fail the schema, bad
config files. Each gets the right JSON-RPC error (or a one-line exit 2), and the server keeps serving."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from segue.apps.cli.main import main
from segue.apps.protocol.framing import FrameError, FrameReader, encode_frame
from tests._support.protocol_harness import LIST_TABLES_CLIENT, frame, stdio_server, twin_agent, write_config

LIST = {"jsonrpc": "2.0", "id": 900, "method": "runs/list", "params": {}}


def test_malformed_frames_get_parse_errors_and_the_server_keeps_serving(tmp_path: Path) -> None:
    config = write_config(tmp_path / "agents.json", [twin_agent([])])
    with stdio_server(config) as client:

        def parse_error(raw: bytes, expect: str, request_id: Any = None) -> None:
            client.send_raw(raw)
            message = client.next_message()
            assert message["error"]["code"] == -32700, message
            assert expect in message["error"]["message"], message
            assert message["id"] == request_id

        def still_serving(request_id: int) -> None:
            client.send({**LIST, "id": request_id})
            assert client.next_message() == {"jsonrpc": "2.0", "id": request_id, "result": {"runs": []}}

        parse_error(b"Content-Type: application/json\r\n\r\n", "no Content-Length")
        parse_error(b"Content-Length: abc\r\n\r\n", "'abc' is not a whole number")
        parse_error(b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n", "conflicting Content-Length")
        parse_error(b"Content-Length: 5\r\n\r\nhello", "not JSON")
        parse_error(b"Content-Length: 2\r\n\r\n\xff\xfe", "not UTF-8")
        still_serving(1)

        # Too short: the body is cut (not JSON), and its tail sits in front of the next header.
        body = json.dumps({**LIST, "id": 2}).encode()
        client.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(body) - 10, body) + frame({**LIST, "id": 3}))
        first, second, third = client.next_message(), client.next_message(), client.next_message()
        assert first["error"]["code"] == -32700 and "not JSON" in first["error"]["message"]
        assert second["error"]["code"] == -32700 and "stray bytes" in second["error"]["message"]
        assert third == {"jsonrpc": "2.0", "id": 3, "result": {"runs": []}}

        # Too long: the body runs into the next frame; the request inside is refused by id, the next one answered.
        body = json.dumps({**LIST, "id": 4}).encode()
        client.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(body) + 25, body) + frame({**LIST, "id": 5}))
        refused = client.next_message()
        assert refused["id"] == 4 and refused["error"]["code"] == -32700
        assert "longer than the JSON body" in refused["error"]["message"]
        assert client.next_message() == {"jsonrpc": "2.0", "id": 5, "result": {"runs": []}}

        parse_error(b'Content-Length: 10\r\n\r\n{"id": 6}x', "data after its JSON value", request_id=6)
        still_serving(7)
        assert client.close() == 0, "".join(client.stderr)


BAD_REQUESTS: list[tuple[Any, Any, int, str]] = [
    (42, None, -32600, "must be a JSON object"),
    ([LIST], None, -32600, "batches are not supported"),
    ({"id": 10, "method": "runs/list"}, 10, -32600, '"jsonrpc" must be "2.0"'),
    ({"jsonrpc": "2.0", "id": None, "method": "runs/list"}, None, -32600, "id must be a string or an integer"),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "runs/list"}, None, -32600, "id must be a string or an integer"),
    ({"jsonrpc": "2.0", "id": True, "method": "runs/list"}, None, -32600, "id must be a string or an integer"),
    ({"jsonrpc": "2.0", "id": 11}, 11, -32600, 'needs a "method"'),
    ({"jsonrpc": "2.0", "id": 12, "method": 5}, 12, -32600, '"method" must be a string'),
    ({"jsonrpc": "2.0", "id": 13, "method": "runs/delete"}, 13, -32601, "no method 'runs/delete'"),
    ({"jsonrpc": "2.0", "id": 14, "method": "tool/call", "params": {}}, 14, -32601, "no method 'tool/call'"),
    ({"jsonrpc": "2.0", "id": 15, "method": "$/cancelRequest", "params": {"id": 1}}, 15, -32600, "is a notification"),
    ({"jsonrpc": "2.0", "id": 16, "method": "runs/list", "params": [1]}, 16, -32602, "params must be an object"),
    ({"jsonrpc": "2.0", "id": 17, "method": "runs/list", "params": {"limit": 0}}, 17, -32602, "/limit"),
]


def test_bad_requests_get_the_right_codes(tmp_path: Path) -> None:
    config = write_config(tmp_path / "agents.json", [twin_agent([LIST_TABLES_CLIENT])])
    with stdio_server(config) as client:
        for message, request_id, code, text in BAD_REQUESTS:
            client.send(message)
            answer = client.next_message()
            assert answer["id"] == request_id, (message, answer)
            assert answer["error"]["code"] == code, (message, answer)
            assert text in answer["error"]["message"], (message, answer)

        bad_params = client.call("run", {"agent": "analyst", "input": 5, "replay_last": -1, "stream": True})
        error = bad_params["error"]
        assert error["code"] == -32602
        pointers = [e["pointer"] for e in error["data"]["errors"]]
        assert pointers == ["", "/input", "/replay_last"], error  # "" = the unknown `stream` key
        assert "(and 2 more)" in error["message"]

        unknown_agent = client.call("run", {"agent": "nobody", "input": "hi"})
        assert unknown_agent["error"]["code"] == -32602
        assert unknown_agent["error"]["data"]["errors"][0]["pointer"] == "/agent"
        assert "configured: analyst" in unknown_agent["error"]["message"]

        run_id = "01J9Z3M6Q2W8X4Y7T5R1N0P3K6"
        twice = client.call("run", {"agent": "analyst", "input": "hi", "runs": [run_id, run_id]})
        assert twice["error"]["code"] == -32001
        assert twice["error"]["data"] == {"reason": "duplicate", "run_id": run_id}
        not_an_id = client.call("run", {"agent": "analyst", "input": "hi", "runs": ["nope"]})
        assert not_an_id["error"]["code"] == -32001 and not_an_id["error"]["data"] == {"reason": "invalid"}

        # Notifications never get an answer, not even unknown or malformed ones; the next request still does.
        client.send({"jsonrpc": "2.0", "method": "runs/forget", "params": {}})
        client.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": None}})
        client.send({"jsonrpc": "2.0", "id": "orphan", "result": {"content": "nobody asked"}})
        assert client.call("runs/list", {})["result"] == {"runs": []}
        assert client.close() == 0
    assert "runs/forget" in "".join(client.stderr)


@pytest.mark.parametrize(
    ("config", "pointer", "reason"),
    [
        ("{", "#/", "not JSON"),
        ({"agents": []}, "#/agents", "should be non-empty"),
        (
            {"agents": [{"name": "a", "provider": {"kind": "gemini", "model": "x"}}]},
            "#/agents/0/provider/kind",
            "'gemini' is not one of",
        ),
        (
            {
                "agents": [
                    {
                        "name": "a",
                        "provider": {"kind": "scripted", "model": "s"},
                        "tools": [{**LIST_TABLES_CLIENT, "url": "http://127.0.0.1:9/t"}],
                    }
                ]
            },
            "#/agents/0/tools/0",
            "exactly one of url, client: true or python; got url and client",
        ),
        (
            {
                "agents": [
                    {
                        "name": "a",
                        "provider": {"kind": "scripted", "model": "s"},
                        "tools": [{"name": "t", "client": True}],
                    }
                ]
            },
            "#/agents/0/tools/0",
            "needs `description`",
        ),
        (
            {
                "agents": [
                    {
                        "name": "a",
                        "provider": {"kind": "scripted", "model": "s"},
                        "tools": [{"name": "t", "python": "no_such_module_x:f"}],
                    }
                ]
            },
            "#/agents/0/tools/0/python",
            "cannot import 'no_such_module_x'",
        ),
        (
            {
                "agents": [
                    {
                        "name": "a",
                        "provider": {"kind": "scripted", "model": "s"},
                        "tools": [{"name": "t", "python": "segue.demo.shop_db:nothing"}],
                    }
                ]
            },
            "#/agents/0/tools/0/python",
            "has no 'nothing'",
        ),
        (
            {
                "agents": [
                    {
                        "name": "a",
                        "provider": {"kind": "scripted", "model": "s"},
                        "tools": [{**LIST_TABLES_CLIENT, "parameters": {"type": "objekt"}}],
                    }
                ]
            },
            "#/agents/0/tools/0/parameters",
            "not a valid JSON Schema",
        ),
        (
            {
                "agents": [
                    {"name": "a", "provider": {"kind": "scripted", "model": "s"}},
                    {"name": "a", "provider": {"kind": "scripted", "model": "s"}},
                ]
            },
            "#/agents/1/name",
            "already defined at /agents/0",
        ),
        (
            {"agents": [{"name": "a", "provider": {"kind": "openai_responses", "model": "gpt-5", "thinking": {}}}]},
            "#/agents/0/provider/thinking",
            "applies to provider kinds anthropic, twin-anthropic",
        ),
        (
            {"agents": [{"name": "a", "provider": {"kind": "twin-anthropic", "model": "m", "cache_mode": "explicit"}}]},
            "#/agents/0/provider/cache_mode",
            "applies to provider kinds openai_responses, twin-openai, openai_chat, openrouter",
        ),
        (
            {"agents": [{"name": "a", "provider": {"kind": "twin-openai", "model": "gpt-5.6-sol", "cache_ttl": "1h"}}]},
            "#/agents/0/provider",
            "cache_ttl '1h' is for Anthropic's cache_control; this provider takes '30m' or '12h'",
        ),
        (
            {
                "agents": [
                    {"name": "a", "provider": {"kind": "twin-openai", "model": "gpt-5.6-sol", "cache_ttl": "auto"}}
                ]
            },
            "#/agents/0/provider",
            "cache_ttl 'auto' is taken by the anthropic and twin-anthropic kinds; this one takes '30m' or '12h'",
        ),
        (
            {"agents": [{"name": "a", "provider": {"kind": "twin-anthropic", "model": "m", "cache_ttl": "12h"}}]},
            "#/agents/0/provider",
            "cache_ttl '12h' is for OpenAI breakpoint caches; this provider takes '5m' or '1h'",
        ),
        (
            {
                "agents": [
                    {
                        "name": "a",
                        "provider": {"kind": "anthropic", "model": "m", "api_key_env": "SEGUE_TEST_UNSET_KEY"},
                    }
                ]
            },
            "#/agents/0/provider/api_key_env",
            "SEGUE_TEST_UNSET_KEY is not set",
        ),
    ],
)
def test_bad_config_files_exit_2_naming_file_and_pointer(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    config: Any,
    pointer: str,
    reason: str,
) -> None:
    monkeypatch.delenv("SEGUE_TEST_UNSET_KEY", raising=False)
    path = tmp_path / "agents.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    assert main(["serve", "--stdio", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}{pointer}" in err and reason in err, err
    assert err.count("\n") == 1, "one line"


@pytest.mark.parametrize(
    ("kind", "variable", "twin_kind"),
    [("anthropic", "ANTHROPIC_API_KEY", "twin-anthropic"), ("openai_responses", "OPENAI_API_KEY", "twin-openai")],
)
def test_a_vendor_kind_without_a_key_is_refused_not_served_by_the_twin(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    variable: str,
    twin_kind: str,
) -> None:
    """A vendor kind without its key stops the server naming the entry and the twin kind: never a silent twin."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "agents.json"
    path.write_text(json.dumps({"agents": [{"name": "a", "provider": {"kind": kind, "model": "m"}}]}))
    assert main(["serve", "--stdio", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}#/agents/0/provider/kind" in err and f"{variable} is not set" in err, err
    assert f"use kind {twin_kind!r}" in err and err.count("\n") == 1, err


def test_a_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--http", "--config", str(tmp_path / "nope.json")]) == 2
    assert "cannot read the config file" in capsys.readouterr().err


async def read_all(data: bytes, *, max_body_bytes: int = 1 << 20) -> list[Any]:
    stream = asyncio.StreamReader()
    stream.feed_data(data)
    stream.feed_eof()
    reader = FrameReader(stream, max_body_bytes=max_body_bytes)
    return [item async for item in reader]


async def test_frame_reader_edge_cases() -> None:
    ok = encode_frame({"jsonrpc": "2.0", "id": "é", "method": "runs/list"})
    # Content-Length counts UTF-8 bytes (é is two), as LSP's base protocol does.
    assert ok == b'Content-Length: 48\r\n\r\n{"jsonrpc":"2.0","id":"\xc3\xa9","method":"runs/list"}'
    assert await read_all(ok + ok) == [{"jsonrpc": "2.0", "id": "é", "method": "runs/list"}] * 2
    lsp_header = b"Content-Length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}"
    assert await read_all(lsp_header) == [{}]
    assert await read_all(b"\r\n" + ok + b"\n" + ok) == [{"jsonrpc": "2.0", "id": "é", "method": "runs/list"}] * 2

    oversized = await read_all(b"Content-Length: 100\r\n\r\n" + b"x" * 100 + ok, max_body_bytes=60)
    assert isinstance(oversized[0], FrameError) and "over the limit" in oversized[0].message
    assert oversized[1] == {"jsonrpc": "2.0", "id": "é", "method": "runs/list"}, "the oversized body is skipped"

    truncated = await read_all(b'Content-Length: 100\r\n\r\n{"id": 1')
    assert len(truncated) == 1 and "ended after 8 of the 100 body bytes" in truncated[0].message
    cut_header = await read_all(b"Content-Length: 10\r\n")
    assert len(cut_header) == 1 and "ended inside a frame header" in cut_header[0].message
    endless = await read_all(b"x" * 9000)
    assert len(endless) == 1 and "no frame header within 8192 bytes" in endless[0].message
    noise = await read_all(b"x" * 9000 + b"\n" + ok)
    assert "9001 stray bytes before a frame header" in noise[0].message and noise[1]["id"] == "é"
