"""OpenAIChatProvider (OpenAI, vLLM, llama.cpp...) through the real `openai` client over httpx2.MockTransport."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)

from segue._core.contracts import ProviderRequest
from segue.errors import ProviderError
from segue.generated import (
    Message,
    ModelSettings,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolDefinition,
    ToolResultBlock,
    Usage,
)
from segue.providers import OpenAIChatProvider, StreamDelta, StreamDone
from tests._support.openai_chat_bodies import completion
from tests._support.vendor_http import Recorder, assert_typed, json_response, openai_client, sse

TOOLS = [ToolDefinition(name="run_query", description="Run SQL.", parameters={"type": "object"}, strict=True)]
TOOL_PARAM = {
    "type": "function",
    "function": {"name": "run_query", "description": "Run SQL.", "parameters": {"type": "object"}, "strict": True},
}
CALL = {
    "id": "call_2",
    "type": "function",
    "function": {"name": "run_query", "arguments": '{"sql": "SELECT count(*) FROM orders"}'},
}


def replayed() -> list[Message]:
    return [
        Message(role="user", content=[TextBlock(text="How many customers?")]),
        Message(
            role="assistant",
            content=[
                ReasoningBlock(vendor="openai_chat", format="chat.reasoning_text", text="Count them."),
                ReasoningBlock(vendor="anthropic", format="anthropic.thinking", text="secret plan", signature="s"),
                ToolCallBlock(id="call_1", name="run_query", arguments={"sql": "SELECT count(*) FROM customers"}),
            ],
        ),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="call_1", content="[[42]]")]),
        Message(role="assistant", content=[TextBlock(text="There are 42 customers.")]),
        Message(role="user", content=[TextBlock(text="And orders?")]),
    ]


REPLAYED_WIRE = [
    {"role": "user", "content": "How many customers?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "run_query", "arguments": '{"sql":"SELECT count(*) FROM customers"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "[[42]]"},
    {"role": "assistant", "content": "There are 42 customers."},
    {"role": "user", "content": "And orders?"},
]


async def test_openai_first_turn() -> None:
    rec = Recorder(json_response(completion({"content": "Hello."})))
    provider = OpenAIChatProvider("gpt-4.1", client=openai_client(rec))
    request = ProviderRequest(
        system="You are terse.",
        messages=[Message(role="user", content=[TextBlock(text="Hi")])],
        tools=TOOLS,
        settings=ModelSettings(max_tokens=256),
        cache_key="user-7",
    )

    result = await provider.complete(request)

    assert rec.requests[0].url.path == "/v1/chat/completions"
    assert rec.body == {
        "model": "gpt-4.1",
        "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}],
        "tools": [TOOL_PARAM],
        "max_completion_tokens": 256,
        "prompt_cache_key": "user-7",
    }
    assert_typed(rec.body, CompletionCreateParamsNonStreaming)
    assert result.message == Message(role="assistant", content=[TextBlock(text="Hello.")])
    assert result.usage == Usage(input_tokens=2000, output_tokens=20, cache_read_tokens=1920)
    assert (result.vendor, result.model, result.stop_reason) == ("openai", "gpt-4.1", "end_turn")


async def test_vllm_replayed_tool_turn_drops_reasoning_and_parses_it_back() -> None:
    answer = completion(
        {"content": None, "tool_calls": [CALL], "reasoning": "Orders next."},
        model="Qwen/Qwen3-32B",
        finish="tool_calls",
        usage={"prompt_tokens": 900, "completion_tokens": 30, "total_tokens": 930},
    )
    rec = Recorder(json_response(answer))
    provider = OpenAIChatProvider(
        "Qwen/Qwen3-32B",
        base_url="http://vllm.internal:8000/v1",
        vendor="vllm",
        client=openai_client(rec, "http://vllm.internal:8000/v1"),
    )
    request = ProviderRequest(
        system="You are terse.",
        stable_head="Schema: customers, orders.",
        messages=replayed(),
        tools=TOOLS,
        settings=ModelSettings(max_tokens=512),
    )

    result = await provider.complete(request)

    assert str(rec.requests[0].url) == "http://vllm.internal:8000/v1/chat/completions"
    assert rec.body["messages"] == [
        {"role": "system", "content": "You are terse.\n\nSchema: customers, orders."},
        *REPLAYED_WIRE,
    ]
    assert rec.body["max_tokens"] == 512 and "prompt_cache_key" not in rec.body
    assert "Count them." not in json.dumps(rec.body) and "secret plan" not in json.dumps(rec.body)
    assert_typed(rec.body, CompletionCreateParamsNonStreaming)
    assert result.vendor == "vllm"
    assert result.message.content == [
        ReasoningBlock(vendor="openai_chat", model="Qwen/Qwen3-32B", format="chat.reasoning_text", text="Orders next."),
        ToolCallBlock(id="call_2", name="run_query", arguments={"sql": "SELECT count(*) FROM orders"}),
    ]
    # vLLM leaves out prompt_tokens_details unless enabled: unknown, not zero.
    assert result.usage == Usage(input_tokens=900, output_tokens=30)
    assert result.usage.cache_read_tokens is None
    assert result.stop_reason == "tool_use"


async def test_llama_cpp_timings_and_reasoning_content() -> None:
    answer = completion(
        {"content": "42.", "reasoning_content": "Simple."},
        model="qwen3-8b",
        usage={"prompt_tokens": 1200, "completion_tokens": 3, "total_tokens": 1203},
        timings={"cache_n": 1100, "prompt_n": 100, "prompt_ms": 80.1, "predicted_n": 3, "predicted_ms": 40.0},
    )
    rec = Recorder(json_response(answer))
    provider = OpenAIChatProvider(
        "qwen3-8b",
        base_url="http://localhost:8080/v1",
        vendor="llama.cpp",
        client=openai_client(rec, "http://localhost:8080/v1"),
    )
    result = await provider.complete(
        ProviderRequest(system="", messages=[Message(role="user", content=[TextBlock(text="?")])])
    )
    assert rec.body["messages"] == [{"role": "user", "content": "?"}]
    assert result.usage == Usage(input_tokens=1200, output_tokens=3, cache_read_tokens=1100)
    assert result.message.content[0] == ReasoningBlock(
        vendor="openai_chat", model="qwen3-8b", format="chat.reasoning_text", text="Simple."
    )


def chunks() -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1767225600,
            "model": "gpt-4.1",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    usage = {
        **chunk({}),
        "choices": [],
        "usage": {
            "prompt_tokens": 2000,
            "completion_tokens": 20,
            "total_tokens": 2020,
            "prompt_tokens_details": {"cached_tokens": 1920},
        },
    }
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Checking"}),
        chunk({"content": " orders."}),
        chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "call_2", "type": "function", "function": {"name": "run_query", "arguments": ""}}
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"sql": "SELECT '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'count(*) FROM orders"}'}}]}),
        chunk({}, "tool_calls"),
        usage,
    ]


async def test_streamed_turn_matches_the_plain_call() -> None:
    for c in chunks():
        ChatCompletionChunk.model_validate(c)
    rec = Recorder(
        sse(((None, c) for c in chunks()), done=True),
        json_response(completion({"content": "Checking orders.", "tool_calls": [CALL]}, finish="tool_calls")),
    )
    provider = OpenAIChatProvider("gpt-4.1", client=openai_client(rec))
    request = ProviderRequest(system="s", messages=replayed(), tools=TOOLS)

    items = [item async for item in provider.stream(request)]
    streamed_body = json.loads(rec.requests[0].content)
    plain = await provider.complete(request)

    assert [(i.kind, i.text) for i in items if isinstance(i, StreamDelta)] == [
        ("text", "Checking"),
        ("text", " orders."),
        ("tool_call", '{"sql": "SELECT '),
        ("tool_call", 'count(*) FROM orders"}'),
    ]
    done = items[-1]
    assert isinstance(done, StreamDone)
    assert streamed_body == {**plain.request_body, "stream": True, "stream_options": {"include_usage": True}}
    assert_typed(streamed_body, CompletionCreateParamsStreaming)
    assert done.response.message == plain.message and done.response.usage == plain.usage
    assert done.response.stop_reason == "tool_use"


async def test_truncated_arguments_and_malformed_chunks_are_stream_errors() -> None:
    cut = [*chunks()[:5], chunks()[6]]
    rec = Recorder(
        sse(((None, c) for c in cut), done=True),
        sse([(None, chunks()[0]), (None, '{"id": "chatcmpl-1", "choices": [')]),
        sse((None, c) for c in chunks()[:3]),
    )
    provider = OpenAIChatProvider("gpt-4.1", client=openai_client(rec))
    request = ProviderRequest(system="s", messages=replayed())
    for text in ("not valid JSON", "could not be read", "before a finish_reason"):
        with pytest.raises(ProviderError) as caught:
            _ = [item async for item in provider.stream(request)]
        assert caught.value.kind == "stream" and text in str(caught.value)


async def test_server_error_message_is_kept() -> None:
    body = {
        "error": {
            "message": "This model's maximum context length is 32768 tokens.",
            "type": "BadRequestError",
            "code": 400,
        }
    }
    rec = Recorder(
        json_response(body, 400), json_response({"error": {"message": "upstream died", "type": "server_error"}}, 503)
    )
    provider = OpenAIChatProvider(
        "m", base_url="http://vllm:8000/v1", vendor="vllm", client=openai_client(rec, "http://vllm:8000/v1")
    )
    request = ProviderRequest(system="s", messages=replayed())
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request)
    assert (caught.value.kind, caught.value.vendor) == ("context_overflow", "vllm")
    assert "maximum context length is 32768" in str(caught.value)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request)
    assert (caught.value.kind, caught.value.retryable, caught.value.vendor_message) == ("server", True, "upstream died")


def test_vendor_must_be_named() -> None:
    with pytest.raises(ValueError, match="catalog vendor"):
        OpenAIChatProvider("m", vendor="", client=openai_client(Recorder()))
