"""OpenRouterProvider through the real `openai` client over httpx2.MockTransport."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.chat.completion_create_params import (
    CompletionCreateParamsNonStreaming,
    CompletionCreateParamsStreaming,
)

from segue._core.contracts import FRAGMENT_META_KEY, ProviderRequest
from segue.errors import ProviderError
from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock, Usage
from segue.providers import OpenRouterProvider, StreamDelta, StreamDone
from tests._support.vendor_http import Recorder, assert_typed, json_response, openai_client, sse

BASE = "https://openrouter.ai/api/v1"
CLAUDE = "anthropic/claude-sonnet-4.6"
#: Keys OpenRouter documents beyond the OpenAI request types: routing, plugins and reasoning at the top level
#: (sent through extra_body), reasoning_details on assistant messages, cache_control on content parts.
EXTRA = {
    "CompletionCreateParamsBase": {"provider", "plugins", "reasoning", "session_id"},
    "CompletionCreateParamsNonStreaming": {"provider", "plugins", "reasoning", "session_id"},
    "CompletionCreateParamsStreaming": {"provider", "plugins", "reasoning", "session_id"},
    "ChatCompletionAssistantMessageParam": {"reasoning_details"},
    "ChatCompletionContentPartTextParam": {"cache_control"},
}
NO_COMPRESSION = [{"id": "context-compression", "enabled": False}]
DETAILS = [
    {
        "type": "reasoning.text",
        "text": "Count them.",
        "signature": "sig-1",
        "id": None,
        "format": "anthropic-claude-v1",
        "index": 0,
    },
    {"type": "reasoning.encrypted", "data": "opaque==", "id": None, "format": "anthropic-claude-v1", "index": 1},
]
CALL = {
    "id": "toolu_2",
    "type": "function",
    "function": {"name": "run_query", "arguments": '{"sql":"SELECT count(*) FROM orders"}'},
}


def completion(message: dict[str, Any], *, model: str = CLAUDE, finish: str = "stop") -> dict[str, Any]:
    body = {
        "id": "gen-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": model,
        "provider": "Anthropic",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish, "logprobs": None}
        ],
        "usage": {
            "prompt_tokens": 3000,
            "completion_tokens": 50,
            "total_tokens": 3050,
            "cost": 0.0012,
            "prompt_tokens_details": {"cached_tokens": 2800, "cache_write_tokens": 150},
            "completion_tokens_details": {"reasoning_tokens": 30},
        },
    }
    ChatCompletion.model_validate(body)
    return body


def replayed() -> list[Message]:
    reasoning = [
        ReasoningBlock(
            vendor="openrouter", model=CLAUDE, format="openrouter.reasoning_details", text=d.get("text"), native=d
        )
        for d in DETAILS
    ]
    return [
        Message(role="user", content=[TextBlock(text="How many customers?")]),
        Message(
            role="assistant",
            content=[*reasoning, ToolCallBlock(id="toolu_1", name="run_query", arguments={"sql": "SELECT 1"})],
        ),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="toolu_1", content="[[42]]")]),
        Message(role="assistant", content=[TextBlock(text="There are 42 customers.")]),
        Message(role="user", content=[TextBlock(text="And orders?")]),
        Message(role="user", content=[TextBlock(text="iteration 1 of 8")], meta={FRAGMENT_META_KEY: True}),
    ]


async def test_first_turn_turns_compression_off() -> None:
    rec = Recorder(json_response(completion({"content": "Hello."}, model="openai/gpt-5.5")))
    provider = OpenRouterProvider("openai/gpt-5.5", client=openai_client(rec, BASE))
    result = await provider.complete(
        ProviderRequest(system="You are terse.", messages=[Message(role="user", content=[TextBlock(text="Hi")])])
    )

    assert str(rec.requests[0].url) == f"{BASE}/chat/completions"
    assert rec.body == {
        "model": "openai/gpt-5.5",
        "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}],
        "plugins": NO_COMPRESSION,
    }
    assert_typed(rec.body, CompletionCreateParamsNonStreaming, extra=EXTRA)
    assert result.usage == Usage(
        input_tokens=3000, output_tokens=50, cache_read_tokens=2800, cache_write_tokens=150, reasoning_tokens=30
    )
    assert (result.vendor, result.model) == ("openrouter", "openai/gpt-5.5")
    assert not provider.requires_stable_reasoning_prefix


async def test_provider_pinning_and_app_plugins_pass_through() -> None:
    rec = Recorder(json_response(completion({"content": "ok"})))
    provider = OpenRouterProvider(
        "meta-llama/llama-4",
        provider_order=["groq", "together"],
        allow_fallbacks=False,
        plugins=[{"id": "web", "max_results": 3}],
        reasoning={"effort": "low"},
        client=openai_client(rec, BASE),
    )
    await provider.complete(ProviderRequest(system="", messages=[Message(role="user", content=[TextBlock(text="Hi")])]))
    assert rec.body["provider"] == {"order": ["groq", "together"], "allow_fallbacks": False}
    # The app's plugin, plus compression off: an app plugin must not let an account default compress the replay.
    assert rec.body["plugins"] == [{"id": "web", "max_results": 3}, *NO_COMPRESSION]
    assert rec.body["reasoning"] == {"effort": "low"}
    assert_typed(rec.body, CompletionCreateParamsNonStreaming, extra=EXTRA)


async def test_the_customers_cache_key_is_the_sticky_session_id() -> None:
    """OpenRouter's prompt-caching page: "When a session_id is present, OpenRouter uses it directly as the sticky
    routing key instead of deriving one from message hashing", and with it "sticky routing activates on any
    successful request — even before cache usage is observed"; "session_id must be at most 256 characters".
    segue sends the request's cache key (the run's tenant: per customer, as prompt_cache_key on OpenAI)."""
    rec = Recorder(json_response(completion({"content": "ok"})), json_response(completion({"content": "ok"})))
    provider = OpenRouterProvider(CLAUDE, client=openai_client(rec, BASE))
    hi = [Message(role="user", content=[TextBlock(text="Hi")])]
    await provider.complete(ProviderRequest(system="", messages=hi, cache_key="acme"))
    assert rec.body["session_id"] == "acme"
    assert_typed(rec.body, CompletionCreateParamsNonStreaming, extra=EXTRA)

    await provider.complete(ProviderRequest(system="", messages=hi, cache_key="c" * 300))
    long = rec.body["session_id"]
    assert len(long) == 256 and long.startswith("c" * 200), "cut to OpenRouter's limit, the same key every time"


async def test_no_cache_key_no_session_id() -> None:
    rec = Recorder(json_response(completion({"content": "ok"})))
    provider = OpenRouterProvider(CLAUDE, client=openai_client(rec, BASE))
    await provider.complete(ProviderRequest(system="", messages=[Message(role="user", content=[TextBlock(text="Hi")])]))
    assert "session_id" not in rec.body


@pytest.mark.parametrize("mine", [{"id": "context-compression"}, {"id": "context-compression", "enabled": True}])
async def test_compression_the_app_configured_itself_is_left_as_it_set_it(mine: dict[str, Any]) -> None:
    """Rule (https://openrouter.ai/docs/guides/features/message-transforms): the current form is
    `plugins: [{"id": "context-compression"}]`, disabled with `"enabled": false`; account-default plugins apply
    whenever the request does not mention them. segue adds the disable only when the app did not name the plugin."""
    rec = Recorder(json_response(completion({"content": "ok"})))
    provider = OpenRouterProvider("meta-llama/llama-4", plugins=[{"id": "web"}, mine], client=openai_client(rec, BASE))
    await provider.complete(ProviderRequest(system="", messages=[Message(role="user", content=[TextBlock(text="Hi")])]))
    assert rec.body["plugins"] == [{"id": "web"}, mine]


async def test_anthropic_model_replays_reasoning_details_and_caches_four_blocks() -> None:
    answer = completion(
        {"content": None, "tool_calls": [CALL], "reasoning": "Orders next.", "reasoning_details": DETAILS[:1]},
        finish="tool_calls",
    )
    rec = Recorder(json_response(answer))
    provider = OpenRouterProvider(CLAUDE, client=openai_client(rec, BASE))
    assert provider.requires_stable_reasoning_prefix

    result = await provider.complete(
        ProviderRequest(system="You are terse.", stable_head="Schema.", messages=replayed(), replay_end=3)
    )

    cache = {"type": "ephemeral"}
    assert rec.body["messages"] == [
        {
            "role": "system",
            "content": [
                {"type": "text", "text": "You are terse.", "cache_control": cache},
                {"type": "text", "text": "Schema.", "cache_control": cache},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "How many customers?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "run_query", "arguments": '{"sql":"SELECT 1"}'},
                }
            ],
            "reasoning_details": DETAILS,
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": [{"type": "text", "text": "[[42]]"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "There are 42 customers.", "cache_control": cache}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "And orders?", "cache_control": cache},
                {"type": "text", "text": "iteration 1 of 8"},
            ],
        },
    ]
    assert_typed(rec.body, CompletionCreateParamsNonStreaming, extra=EXTRA)
    assert result.message.content == [
        ReasoningBlock(
            vendor="openrouter",
            model=CLAUDE,
            format="openrouter.reasoning_details",
            text="Count them.",
            signature="sig-1",
            native=DETAILS[0],
        ),
        ToolCallBlock(id="toolu_2", name="run_query", arguments={"sql": "SELECT count(*) FROM orders"}),
    ]


async def test_reasoning_details_round_trip_unmodified() -> None:
    rec = Recorder(
        json_response(
            completion({"content": None, "tool_calls": [CALL], "reasoning_details": DETAILS}, finish="tool_calls")
        ),
        json_response(completion({"content": "7 orders."})),
    )
    provider = OpenRouterProvider(CLAUDE, cache_ttl=None, client=openai_client(rec, BASE))
    first = await provider.complete(ProviderRequest(system="s", messages=replayed()[:1]))
    conversation = [
        *replayed()[:1],
        first.message,
        Message(role="tool", content=[ToolResultBlock(tool_call_id="toolu_2", content="[[7]]")]),
    ]
    await provider.complete(ProviderRequest(system="s", messages=conversation))
    assert rec.body["messages"][2]["reasoning_details"] == DETAILS
    assert "cache_control" not in json.dumps(rec.body)


def chunks() -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return {
            "id": "gen-1",
            "object": "chat.completion.chunk",
            "created": 1767225600,
            "model": CLAUDE,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }

    detail = {"type": "reasoning.text", "id": None, "format": "anthropic-claude-v1", "index": 0}
    return [
        chunk(
            {
                "role": "assistant",
                "content": "",
                "reasoning": "Count ",
                "reasoning_details": [{**detail, "text": "Count "}],
            }
        ),
        chunk({"content": "", "reasoning": "them.", "reasoning_details": [{**detail, "text": "them."}]}),
        chunk({"content": "", "reasoning_details": [{**detail, "signature": "sig-1"}]}),
        chunk(
            {
                "content": "",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "toolu_2",
                        "type": "function",
                        "function": {"name": "run_query", "arguments": ""},
                    }
                ],
            }
        ),
        chunk(
            {
                "content": "",
                "tool_calls": [{"index": 0, "function": {"arguments": '{"sql":"SELECT count(*) FROM orders"}'}}],
            }
        ),
        chunk({"content": ""}, "tool_calls", usage=completion({"content": "x"})["usage"]),
    ]


async def test_streamed_turn_merges_reasoning_details_and_matches_the_plain_call() -> None:
    for c in chunks():
        ChatCompletionChunk.model_validate(c)
    merged = {
        "type": "reasoning.text",
        "id": None,
        "format": "anthropic-claude-v1",
        "index": 0,
        "text": "Count them.",
        "signature": "sig-1",
    }
    plain_answer = completion(
        {"content": None, "tool_calls": [CALL], "reasoning": "Count them.", "reasoning_details": [merged]},
        finish="tool_calls",
    )
    rec = Recorder(sse(((None, c) for c in chunks()), done=True), json_response(plain_answer))
    provider = OpenRouterProvider(CLAUDE, client=openai_client(rec, BASE))
    request = ProviderRequest(system="s", messages=replayed())

    items = [item async for item in provider.stream(request)]
    streamed_body = json.loads(rec.requests[0].content)
    plain = await provider.complete(request)

    assert [(i.kind, i.text) for i in items if isinstance(i, StreamDelta)] == [
        ("reasoning", "Count "),
        ("reasoning", "them."),
        ("tool_call", '{"sql":"SELECT count(*) FROM orders"}'),
    ]
    done = items[-1]
    assert isinstance(done, StreamDone)
    assert_typed(streamed_body, CompletionCreateParamsStreaming, extra=EXTRA)
    assert streamed_body["plugins"] == NO_COMPRESSION and streamed_body["stream"] is True
    assert done.response.message == plain.message and done.response.usage == plain.usage
    assert done.response.message.content[0].native == merged  # type: ignore[union-attr]


def test_missing_api_key_is_a_clear_auth_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="OPENROUTER_API_KEY") as caught:
        OpenRouterProvider(CLAUDE)
    assert caught.value.kind == "auth"


def test_provider_order_must_be_a_list() -> None:
    with pytest.raises(ValueError, match="list of provider names"):
        OpenRouterProvider(CLAUDE, provider_order="anthropic", client=openai_client(Recorder(), BASE))
