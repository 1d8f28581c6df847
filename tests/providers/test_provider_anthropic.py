"""AnthropicProvider through the real `anthropic` client over httpx2.MockTransport: the exact request Anthropic
would receive, and responses / stream events shaped as the API sends them (checked with the SDK's own models)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.types import RawMessageStreamEvent
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming, MessageCreateParamsStreaming
from pydantic import TypeAdapter

from segue._core.contracts import FRAGMENT_META_KEY, OutputFormat, ProviderRequest
from segue.errors import ProviderError, WireError
from segue.generated import (
    Message,
    ModelSettings,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from segue.providers import AnthropicProvider, StreamDelta, StreamDone
from tests._support.anthropic_bodies import MODEL, TOOLS, response
from tests._support.vendor_http import Recorder, anthropic_client, assert_typed, json_response, sse

TOOL_PARAM = {
    "name": "run_query",
    "description": "Run a read-only SQL query.",
    "input_schema": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
}
BINDING_EXTRA = {"ThinkingConfigEnabledParam": {"block_binding"}, "ThinkingConfigAdaptiveParam": {"block_binding"}}
EPHEMERAL = {"type": "ephemeral", "ttl": "5m"}


def replayed() -> list[Message]:
    """A replayed run (question, thinking + tool call, result, answer) followed by the new question."""
    return [
        Message(role="user", content=[TextBlock(text="How many customers?")], meta={"segue.replayed": True}),
        Message(
            role="assistant",
            content=[
                ReasoningBlock(
                    vendor="anthropic", model=MODEL, format="anthropic.thinking", text="Count them.", signature="sig-1"
                ),
                ReasoningBlock(
                    vendor="anthropic", model=MODEL, format="anthropic.redacted_thinking", redacted_data="opaque=="
                ),
                ToolCallBlock(id="toolu_1", name="run_query", arguments={"sql": "SELECT count(*) FROM customers"}),
            ],
        ),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="toolu_1", content="[[42]]")]),
        Message(role="assistant", content=[TextBlock(text="There are 42 customers.")]),
        Message(role="user", content=[TextBlock(text="And orders?")]),
    ]


async def test_first_turn_body_headers_and_response() -> None:
    rec = Recorder(json_response(response([{"type": "text", "text": "Hello."}])))
    provider = AnthropicProvider(MODEL, client=anthropic_client(rec))
    request = ProviderRequest(
        system="You are terse.", messages=[Message(role="user", content=[TextBlock(text="Hi")])], tools=TOOLS
    )

    result = await provider.complete(request)

    assert rec.body == {
        "model": MODEL,
        "max_tokens": 4096,
        "system": [{"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": EPHEMERAL}]}],
        "tools": [TOOL_PARAM],
    }
    assert_typed(rec.body, MessageCreateParamsNonStreaming)
    assert "anthropic-beta" not in rec.headers
    assert rec.requests[0].url.path == "/v1/messages"
    assert result.request_body == rec.body and result.request_headers == {}
    assert result.message == Message(role="assistant", content=[TextBlock(text="Hello.")])
    assert result.usage == Usage(
        input_tokens=2012,
        output_tokens=30,
        cache_read_tokens=1800,
        cache_write_tokens=200,
        cache_write_tokens_by_ttl={"5m": 200, "1h": 0},
    )
    assert (result.vendor, result.model, result.stop_reason) == ("anthropic", MODEL, "end_turn")
    assert "sk-ant-test" not in json.dumps([result.request_body, result.request_headers])


async def test_replayed_tool_turn_with_thinking_is_verbatim_and_binds_blocks() -> None:
    answer = response(
        [
            {"type": "thinking", "thinking": "Orders next.", "signature": "sig-2"},
            {"type": "tool_use", "id": "toolu_2", "name": "run_query", "input": {"sql": "SELECT count(*) FROM orders"}},
        ],
        stop="tool_use",
        input_transformations=[],
    )
    rec = Recorder(json_response(answer))
    provider = AnthropicProvider(
        MODEL, thinking={"type": "enabled", "budget_tokens": 2048}, client=anthropic_client(rec)
    )
    request = ProviderRequest(system="You are terse.", messages=replayed(), tools=TOOLS, replay_end=3)

    result = await provider.complete(request)

    assert rec.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "How many customers?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Count them.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "opaque=="},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "run_query",
                    "input": {"sql": "SELECT count(*) FROM customers"},
                },
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "[[42]]"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "There are 42 customers.", "cache_control": EPHEMERAL}],
        },
        {"role": "user", "content": [{"type": "text", "text": "And orders?", "cache_control": EPHEMERAL}]},
    ]
    assert rec.body["thinking"] == {
        "type": "enabled",
        "budget_tokens": 2048,
        "block_binding": {"prefix_mismatch_behavior": "drop_block"},
    }
    assert rec.headers["anthropic-beta"] == "thinking-binding-controls-2026-08-01"
    assert result.request_headers == {"anthropic-beta": "thinking-binding-controls-2026-08-01"}
    assert_typed(rec.body, MessageCreateParamsNonStreaming, extra=BINDING_EXTRA)
    assert result.message.content == [
        ReasoningBlock(
            vendor="anthropic", model=MODEL, format="anthropic.thinking", text="Orders next.", signature="sig-2"
        ),
        ToolCallBlock(id="toolu_2", name="run_query", arguments={"sql": "SELECT count(*) FROM orders"}),
    ]
    assert result.stop_reason == "tool_use" and result.notes == []


async def test_each_thinking_block_the_vendor_reports_dropping_is_a_vendor_dropped_note() -> None:
    """Rule (pinned SDK, BetaThinkingDroppedInputTransformation.path): "Where the removed block was in your
    request, as `messages.{i}.content.{j}`: `i` indexes the `messages` array you sent". segue maps that wire path
    back to the canonical message, even where canonical messages merged into one wire turn."""
    dropped = [{"type": "thinking_dropped", "path": "messages.1.content.0", "reason": "prefix_binding_mismatch"}]
    # A second assistant message merges into wire message 1 (roles alternate): its blocks come after the first's.
    merged = [*replayed()[:2], Message(role="assistant", content=[TextBlock(text="Counting.")]), *replayed()[2:]]
    later = [{"type": "thinking_dropped", "path": "messages.1.content.3", "reason": "model_binding_mismatch"}]
    rec = Recorder(
        json_response(response([{"type": "text", "text": "ok"}], input_transformations=dropped)),
        json_response(response([{"type": "text", "text": "ok"}], input_transformations=[])),
        json_response(response([{"type": "text", "text": "ok"}])),
        json_response(response([{"type": "text", "text": "ok"}], input_transformations=later)),
    )
    provider = AnthropicProvider(MODEL, thinking={"type": "adaptive"}, client=anthropic_client(rec))

    surprised = await provider.complete(ProviderRequest(system="s", messages=replayed()))
    assert surprised.input_transformations == dropped
    (note,) = surprised.notes
    assert (note.kind, note.message_index) == ("vendor-dropped", 1)
    assert "messages.1.content.0 (prefix_binding_mismatch)" in note.message

    kept = await provider.complete(ProviderRequest(system="s", messages=replayed()))
    assert kept.notes == []

    silent = await provider.complete(ProviderRequest(system="s", messages=replayed()))
    assert [n.kind for n in silent.notes] == ["unconfirmed"], "no input_transformations although binding was asked"

    merged_note = (await provider.complete(ProviderRequest(system="s", messages=merged))).notes
    assert json.loads(rec.requests[3].content)["messages"][1]["content"][3] == {"type": "text", "text": "Counting."}
    assert [(n.kind, n.message_index) for n in merged_note] == [("vendor-dropped", 2)]


async def test_thinking_off_leaves_replayed_thinking_off_and_says_so() -> None:
    """Rule (pinned SDK, anthropic.types.beta): block binding is a field of BetaThinkingConfigEnabledParam and
    BetaThinkingConfigAdaptiveParam only ("Controls for block binding: what happens when a thinking block this
    request sends back fails the conversation check"); BetaThinkingConfigDisabledParam has nothing but `type`, and
    the default prefix_mismatch_behavior is "error": "fails the request with a 400 error". A request without
    thinking cannot ask for drop_block, so segue sends no thinking blocks there, and the driver declares it replays
    none (the planner then drops that reasoning with cause reasoning-off)."""
    for thinking in (None, {"type": "disabled"}):
        rec = Recorder(json_response(response([{"type": "text", "text": "ok"}])))
        provider = AnthropicProvider(MODEL, thinking=thinking, client=anthropic_client(rec))
        assert provider.reasoning_vendor is None
        result = await provider.complete(ProviderRequest(system="s", messages=replayed(), replay_end=3))
        sent = rec.body["messages"][1]["content"]
        assert [b["type"] for b in sent] == ["tool_use"], sent
        assert "anthropic-beta" not in rec.headers and "block_binding" not in json.dumps(rec.body)
        (note,) = result.notes
        assert note.kind == "reasoning-left-off" and "2 thinking block(s) were left off" in note.message
    on = AnthropicProvider(MODEL, thinking={"type": "adaptive"}, client=anthropic_client(Recorder()))
    assert on.reasoning_vendor == "anthropic"


async def test_reasoning_dropped_by_segue_or_foreign_never_reaches_the_wire() -> None:
    """A turn whose reasoning was dropped (text and tool calls only) and another vendor's reasoning: no thinking
    blocks, nothing rendered as text, and so no binding beta either."""
    messages = replayed()
    messages[1] = Message(
        role="assistant",
        content=[
            ReasoningBlock(
                vendor="openai",
                format="openai.reasoning_item",
                id="rs_1",
                summary=["secret plan"],
                encrypted_content="enc",
            ),
            ToolCallBlock(id="toolu_1", name="run_query", arguments={"sql": "SELECT count(*) FROM customers"}),
        ],
    )
    rec = Recorder(json_response(response([{"type": "text", "text": "ok"}])))
    provider = AnthropicProvider(
        MODEL, thinking={"type": "enabled", "budget_tokens": 2048}, client=anthropic_client(rec)
    )

    result = await provider.complete(ProviderRequest(system="s", messages=messages, replay_end=3))

    assert rec.body["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "run_query",
                "input": {"sql": "SELECT count(*) FROM customers"},
            }
        ],
    }
    assert "secret plan" not in json.dumps(rec.body)
    assert rec.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "anthropic-beta" not in rec.headers
    assert result.notes == []


async def test_four_breakpoints_with_stable_head_and_never_on_the_fragment() -> None:
    messages = [
        *replayed(),
        Message(
            role="assistant",
            content=[ToolCallBlock(id="toolu_2", name="run_query", arguments={"sql": "SELECT count(*) FROM orders"})],
        ),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="toolu_2", content="[[7]]")]),
        Message(role="user", content=[TextBlock(text="iteration 2 of 8")], meta={FRAGMENT_META_KEY: True}),
    ]
    rec = Recorder(json_response(response([{"type": "text", "text": "7 orders."}])))
    provider = AnthropicProvider(MODEL, cache_ttl="1h", client=anthropic_client(rec))

    await provider.complete(
        ProviderRequest(
            system="You are terse.", stable_head="Schema: customers, orders.", messages=messages, replay_end=3
        )
    )

    hour = {"type": "ephemeral", "ttl": "1h"}
    body = rec.body
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": hour},
        {"type": "text", "text": "Schema: customers, orders.", "cache_control": hour},
    ]
    assert body["messages"][3]["content"][-1]["cache_control"] == hour  # last replayed message
    # The tool result and the fragment share the last user turn: the breakpoint stays on the tool result.
    assert body["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "[[7]]", "cache_control": hour},
            {"type": "text", "text": "iteration 2 of 8"},
        ],
    }
    assert json.dumps(body).count("cache_control") == 4
    assert_typed(body, MessageCreateParamsNonStreaming)


async def test_no_cache_ttl_means_no_breakpoints() -> None:
    rec = Recorder(json_response(response([{"type": "text", "text": "ok"}])))
    provider = AnthropicProvider(MODEL, cache_ttl=None, client=anthropic_client(rec))
    await provider.complete(ProviderRequest(system="s", stable_head="h", messages=replayed(), replay_end=3))
    assert "cache_control" not in json.dumps(rec.body)


async def test_prewarm_sends_max_tokens_zero_with_the_usual_breakpoints() -> None:
    """`max_tokens`: "Set to `0` to populate the prompt cache without generating a response" (the pinned anthropic
    SDK's `MessageCreateParamsBase.max_tokens` docstring, linking the page's "pre-warming the cache"). The
    breakpoints are the ones a normal request of the same prefix carries; the answer is empty."""
    warm = response([], stop="max_tokens")
    warm["usage"].update(input_tokens=3, output_tokens=0, cache_read_input_tokens=0, cache_creation_input_tokens=2000)
    rec = Recorder(json_response(warm))
    provider = AnthropicProvider(MODEL, cache_ttl="1h", max_tokens=2048, client=anthropic_client(rec))
    request = ProviderRequest(system="s", stable_head="h", messages=replayed()[:4], replay_end=3, prewarm=True)

    result = await provider.complete(request)

    assert rec.body["max_tokens"] == 0
    assert json.dumps(rec.body).count("cache_control") == 3  # system, stable head, the last (replayed) message
    assert_typed(rec.body, MessageCreateParamsNonStreaming)
    assert result.message.content == []
    # This provider has thinking off, so (as on its normal requests) the replayed thinking is not sent.
    assert [n.kind for n in result.notes] == ["reasoning-left-off"]
    assert (result.usage.output_tokens, result.usage.cache_write_tokens) == (0, 2000)


async def test_prewarm_without_breakpoints_is_refused_before_sending() -> None:
    rec = Recorder()
    provider = AnthropicProvider(MODEL, cache_ttl=None, client=anthropic_client(rec))
    with pytest.raises(WireError, match="prewarm needs cache breakpoints, but cache_ttl is None"):
        await provider.complete(ProviderRequest(system="s", messages=replayed(), prewarm=True))
    assert rec.requests == []


async def test_prewarm_with_structured_output_is_refused_before_sending() -> None:
    """The vendor refuses `max_tokens: 0` with structured outputs (`output_config.format`, the prompt-caching
    page's "pre-warming the cache"): the driver refuses it before sending, naming the output_type."""
    rec = Recorder()
    provider = AnthropicProvider(MODEL, client=anthropic_client(rec))
    output = OutputFormat(name="Answer", schema={"type": "object", "properties": {}}, strict=True)
    with pytest.raises(WireError, match=r"cannot prewarm this prefix: an output_type \(structured outputs, "):
        await provider.complete(ProviderRequest(system="s", messages=replayed()[:4], prewarm=True, output=output))
    assert rec.requests == []


@pytest.mark.parametrize("choice", ["required", "list_tables"])
async def test_prewarm_with_a_forced_tool_choice_is_refused_before_sending(choice: str) -> None:
    """The vendor refuses `max_tokens: 0` with a forced `tool_choice` (`any` or a named tool; the prompt-caching
    page's "pre-warming the cache"): the driver refuses it before sending, naming the setting; `auto` and `none`
    still warm."""
    rec = Recorder()
    provider = AnthropicProvider(MODEL, client=anthropic_client(rec))
    forced = ModelSettings(tool_choice=choice)
    with pytest.raises(WireError, match=rf"cannot prewarm this prefix: tool_choice '{choice}' \(the vendor refuses"):
        await provider.complete(ProviderRequest(system="s", messages=replayed()[:4], prewarm=True, settings=forced))
    assert rec.requests == []


def stream_events() -> list[dict[str, Any]]:
    start = response([], stop="tool_use", input_transformations=[])
    start.update(stop_reason=None, usage={**start["usage"], "output_tokens": 1})
    return [
        {"type": "message_start", "message": start},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Orders "}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "next."}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-2"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "ping"},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Checking"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": " orders."}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_2", "name": "run_query", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"sql": "SELECT '},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": 'count(*) FROM orders"}'},
        },
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"type": "message_delta", "stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 30},
        },
        {"type": "message_stop"},
    ]


