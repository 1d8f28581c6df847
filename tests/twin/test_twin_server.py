"""The twin as a loopback HTTP server: official clients over a real socket, and bad input answered with the
vendor-shaped 4xx while the server keeps serving."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from segue_twin import ScriptedPolicy, Twin
from segue_twin.server import TwinServer, serve

LIMIT = 64 * 1024


@pytest.fixture
def server() -> Iterator[TwinServer]:
    handle = serve("127.0.0.1", 0, twin=Twin(policy=ScriptedPolicy(["pong"] * 50), max_body_bytes=LIMIT))
    try:
        yield handle
    finally:
        handle.close()


def _post(server: TwinServer, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection(server.host, server.port, timeout=5)
    try:
        connection.request("POST", path, body=body, headers={"authorization": "Bearer k", **headers})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _valid(server: TwinServer) -> int:
    body = json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
    status, payload = _post(server, "/v1/messages", body.encode(), {"content-type": "application/json"})
    assert payload.get("type") == "message", payload
    return status


async def test_official_clients_over_loopback(server: TwinServer) -> None:
    """AsyncAnthropic and AsyncOpenAI (default httpx2 transport, real socket) talk to the served twin."""
    claude = anthropic.AsyncAnthropic(api_key="k", base_url=server.url, max_retries=0)
    message = await claude.messages.create(
        model="claude-sonnet-4-6", max_tokens=16, messages=[{"role": "user", "content": "ping"}]
    )
    assert message.content[0].type == "text" and message.content[0].text == "pong"
    gpt = openai.AsyncOpenAI(api_key="k", base_url=f"{server.url}/v1", max_retries=0)
    chunks = [
        c
        async for c in await gpt.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "ping"}], stream=True
        )
    ]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "pong"
    await claude.close()
    await gpt.close()


def test_non_json_body_is_a_vendor_shaped_400_and_serving_continues(server: TwinServer) -> None:
    """A body that is not JSON: 400 invalid_request_error in the vendor's shape.

    https://platform.claude.com/docs/en/api/errors
    """
    status, payload = _post(server, "/v1/messages", b"{not json", {"content-type": "application/json"})
    assert status == 400
    assert payload["type"] == "error" and payload["error"]["type"] == "invalid_request_error"
    assert payload["error"]["message"].startswith("We could not parse the JSON body of your request")
    status, payload = _post(server, "/v1/responses", b"[1, 2]", {"content-type": "application/json"})
    assert status == 400
    assert payload["error"] == {
        "message": "The request body must be a JSON object, got list.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_json",
    }
    assert _valid(server) == 200


def test_wrong_content_type_is_a_vendor_shaped_400(server: TwinServer) -> None:
    """A body that is not declared as application/json is refused before parsing.

    https://platform.claude.com/docs/en/api/errors
    """
    status, payload = _post(server, "/v1/chat/completions", b"{}", {"content-type": "text/plain"})
    assert status == 400
    assert payload["error"]["code"] == "invalid_content_type"
    assert "'text/plain'" in payload["error"]["message"]
    assert _valid(server) == 200


def test_huge_body_is_a_413_and_serving_continues(server: TwinServer) -> None:
    """Bodies above max_body_bytes get 413 request_too_large (Anthropic's error type for oversized requests).

    https://platform.claude.com/docs/en/api/errors
    """
    huge = b'{"x": "' + b"a" * (2 * LIMIT) + b'"}'
    status, payload = _post(server, "/v1/messages", huge, {"content-type": "application/json"})
    assert status == 413
    assert payload["error"]["type"] == "request_too_large"
    assert f"the limit is {LIMIT} bytes" in payload["error"]["message"]
    # Far beyond the limit the server answers without reading the body, then closes that connection.
    with socket.create_connection((server.host, server.port), timeout=5) as raw:
        raw.sendall(
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer k\r\nContent-Length: 1000000000\r\n\r\n"
        )
        reply = raw.recv(65536)
    assert reply.startswith(b"HTTP/1.1 413")
    assert _valid(server) == 200


def test_unknown_path_is_a_404_in_the_callers_vendor_shape(server: TwinServer) -> None:
    """Unknown paths: 404, Anthropic-shaped when the caller sends anthropic-version, OpenAI-shaped otherwise.

    https://platform.claude.com/docs/en/api/errors
    """
    status, payload = _post(server, "/v1/nope", b"{}", {"content-type": "application/json"})
    assert status == 404 and payload["error"]["code"] == "unknown_url"
    status, payload = _post(
        server, "/v1/nope", b"{}", {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    )
    assert status == 404 and payload["error"]["type"] == "not_found_error"
    assert _valid(server) == 200


def test_sync_transport_answers_in_process() -> None:
    """The sync httpx2 transport serves the same endpoints without a socket."""
    import httpx2

    twin = Twin(policy=ScriptedPolicy(["pong"]))
    with httpx2.Client(transport=twin.sync_transport(), base_url="http://twin") as client:
        response = client.post(
            "/v1/chat/completions",
            headers={"authorization": "Bearer k"},
            json={"model": "gpt-4.1", "messages": [{"role": "user", "content": "ping"}]},
        )
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "pong"
