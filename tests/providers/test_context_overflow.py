"""A prompt over the context window is one typed `context_overflow` on every vendor, with the replay advice.

Each vendor words it differently; the bodies below are the shapes the servers return, as found in their sources
and reports (quoted per case). Through the official SDK clients over a mock transport. An error of a shape segue
does not know stays `bad_request`, with the vendor's message.
"""

from __future__ import annotations

from typing import Any

import pytest

from segue import Agent
from segue._core.contracts import ProviderRequest
from segue.errors import ProviderError
from segue.generated import Message, TextBlock
from segue.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider, OpenRouterProvider
from tests._support.vendor_http import Recorder, anthropic_client, json_response, openai_client, sse

ADVICE = "replay fewer runs"
REQUEST = ProviderRequest(system="s", messages=[Message(role="user", content=[TextBlock(text="hi")])])

# llama.cpp server (tools/server): HTTP 400, type exceed_context_size_error, its code the HTTP status, and the token
# counts beside it. Older builds said "the request exceeds the available context size, try increasing it"; newer
# ones "request (4476 tokens) exceeds the available context size (4096 tokens)".
LLAMACPP = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 4476,
        "n_ctx": 4096,
    }
}
LLAMACPP_NEWER = {
    "error": {
        "code": 400,
        "message": "request (4476 tokens) exceeds the available context size (4096 tokens)",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 4476,
        "n_ctx": 4096,
    }
}
# vLLM's OpenAI server: type BadRequestError, code 400. The renderer raises "This model's maximum context length is
# {max_length} tokens. However, your request has {n} input tokens. Please reduce the length of the input
# messages."; the V1 input processor "The decoder prompt (length N) is longer than the maximum model length of M."
VLLM = {
    "error": {
        "message": "This model's maximum context length is 32768 tokens. However, your request has 40000 input "
        "tokens. Please reduce the length of the input messages.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
}
VLLM_DECODER = {
    "error": {
        "message": "The decoder prompt (length 5951) is longer than the maximum model length of 4096. Make sure that "
        "`max_model_len` is no smaller than the number of text tokens.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
}
# OpenRouter: HTTP 400 with only a message and the code (reported in agno-agi/agno#3980 and earendil-works/pi#6378).
OPENROUTER = {
    "error": {
        "message": "This endpoint's maximum context length is 200000 tokens. However, you requested about 5028244 "
        "tokens (4945291 of text input, 2953 of tool input, 80000 in the output). Please reduce the length of either "
        'one, or use the "middle-out" transform to compress your prompt automatically.',
        "code": 400,
        "metadata": {"provider_name": None},
    }
}
# OpenAI: code context_length_exceeded (platform.openai.com/docs/guides/error-codes).
OPENAI = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 204308 "
        "tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
# Anthropic: invalid_request_error "prompt is too long: N tokens > M maximum".
ANTHROPIC = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": "prompt is too long: 208656 tokens > 200000 maximum"},
}


def chat(rec: Recorder, vendor: str) -> OpenAIChatProvider:
    url = "http://127.0.0.1:8080/v1"
    return OpenAIChatProvider("m", base_url=url, vendor=vendor, client=openai_client(rec, url))


@pytest.mark.parametrize(
    ("name", "body", "vendor"),
    [
        ("llama.cpp", LLAMACPP, "llamacpp"),
        ("llama.cpp, newer wording", LLAMACPP_NEWER, "llamacpp"),
        ("vLLM", VLLM, "vllm"),
        ("vLLM decoder prompt", VLLM_DECODER, "vllm"),
        ("OpenAI Chat Completions", OPENAI, "openai"),
    ],
)
async def test_chat_completions_context_errors_are_context_overflow(name: str, body: Any, vendor: str) -> None:
    with pytest.raises(ProviderError) as caught:
        await chat(Recorder(json_response(body, 400)), vendor).complete(REQUEST)
    error = caught.value
    assert (error.kind, error.vendor, error.status_code, error.retryable) == ("context_overflow", vendor, 400, False)
    assert error.vendor_message == body["error"]["message"]
    assert ADVICE in str(error), name


async def test_openai_responses_context_error_is_context_overflow() -> None:
    provider = OpenAIResponsesProvider("gpt-5.4", client=openai_client(Recorder(json_response(OPENAI, 400))))
    with pytest.raises(ProviderError) as caught:
        await provider.complete(REQUEST)
    assert caught.value.kind == "context_overflow" and ADVICE in str(caught.value)


async def test_openrouter_context_error_is_context_overflow() -> None:
    provider = OpenRouterProvider("openai/gpt-5.4", client=openai_client(Recorder(json_response(OPENROUTER, 400))))
    with pytest.raises(ProviderError) as caught:
        await provider.complete(REQUEST)
    assert caught.value.kind == "context_overflow"
    assert "maximum context length is 200000" in str(caught.value) and ADVICE in str(caught.value)


async def test_anthropic_context_error_is_context_overflow() -> None:
    provider = AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(Recorder(json_response(ANTHROPIC, 400))))
    with pytest.raises(ProviderError) as caught:
        await provider.complete(REQUEST)
    assert caught.value.kind == "context_overflow" and ADVICE in str(caught.value)


async def test_llamacpp_context_error_inside_a_stream_is_context_overflow() -> None:
    """llama.cpp sends an error event in a 200 stream when the prompt does not fit: the type decides, not the
    numeric code (the HTTP status) beside it."""
    rec = Recorder(sse([(None, LLAMACPP)]))
    with pytest.raises(ProviderError) as caught:
        async for _ in chat(rec, "llamacpp").stream(REQUEST):
            pass
    assert caught.value.kind == "context_overflow" and ADVICE in str(caught.value)


async def test_an_unknown_error_shape_stays_bad_request_with_the_vendors_message() -> None:
    body = {"error": {"code": 400, "message": "Jinja Exception: System message must be at the beginning"}}
    with pytest.raises(ProviderError) as caught:
        await chat(Recorder(json_response(body, 400)), "llamacpp").complete(REQUEST)
    assert caught.value.kind == "bad_request"
    assert caught.value.vendor_message == "Jinja Exception: System message must be at the beginning"


async def test_a_run_that_overflows_ends_with_the_kind_and_the_advice() -> None:
    agent = Agent(chat(Recorder(json_response(LLAMACPP, 400)), "llamacpp"))
    result = await agent.run("hi")
    assert result.status == "error" and result.error is not None
    assert "context_overflow error from llamacpp" in result.error and ADVICE in result.error