STREAMED_CONTENT = [
    {"type": "thinking", "thinking": "Orders next.", "signature": "sig-2"},
    {"type": "text", "text": "Checking orders."},
    {"type": "tool_use", "id": "toolu_2", "name": "run_query", "input": {"sql": "SELECT count(*) FROM orders"}},
]


async def test_streamed_turn_yields_deltas_and_the_same_message_as_a_plain_call() -> None:
    events = stream_events()
    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    for event in events:
        if event["type"] != "ping":  # keep-alive, not a RawMessageStreamEvent
            adapter.validate_python(event)
    rec = Recorder(
        sse((e["type"], e) for e in events),
        json_response(response(STREAMED_CONTENT, stop="tool_use", input_transformations=[])),
    )
    provider = AnthropicProvider(MODEL, thinking={"type": "adaptive"}, client=anthropic_client(rec))
    request = ProviderRequest(system="s", messages=replayed(), replay_end=3, tools=TOOLS)

    items = [item async for item in provider.stream(request)]
    streamed_body = json.loads(rec.requests[0].content)
    plain = await provider.complete(request)

    deltas = [i for i in items if isinstance(i, StreamDelta)]
    assert [(d.kind, d.text) for d in deltas] == [
        ("reasoning", "Orders "),
        ("reasoning", "next."),
        ("text", "Checking"),
        ("text", " orders."),
        ("tool_call", '{"sql": "SELECT '),
        ("tool_call", 'count(*) FROM orders"}'),
    ]
    assert deltas[-1].tool_call_id == "toolu_2" and deltas[-1].tool_name == "run_query"
    done = items[-1]
    assert isinstance(done, StreamDone) and items.count(done) == 1
    assert streamed_body == {**plain.request_body, "stream": True}
    assert_typed(streamed_body, MessageCreateParamsStreaming, extra=BINDING_EXTRA)
    assert done.response.message == plain.message
    assert done.response.usage == plain.usage
    assert done.response.stop_reason == "tool_use"
    assert done.response.request_headers == {"anthropic-beta": "thinking-binding-controls-2026-08-01"}


