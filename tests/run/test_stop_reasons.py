"""Stop reasons, cut answers and cut tool calls, and the model that served.

The shapes are llama.cpp's (llama-server, OpenAI-compatible Chat Completions): at the output limit it answers
`finish_reason: "length"` with the calls it finished and a partial one whose arguments are `"{"`, and it answers
with its own model alias whatever the request's `model` said. Through the official openai client over a mock
transport; the Anthropic and Responses stop reasons through their clients too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from segue import Agent, ModelSettings, RunStore, tool
from segue.providers import AnthropicProvider, OpenAIChatProvider
from tests._support.vendor_http import Recorder, anthropic_client, json_response, openai_client, sse

URL = "http://127.0.0.1:8080/v1"
COMPLETE = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'}}
PARTIAL = {"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": "{"}}


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: sunny"


def completion(message: dict[str, Any], finish: str, model: str = "gemma-3-270m") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 32, "total_tokens": 152},
    }


CUT = completion({"content": None, "tool_calls": [COMPLETE, PARTIAL]}, "length")
ANSWER = completion({"content": "Oslo is sunny."}, "stop")


def llamacpp(rec: Recorder, model: str = "gemma-3-270m") -> OpenAIChatProvider:
    return OpenAIChatProvider(model, base_url=URL, vendor="llamacpp", client=openai_client(rec, URL))


def chunks(*deltas: dict[str, Any], finish: str) -> Any:
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1767225600, "model": "gemma-3-270m"}
    events: list[tuple[str | None, Any]] = [
        (None, {**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}) for d in deltas
    ]
    events.append((None, {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    usage = {"prompt_tokens": 120, "completion_tokens": 32, "total_tokens": 152}
    events.append((None, {**head, "choices": [], "usage": usage}))
    return sse(events, done=True)


def cut_stream() -> Any:
    return chunks(
        {"role": "assistant", "tool_calls": [{"index": 0, **COMPLETE}]},
        {"tool_calls": [{"index": 1, "id": "call_2", "type": "function", "function": {"name": "lookup"}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": "{"}}]},
        finish="length",
    )


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_cut_tool_call_keeps_the_complete_ones_and_asks_again_with_twice_the_limit(
    streaming: bool, sqlite_store: RunStore
) -> None:
    first = cut_stream() if streaming else json_response(CUT)
    then = (
        chunks({"role": "assistant", "content": "Oslo is sunny."}, finish="stop")
        if streaming
        else json_response(ANSWER)
    )
    rec = Recorder(first, then)
    agent = Agent(llamacpp(rec), tools=[lookup], store=sqlite_store, model_settings=ModelSettings(max_tokens=32))
    if streaming:
        events = [e async for e in agent.stream("Weather in Oslo and Bergen?")]
        result = events[-1].result
        assert result is not None
    else:
        result = await agent.run("Weather in Oslo and Bergen?")
    assert result.status == "success" and result.answer == "Oslo is sunny." and result.stop_reason == "end"
    bodies = [json.loads(r.content) for r in rec.requests]
    assert [b["max_tokens"] for b in bodies] == [32, 64]
    # The complete call ran, and its result went back with the raised limit.
    assert [m["role"] for m in bodies[1]["messages"]][-2:] == ["assistant", "tool"]
    assert [c["function"]["name"] for c in bodies[1]["messages"][-2]["tool_calls"]] == ["lookup"]
    assert [n.kind for n in result.notes or []] == ["output-truncated"]
    stored = sqlite_store.get_run(result.run_id)
    assert stored is not None
    cut = stored.llm_interactions[0]
    # The cut response is on record: request, response and usage.
    assert cut.provider_request is not None and cut.provider_response is not None
    assert (cut.usage.input_tokens, cut.usage.output_tokens) == (120, 32)
    assert [t.name for t in stored.tool_calls] == ["lookup"]


async def test_without_a_limit_to_raise_the_run_ends_with_a_typed_error_and_keeps_the_evidence(
    sqlite_store: RunStore,
) -> None:
    rec = Recorder(cut_stream())
    agent = Agent(llamacpp(rec), tools=[lookup], store=sqlite_store)
    events = [e async for e in agent.stream("Weather?")]
    last = events[-1]
    assert last.type == "RUN_ERROR" and last.meta["error_type"] == "OutputTruncatedError"
    assert last.meta["calls"] == ["lookup"] and last.meta["limit"] is None
    assert "cut at the server's own output limit" in (last.error or "") and "lookup" in (last.error or "")
    stored = sqlite_store.get_run(last.run_id)
    assert stored is not None and stored.status == "error" and len(stored.llm_interactions) == 1
    assert stored.llm_interactions[0].provider_response is not None
    assert stored.usage.output_tokens == 32


async def test_a_limit_raised_once_is_not_raised_again() -> None:
    rec = Recorder(json_response(CUT), json_response(CUT))
    agent = Agent(llamacpp(rec), tools=[lookup], model_settings={"max_tokens": 16})
    result = await agent.run("Weather?")
    assert result.status == "error" and result.error is not None
    assert "max_tokens=32 (already raised once in this run)" in result.error
    assert result.stop_reason == "max_tokens"


async def test_a_final_answer_cut_at_the_limit_is_a_success_that_says_so() -> None:
    rec = Recorder(json_response(completion({"content": "Oslo is sunny and"}, "length")))
    result = await Agent(llamacpp(rec), model_settings={"max_tokens": 5}).run("Weather?")
    assert (result.status, result.stop_reason, result.answer) == ("success", "max_tokens", "Oslo is sunny and")
    notes = result.notes or []
    assert [n.kind for n in notes] == ["output-truncated"] and "max_tokens=5" in notes[0].message


@pytest.mark.parametrize(
    ("finish", "expected"), [("stop", "end"), ("tool_calls", "tool_use"), ("content_filter", "content_filter")]
)
async def test_chat_finish_reasons_are_normalised(finish: str, expected: str) -> None:
    message: dict[str, Any] = {"content": "x"}
    if finish == "tool_calls":
        message = {"content": None, "tool_calls": [COMPLETE]}
    rec = Recorder(json_response(completion(message, finish)), json_response(ANSWER))
    agent = Agent(llamacpp(rec), tools=[lookup], max_iterations=1)
    result = await agent.run("Weather?")
    assert result.stop_reason == expected


@pytest.mark.parametrize(("vendor_reason", "expected"), [("refusal", "refusal"), ("pause_turn", "pause")])
async def test_anthropic_stop_reasons_are_normalised(vendor_reason: str, expected: str) -> None:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": "..."}],
        "stop_reason": vendor_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 5},
    }
    result = await Agent(
        AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(Recorder(json_response(body))))
    ).run("hi")
    assert result.stop_reason == expected


async def test_a_server_answering_as_another_model_gets_a_note_and_is_priced_as_that_model() -> None:
    """llama-server ignores the request's model and answers with the alias it was started with."""
    rec = Recorder(json_response(ANSWER))  # "model": "gemma-3-270m"
    result = await Agent(llamacpp(rec, model="llama-3.3-70b-instruct")).run("Weather?")
    notes = [n for n in result.notes or [] if n.kind == "served-model"]
    assert len(notes) == 1 and "'gemma-3-270m' answered" in notes[0].message
    assert result.cost is not None and [p.model for p in result.cost.prices] == ["gemma-3-270m"]


@pytest.mark.parametrize(
    ("asked", "served"),
    [
        ("claude-haiku-4-5", "claude-haiku-4-5-20251001"),  # Anthropic's dated snapshot (a catalog alias too)
        ("gpt-4.1", "gpt-4.1-2025-04-14"),  # OpenAI's dated snapshot
        ("gemma-3-270m", "gemma-3-270m"),
    ],
)
async def test_a_dated_snapshot_of_the_model_asked_for_is_the_same_model(asked: str, served: str) -> None:
    rec = Recorder(json_response(completion({"content": "ok"}, "stop", model=served)))
    result = await Agent(llamacpp(rec, model=asked)).run("hi")
    assert [n.kind for n in result.notes or []] == []
