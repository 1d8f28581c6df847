"""OpenAIResponsesProvider through the real `openai` client over httpx2.MockTransport."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.responses import ResponseStreamEvent
from openai.types.responses.response_create_params import (
    ResponseCreateParamsNonStreaming,
    ResponseCreateParamsStreaming,
)
from pydantic import TypeAdapter

from segue._core.contracts import ProviderRequest
from segue.errors import ProviderError
from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolDefinition, ToolResultBlock, Usage
from segue.providers import OpenAIResponsesProvider, StreamDelta, StreamDone
from segue.wire.openai_responses.request import cache_key
from tests._support.responses_bodies import MODEL, response, text_output
from tests._support.vendor_http import Recorder, assert_typed, json_response, openai_client, sse

TOOLS = [
    ToolDefinition(
        name="run_query",
        description="Run SQL.",
        parameters={"type": "object", "properties": {"sql": {"type": "string"}}},
    )
]
TOOL_PARAM = {
    "type": "function",
    "name": "run_query",
    "description": "Run SQL.",
    "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}},
    "strict": False,
}
REASONING = {
    "type": "reasoning",
    "id": "rs_2",
    "summary": [{"type": "summary_text", "text": "Orders next."}],
    "encrypted_content": "gAAA-2",
}
CALL = {
    "type": "function_call",
    "id": "fc_2",
    "call_id": "call_2",
    "name": "run_query",
    "arguments": '{"sql":"SELECT count(*) FROM orders"}',
    "status": "completed",
}


def replayed() -> list[Message]:
    return [
        Message(role="user", content=[TextBlock(text="How many customers?")]),
        Message(
            role="assistant",
            content=[
                ReasoningBlock(
                    vendor="openai",
                    model=MODEL,
                    format="openai.reasoning_item",
                    id="rs_1",
                    summary=["Count them."],
                    encrypted_content="gAAA-1",
                ),
                ToolCallBlock(id="call_1", name="run_query", arguments={"sql": "SELECT count(*) FROM customers"}),
            ],
        ),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="call_1", content="[[42]]")]),
        Message(role="assistant", content=[TextBlock(text="There are 42 customers.")]),
        Message(role="user", content=[TextBlock(text="And orders?")]),
    ]


async def test_first_turn_body_and_response() -> None:
    rec = Recorder(json_response(response([text_output("Hello.")])))
    provider = OpenAIResponsesProvider(MODEL, cache_key_prefix="acme", client=openai_client(rec))
    request = ProviderRequest(
        system="You are terse.",
        messages=[Message(role="user", content=[TextBlock(text="Hi")])],
        tools=TOOLS,
        cache_key="user-7",
    )

    result = await provider.complete(request)

    assert rec.requests[0].url.path == "/v1/responses"
    assert rec.body == {
        "model": MODEL,
        "instructions": "You are terse.",
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
        "tools": [TOOL_PARAM],
        "store": False,
        "prompt_cache_key": "acme:user-7",
    }
    assert_typed(rec.body, ResponseCreateParamsNonStreaming)
    assert result.message == Message(role="assistant", content=[TextBlock(text="Hello.")])
    assert result.usage == Usage(
        input_tokens=2000, output_tokens=40, cache_read_tokens=1536, cache_write_tokens=0, reasoning_tokens=24
    )
    assert (result.vendor, result.model, result.stop_reason, result.request_headers) == (
        "openai",
        MODEL,
        "end_turn",
        {},
    )
    assert "sk-test" not in json.dumps(result.request_body)


async def test_replayed_tool_turn_keeps_reasoning_items_before_their_call() -> None:
    rec = Recorder(json_response(response([REASONING, CALL])))
    provider = OpenAIResponsesProvider(
        MODEL, reasoning={"effort": "medium", "summary": "auto"}, client=openai_client(rec)
    )
    request = ProviderRequest(
        system="You are terse.",
        stable_head="Schema: customers, orders.",
        messages=replayed(),
        tools=TOOLS,
        replay_end=3,
    )

    result = await provider.complete(request)

    assert rec.body["input"] == [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "Schema: customers, orders."}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "How many customers?"}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Count them."}],
            "encrypted_content": "gAAA-1",
        },
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "run_query",
            "arguments": '{"sql":"SELECT count(*) FROM customers"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "[[42]]"},
        {"type": "message", "role": "assistant", "content": "There are 42 customers."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "And orders?"}]},
    ]
    assert rec.body["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert rec.body["include"] == ["reasoning.encrypted_content"]
    assert_typed(rec.body, ResponseCreateParamsNonStreaming)
    assert result.message.content == [
        ReasoningBlock(
            vendor="openai",
            model=MODEL,
            format="openai.reasoning_item",
            id="rs_2",
            summary=["Orders next."],
            encrypted_content="gAAA-2",
        ),
        ToolCallBlock(id="call_2", name="run_query", arguments={"sql": "SELECT count(*) FROM orders"}),
    ]
    assert result.stop_reason == "tool_use"


async def test_unreplayable_and_foreign_reasoning_is_left_off_with_a_note() -> None:
    messages = replayed()
    messages[1] = Message(
        role="assistant",
        content=[
            ReasoningBlock(vendor="anthropic", format="anthropic.thinking", text="secret plan", signature="sig"),
            ReasoningBlock(vendor="openai", format="openai.reasoning_item", id="rs_1", summary=[]),
            ToolCallBlock(id="call_1", name="run_query", arguments={"sql": "SELECT 1"}),
        ],
    )
    rec = Recorder(json_response(response([text_output("ok")])))
    provider = OpenAIResponsesProvider(MODEL, client=openai_client(rec))

    result = await provider.complete(ProviderRequest(system="s", messages=messages))

    assert [item["type"] for item in rec.body["input"]] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    assert "secret plan" not in json.dumps(rec.body)
    (note,) = result.notes
    assert note.kind == "reasoning-left-off" and "'rs_1' has no encrypted_content" in note.message


def test_prompt_cache_key_is_per_customer_and_bounded() -> None:
    assert cache_key(None, None) is None
    assert cache_key("acme", None) == "acme"
    assert cache_key(None, "user-7") == "user-7"
    long = cache_key("acme", "u" * 200)
    assert long is not None and len(long) <= 64 and long.startswith("acme:")
    assert long == cache_key("acme", "u" * 200) != cache_key("acme", "v" * 200)


def stream_events() -> list[dict[str, Any]]:
    final = response([REASONING, CALL])
    created = {**final, "status": "in_progress", "output": [], "usage": None}
    added_reasoning = {**REASONING, "encrypted_content": None}
    added_call = {**CALL, "arguments": "", "status": "in_progress"}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": created},
        {"type": "response.output_item.added", "output_index": 0, "item": {**added_reasoning, "summary": []}},
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_2",
            "output_index": 0,
            "summary_index": 0,
            "delta": "Orders ",
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs_2",
            "output_index": 0,
            "summary_index": 0,
            "delta": "next.",
        },
        {"type": "response.output_item.done", "output_index": 0, "item": REASONING},
        {"type": "response.output_item.added", "output_index": 1, "item": added_call},
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_2",
            "output_index": 1,
            "delta": '{"sql":"SELECT ',
        },
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_2",
            "output_index": 1,
            "delta": 'count(*) FROM orders"}',
        },
        {"type": "response.output_item.done", "output_index": 1, "item": CALL},
        {"type": "response.completed", "response": final},
    ]
    for n, event in enumerate(events):
        event["sequence_number"] = n
    return events


async def test_streamed_turn_matches_the_plain_call() -> None:
    events = stream_events()
    adapter: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
    for event in events:
        adapter.validate_python(event)
    rec = Recorder(sse((e["type"], e) for e in events), json_response(response([REASONING, CALL])))
    provider = OpenAIResponsesProvider(MODEL, reasoning={"effort": "low"}, client=openai_client(rec))
    request = ProviderRequest(system="s", messages=replayed(), tools=TOOLS)

    items = [item async for item in provider.stream(request)]
    streamed_body = json.loads(rec.requests[0].content)
    plain = await provider.complete(request)

    assert [(i.kind, i.text, i.tool_call_id) for i in items if isinstance(i, StreamDelta)] == [
        ("reasoning", "Orders ", None),
        ("reasoning", "next.", None),
        ("tool_call", '{"sql":"SELECT ', "call_2"),
        ("tool_call", 'count(*) FROM orders"}', "call_2"),
    ]
    done = items[-1]
    assert isinstance(done, StreamDone)
    assert streamed_body == {**plain.request_body, "stream": True}
    assert_typed(streamed_body, ResponseCreateParamsStreaming)
    assert done.response.message == plain.message and done.response.usage == plain.usage


async def test_error_with_vendor_message() -> None:
    error = {
        "error": {
            "message": "Invalid 'input[2].call_id': empty string.",
            "type": "invalid_request_error",
            "param": "input[2].call_id",
            "code": "empty_string",
        }
    }
    too_long = {
        "error": {
            "message": "Your input exceeds the context window of this model.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    }
    rec = Recorder(json_response(error, 400), json_response(too_long, 400))
    provider = OpenAIResponsesProvider(MODEL, client=openai_client(rec))
    request = ProviderRequest(system="s", messages=replayed())
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request)
    assert (caught.value.kind, caught.value.status_code) == ("bad_request", 400)
    assert caught.value.vendor_message == "Invalid 'input[2].call_id': empty string."
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request)
    assert caught.value.kind == "context_overflow" and not caught.value.retryable


async def test_failed_and_cut_streams_are_clear_errors() -> None:
    failed = {**response([], status="failed"), "error": {"code": "server_error", "message": "The model had a hiccup."}}
    events = stream_events()
    rec = Recorder(
        sse(
            [(e["type"], e) for e in events[:3]]
            + [("response.failed", {"type": "response.failed", "sequence_number": 3, "response": failed})]
        ),
        sse((e["type"], e) for e in events[:-1]),
        sse([(e["type"], e) for e in events[:3]] + [("response.output_item.done", "{not json")]),
    )
    provider = OpenAIResponsesProvider(MODEL, client=openai_client(rec))
    request = ProviderRequest(system="s", messages=replayed())
    for kind, text in (
        ("server", "The model had a hiccup."),
        ("stream", "before response.completed"),
        ("stream", "could not be read"),
    ):
        with pytest.raises(ProviderError) as caught:
            _ = [item async for item in provider.stream(request)]
        assert caught.value.kind == kind and text in str(caught.value)


async def test_truncated_function_arguments_are_a_clear_error() -> None:
    cut = {**CALL, "arguments": '{"sql":"SELECT cou'}
    rec = Recorder(
        json_response(response([cut], status="incomplete", incomplete_details={"reason": "max_output_tokens"}))
    )
    provider = OpenAIResponsesProvider(MODEL, client=openai_client(rec))
    with pytest.raises(ProviderError, match="not valid JSON") as caught:
        await provider.complete(ProviderRequest(system="s", messages=replayed()))
    assert caught.value.kind == "other"
