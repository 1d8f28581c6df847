"""Streaming in the twin: the vendors' event sequences, assembled by the official clients, equal the
non-streamed response (same seed, same clock, fresh twins)."""

from __future__ import annotations

from itertools import groupby
from typing import Any

from segue_twin import AssistantTurn, PlannedCall, ScriptedPolicy, Twin

TURN = AssistantTurn(
    text="Here is what I found in the shop database so far.",
    tool_calls=(
        PlannedCall(name="run_query", arguments={"sql": "SELECT country, COUNT(*) FROM customers GROUP BY 1"}),
    ),
    reasoning="The schema is known, so I will run the aggregate query over customers now.",
)
THINKING = {"type": "enabled", "budget_tokens": 1024}


def _twin(turn: AssistantTurn = TURN) -> Twin:
    return Twin(policy=ScriptedPolicy([turn]), clock=lambda: 1_750_000_000.0)


def _unparsed(value: Any) -> Any:
    """A dump without the `parsed*` fields the clients' stream helpers add on their Parsed* types."""
    if isinstance(value, dict):
        return {k: _unparsed(v) for k, v in value.items() if k not in ("parsed", "parsed_arguments", "index")}
    if isinstance(value, list):
        return [_unparsed(v) for v in value]
    return value


def _runs(kinds: list[str]) -> list[str]:
    """Consecutive duplicates collapsed: the shape of an event sequence."""
    return [kind for kind, _ in groupby(kinds)]


async def test_anthropic_stream_event_sequence_and_assembly() -> None:
    """message_start, then per block content_block_start / *_delta / content_block_stop (thinking_delta then
    signature_delta just before the stop; input_json_delta for tool_use), message_delta, message_stop.

    https://platform.claude.com/docs/en/build-with-claude/streaming
    """
    args: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 4096,
        "thinking": THINKING,
        "messages": [{"role": "user", "content": "How many customers per country?"}],
    }
    plain = await _twin().anthropic_client().messages.create(**args)

    events = []
    stream = await _twin().anthropic_client().messages.create(**args, stream=True)
    async for event in stream:
        delta = getattr(event, "delta", None)
        events.append(f"{event.type}:{delta.type}" if event.type == "content_block_delta" and delta else event.type)
    assert _runs(events) == [
        "message_start",
        "content_block_start",
        "content_block_delta:thinking_delta",
        "content_block_delta:signature_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta:text_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta:input_json_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events.count("content_block_delta:text_delta") > 1  # really chunked

    async with _twin().anthropic_client().messages.stream(**args) as streamed:
        assembled = await streamed.get_final_message()
    assert assembled.model_dump() == plain.model_dump()


async def test_anthropic_omitted_thinking_streams_only_a_signature() -> None:
    """display "omitted": thinking comes back empty; the stream carries one signature_delta and no thinking_delta.

    https://platform.claude.com/docs/en/build-with-claude/extended-thinking
    """
    args: dict[str, Any] = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 4096,
        "thinking": {**THINKING, "display": "omitted"},
        "messages": [{"role": "user", "content": "q"}],
    }
    kinds = []
    async for event in await _twin().anthropic_client().messages.create(**args, stream=True):
        if event.type == "content_block_delta":
            kinds.append(event.delta.type)
    assert "thinking_delta" not in kinds
    assert kinds.count("signature_delta") == 1
    plain = await _twin().anthropic_client().messages.create(**args)
    assert plain.content[0].type == "thinking" and plain.content[0].thinking == ""


async def test_responses_stream_event_sequence_and_assembly() -> None:
    """response.created, output_item.added/done per item with reasoning_summary_text.delta, output_text.delta and
    function_call_arguments.delta in between, then response.completed.

    https://platform.openai.com/docs/api-reference/responses-streaming
    """
    args: dict[str, Any] = {
        "model": "gpt-5",
        "input": "How many customers per country?",
        "store": False,
        "reasoning": {"summary": "auto"},
        "tools": [
            {
                "type": "function",
                "name": "run_query",
                "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}},
            }
        ],
    }
    plain = await _twin().openai_client().responses.create(**args)
    kinds = [event.type async for event in await _twin().openai_client().responses.create(**args, stream=True)]
    assert _runs(kinds) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    async with _twin().openai_client().responses.stream(**args) as streamed:
        assembled = await streamed.get_final_response()
    assert _unparsed(assembled.model_dump()) == plain.model_dump()
    assert plain.output[0].type == "reasoning" and plain.output[0].encrypted_content


async def test_chat_stream_chunks_assemble_with_usage() -> None:
    """Chat chunks (role, content, tool_calls deltas, finish_reason) plus a final usage chunk when
    stream_options.include_usage is set, then [DONE].

    https://platform.openai.com/docs/api-reference/chat-streaming
    """
    args: dict[str, Any] = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "How many customers?"}]}
    plain = await _twin().openai_client().chat.completions.create(**args)
    chunks = [
        c
        async for c in await _twin()
        .openai_client()
        .chat.completions.create(**args, stream=True, stream_options={"include_usage": True})
    ]
    assert chunks[-1].choices == [] and chunks[-1].usage == plain.usage
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    async with (
        _twin().openai_client().chat.completions.stream(**args, stream_options={"include_usage": True}) as streamed
    ):
        assembled = await streamed.get_final_completion()
    assert assembled.choices[0].message.content == plain.choices[0].message.content
    assert assembled.choices[0].message.tool_calls is not None and plain.choices[0].message.tool_calls is not None
    assert [_unparsed(c.model_dump()) for c in assembled.choices[0].message.tool_calls] == [
        c.model_dump() for c in plain.choices[0].message.tool_calls
    ]
    assert assembled.usage == plain.usage