@pytest.mark.parametrize(
    ("status", "error_type", "message", "kind"),
    [
        (400, "invalid_request_error", "messages.1.content.0: unexpected `tool_use_id`", "bad_request"),
        (400, "invalid_request_error", "prompt is too long: 210417 tokens > 200000 maximum", "context_overflow"),
        (401, "authentication_error", "invalid x-api-key", "auth"),
        (429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit", "rate_limit"),
        (529, "overloaded_error", "Overloaded", "server"),
    ],
)
async def test_vendor_errors_become_provider_errors_with_the_vendors_message(
    status: int, error_type: str, message: str, kind: str
) -> None:
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    rec = Recorder(json_response(body, status=status))
    provider = AnthropicProvider(MODEL, client=anthropic_client(rec))
    with pytest.raises(ProviderError) as caught:
        await provider.complete(ProviderRequest(system="s", messages=replayed()))
    error = caught.value
    assert (error.kind, error.status_code, error.vendor, error.vendor_message) == (kind, status, "anthropic", message)
    assert message in str(error)
    assert error.retryable == (kind in ("rate_limit", "server"))


async def test_malformed_stream_event_is_a_clear_stream_error() -> None:
    events = stream_events()[:3]
    rec = Recorder(
        sse(
            [*((e["type"], e) for e in events), ("content_block_delta", '{"type": "content_block_delta", "index": 0, ')]
        )
    )
    provider = AnthropicProvider(MODEL, client=anthropic_client(rec))
    with pytest.raises(ProviderError) as caught:
        _ = [item async for item in provider.stream(ProviderRequest(system="s", messages=replayed()))]
    assert caught.value.kind == "stream"
    assert "anthropic stream could not be read" in str(caught.value)


async def test_truncated_tool_arguments_in_a_stream_are_a_clear_stream_error() -> None:
    events = [e for e in stream_events() if e.get("index") != 2 or e["type"] == "content_block_start"]
    cut = {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "input_json_delta", "partial_json": '{"sql": "SELECT cou'},
    }
    events.insert(-2, cut)
    events.insert(-2, {"type": "content_block_stop", "index": 2})
    rec = Recorder(sse((e["type"], e) for e in events))
    provider = AnthropicProvider(MODEL, client=anthropic_client(rec))
    with pytest.raises(ProviderError) as caught:
        _ = [item async for item in provider.stream(ProviderRequest(system="s", messages=replayed()))]
    assert caught.value.kind == "stream"
    assert "run_query" in str(caught.value) and "not valid JSON" in str(caught.value)


