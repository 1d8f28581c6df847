"""Failover across real drivers (official clients over httpx2.MockTransport)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from segue._core.contracts import Provider, ProviderRequest
from segue.errors import ProviderError
from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from segue.providers import AnthropicProvider, Failover, OpenAIChatProvider, StreamDelta, StreamDone
from tests._support.openai_chat_bodies import completion
from tests._support.vendor_http import Recorder, anthropic_client, json_response, openai_client, sse

RATE_LIMITED = {"type": "error", "error": {"type": "rate_limit_error", "message": "Too many requests"}}
TOO_LONG = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": "prompt is too long: 250000 tokens > 200000 maximum"},
}


def conversation() -> list[Message]:
    return [
        Message(role="user", content=[TextBlock(text="How many customers?")]),
        Message(
            role="assistant",
            content=[
                ReasoningBlock(vendor="anthropic", format="anthropic.thinking", text="Count them.", signature="sig-1"),
                ToolCallBlock(id="toolu_1", name="run_query", arguments={"sql": "SELECT 1"}),
            ],
        ),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="toolu_1", content="[[42]]")]),
    ]


def pair(primary: Any, secondary: Any) -> tuple[Failover, Recorder, Recorder]:
    a, b = Recorder(*primary), Recorder(*secondary)
    chain = Failover(
        [
            AnthropicProvider("claude-sonnet-4-6", thinking={"type": "adaptive"}, client=anthropic_client(a)),
            OpenAIChatProvider("gpt-4.1", client=openai_client(b)),
        ]
    )
    return chain, a, b


async def test_rate_limited_primary_fails_over_and_says_who_served() -> None:
    chain, a, b = pair([json_response(RATE_LIMITED, 429)], [json_response(completion({"content": "42."}))])
    result = await chain.complete(ProviderRequest(system="s", messages=conversation(), model="claude-opus-4-8"))

    assert len(a.requests) == 1 and len(b.requests) == 1
    assert json.loads(a.requests[0].content)["model"] == "claude-opus-4-8"  # the override went to the primary only
    assert (result.vendor, result.model) == ("openai", "gpt-4.1")
    assert result.message.content == [TextBlock(text="42.")]
    (note,) = result.notes
    assert note.kind == "failover"
    assert note.message == "anthropic/claude-sonnet-4-6 failed (rate_limit: Too many requests); failed over"
    # The secondary is another vendor: the primary's thinking never reaches it.
    assert "Count them." not in b.requests[0].content.decode()


async def test_context_length_does_not_fail_over() -> None:
    chain, a, b = pair([json_response(TOO_LONG, 400)], [json_response(completion({"content": "x"}))])
    with pytest.raises(ProviderError) as caught:
        await chain.complete(ProviderRequest(system="s", messages=conversation()))
    assert caught.value.kind == "context_overflow" and caught.value.vendor == "anthropic"
    assert len(a.requests) == 1 and b.requests == []


async def test_every_member_failing_raises_the_last_error_naming_all() -> None:
    server_down = {"error": {"message": "upstream unavailable", "type": "server_error"}}
    chain, _, _ = pair([json_response(RATE_LIMITED, 429)], [json_response(server_down, 503)])
    with pytest.raises(ProviderError) as caught:
        await chain.complete(ProviderRequest(system="s", messages=conversation()))
    assert caught.value.kind == "server" and caught.value.vendor == "openai"
    assert "upstream unavailable" in str(caught.value) and "Too many requests" in str(caught.value)


async def test_stream_fails_over_before_the_first_delta() -> None:
    first_chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4.1",
        "choices": [{"index": 0, "delta": {"content": "42."}, "finish_reason": None}],
    }
    last_chunk = {**first_chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    chain, _, b = pair([json_response(RATE_LIMITED, 429)], [sse([(None, first_chunk), (None, last_chunk)], done=True)])
    items = [item async for item in chain.stream(ProviderRequest(system="s", messages=conversation()))]
    assert [i.text for i in items if isinstance(i, StreamDelta)] == ["42."]
    done = items[-1]
    assert isinstance(done, StreamDone) and done.response.vendor == "openai"
    assert done.response.notes[0].kind == "failover" and "failed over" in done.response.notes[0].message
    assert json.loads(b.requests[0].content)["stream"] is True


def test_failover_is_a_provider_named_after_its_primary() -> None:
    chain, _, _ = pair([], [])
    assert isinstance(chain, Provider)
    assert (chain.vendor, chain.model, chain.requires_stable_reasoning_prefix) == (
        "anthropic",
        "claude-sonnet-4-6",
        True,
    )
    with pytest.raises(ValueError, match="at least one provider"):
        Failover([])
    with pytest.raises(TypeError, match="must implement"):
        Failover([object()])  # type: ignore[list-item]


def test_importing_providers_and_wire_does_not_import_the_vendor_sdks() -> None:
    code = (
        "import sys, segue, segue.providers, segue.wire.anthropic.request, segue.wire.openrouter.request,"
        " segue.wire.anthropic.stream;"
        "from segue.providers import Failover;"
        "print(sorted(m for m in ('anthropic', 'openai') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
