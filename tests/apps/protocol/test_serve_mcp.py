"""`segue serve` with MCP servers in its config file (`mcp_servers`): their tools serve runs, the processes stop
with the server, and a bad entry stops `segue serve` at start-up naming the file and the JSON pointer."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from segue.apps.cli.main import main
from tests._support.mcp_helpers import RAW_SERVER, SERVER, records, running, wait_gone
from tests._support.protocol_harness import stdio_server, write_config


def agent_with(servers: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "orders",
        "provider": {"kind": "twin-anthropic", "model": "claude-sonnet-4-6"},
        "prompt": "You answer questions about orders.",
        "store": "sqlite:///runs.db",
        "mcp_servers": servers,
    }


def test_a_configured_mcp_servers_tools_serve_runs_and_stop_with_the_server(tmp_path: Path) -> None:
    record = tmp_path / "servers"
    record.mkdir()
    fixture = {
        "name": "fixture",
        "command": sys.executable,
        "args": [str(SERVER), "--record", str(record)],
        "prefix": "shop",
        "timeout_seconds": 5,
    }
    config = write_config(tmp_path / "agents.json", [agent_with([fixture])])
    with stdio_server(config) as client:
        response = client.call("run", {"agent": "orders", "input": "Use shop_add for 2 and 3."})
        assert "error" not in response, response
        assert response["result"]["result"]["answer"] == "shop_add returned: 5"
        assert client.close() == 0
    (server,) = records(record)
    assert wait_gone(server["pid"]), "the MCP server outlived segue serve"


@pytest.mark.parametrize("stop", ["stdin-eof", "shutdown-exit", "sigterm", "sigint"])
def test_every_way_serve_stops_ends_the_mcp_servers_process_group(tmp_path: Path, stop: str) -> None:
    """The MCP server exits on its own when its stdin closes; its child (`sleep 3600`) must go too, however
    `segue serve` stops."""
    record = tmp_path / "servers"
    record.mkdir()
    raw = {"name": "raw", "command": sys.executable, "args": [str(RAW_SERVER), "--record", str(record), "--child"]}
    config = write_config(tmp_path / "agents.json", [agent_with([{**raw, "prefix": "shop"}])])
    with stdio_server(config) as client:
        if stop == "shutdown-exit":
            ready = client.call("initialize", {"protocol_version": "1.1", "client_info": {"name": "t", "version": "1"}})
            assert "result" in ready, ready
        response = client.call("run", {"agent": "orders", "input": "Use shop_count please."})
        assert response["result"]["result"]["answer"] == "shop_count returned: 1", response
        (server,) = records(record)
        assert running(server["pid"]) and running(server["child"])
        if stop == "stdin-eof":
            assert client.close() == 0
        elif stop == "shutdown-exit":
            assert "result" in client.call("shutdown", {})
            client.send({"jsonrpc": "2.0", "method": "exit"})
            assert client.proc.wait(timeout=30) == 0
        else:
            client.proc.send_signal(signal.SIGTERM if stop == "sigterm" else signal.SIGINT)
            client.proc.wait(timeout=30)
    assert wait_gone(server["pid"]), "the MCP server outlived segue serve"
    assert wait_gone(server["child"]), f"the MCP server's child outlived segue serve ({stop})"


@pytest.mark.parametrize(
    ("server", "pointer", "reason"),
    [
        (
            {"name": "x", "command": "python", "url": "http://127.0.0.1:1/mcp"},
            "#/agents/0/mcp_servers/0",
            "needs exactly one of command (stdio) or url (Streamable HTTP)",
        ),
        (
            {"name": "x", "url": "http://127.0.0.1:1/mcp", "args": ["-v"]},
            "#/agents/0/mcp_servers/0",
            "has a url, so args does not apply; remove it",
        ),
        (
            {"name": "x", "url": "http://127.0.0.1:1/mcp", "headers_env": {"Authorization": "SEGUE_TEST_UNSET_AUTH"}},
            "#/agents/0/mcp_servers/0/headers_env",
            "the environment variable SEGUE_TEST_UNSET_AUTH is not set",
        ),
        (
            {"name": "x", "command": "segue-no-such-mcp-server"},
            "#/agents/0/mcp_servers/0",
            "MCP server x: command 'segue-no-such-mcp-server' was not found",
        ),
        (
            {"name": "x", "url": "http://127.0.0.1:1/mcp", "headers_env": {"Authorization": "Bearer abc"}},
            "#/agents/0/mcp_servers/0/headers_env/Authorization",
            "does not match",
        ),
    ],
    ids=["command-and-url", "args-for-a-url", "unset-header-variable", "missing-command", "secret-in-the-file"],
)
def test_a_bad_mcp_server_entry_stops_serve_naming_the_pointer(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    server: dict[str, Any],
    pointer: str,
    reason: str,
) -> None:
    monkeypatch.delenv("SEGUE_TEST_UNSET_AUTH", raising=False)
    path = tmp_path / "agents.json"
    path.write_text(json.dumps({"agents": [agent_with([server])]}))
    assert main(["serve", "--stdio", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}{pointer}" in err and reason in err, err


def test_two_mcp_servers_of_one_name_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "agents.json"
    twice = [{"name": "x", "url": "http://127.0.0.1:1/mcp"}, {"name": "x", "url": "http://127.0.0.1:2/mcp"}]
    path.write_text(json.dumps({"agents": [agent_with(twice)]}))
    assert main(["serve", "--stdio", "--config", str(path)]) == 2
    assert (
        f"{path}#/agents/0/mcp_servers/1/name: MCP server 'x' is already defined in this agent"
        in capsys.readouterr().err
    )