async def test_stream_cut_before_message_stop_is_a_stream_error() -> None:
    rec = Recorder(sse((e["type"], e) for e in stream_events()[:9]))
    provider = AnthropicProvider(MODEL, client=anthropic_client(rec))
    with pytest.raises(ProviderError, match="before message_stop") as caught:
        _ = [item async for item in provider.stream(ProviderRequest(system="s", messages=replayed()))]
    assert caught.value.kind == "stream"


async def test_error_event_mid_stream_keeps_the_vendors_message() -> None:
    events = [
        *((e["type"], e) for e in stream_events()[:3]),
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]
    rec = Recorder(sse(events))
    provider = AnthropicProvider(MODEL, client=anthropic_client(rec))
    with pytest.raises(ProviderError) as caught:
        _ = [item async for item in provider.stream(ProviderRequest(system="s", messages=replayed()))]
    assert (caught.value.kind, caught.value.vendor_message) == ("server", "Overloaded")


def test_thinking_block_without_signature_is_refused_before_sending() -> None:
    from segue.wire.anthropic import request as wire

    bad = [
        Message(role="assistant", content=[ReasoningBlock(vendor="anthropic", format="anthropic.thinking", text="t")])
    ]
    with pytest.raises(WireError, match="has no 'signature'"):
        wire.build_request(
            ProviderRequest(system="", messages=bad),
            model=MODEL,
            max_tokens=2048,
            cache_ttl=None,
            thinking={"type": "adaptive"},
        )


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="cache_ttl"):
        AnthropicProvider(MODEL, cache_ttl="10m", client=anthropic_client(Recorder()))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tokens"):
        AnthropicProvider(MODEL, max_tokens=0, client=anthropic_client(Recorder()))
