"""The hand-written wire layer: message grouping per vendor, and canonical -> vendor -> canonical round trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from segue._core.contracts import FRAGMENT_META_KEY, ProviderNote, ProviderRequest
from segue.errors import WireError
from segue.generated import (
    Base64ImageSource,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UrlImageSource,
)
from segue.wire.anthropic import request as anthropic
from segue.wire.openai_chat import request as openai_chat
from segue.wire.openai_responses import request as openai_responses
from segue.wire.openrouter import request as openrouter

PNG = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo="))
URL = ImageBlock(source=UrlImageSource(url="https://example.com/a.png"))


def user(*texts: str, **meta: Any) -> Message:
    return Message(role="user", content=[TextBlock(text=t) for t in texts], meta=meta or None)


def call(i: int) -> ToolCallBlock:
    return ToolCallBlock(id=f"call_{i}", name="lookup", arguments={"q": i})


def result(i: int) -> ToolResultBlock:
    return ToolResultBlock(tool_call_id=f"call_{i}", content=f"r{i}")


# ---- Anthropic ----


def test_anthropic_tool_results_open_the_user_turn_and_roles_alternate() -> None:
    messages = [
        user("q"),
        Message(role="assistant", content=[call(1), call(2)]),
        user("also consider this"),  # an odd order: the user spoke before the results were recorded
        Message(role="tool", content=[result(1), result(2)]),
        Message(role="assistant", content=[ReasoningBlock(vendor="openai", format="openai.reasoning_item", id="rs")]),
        user("next"),
    ]
    wire, anchors = anthropic.build_messages(messages)
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert [b["type"] for b in wire[2]["content"]] == ["tool_result", "tool_result", "text", "text"]
    assert wire[2]["content"][-1]["text"] == "next"
    assert anchors[4] is None  # the assistant message with only foreign reasoning put nothing on the wire


def test_anthropic_drops_empty_text_and_keeps_mid_conversation_system_messages() -> None:
    messages = [user("q", ""), Message(role="system", content=[TextBlock(text="Be formal now.")]), user("x")]
    wire, _ = anthropic.build_messages(messages)
    assert wire == [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {"role": "system", "content": [{"type": "text", "text": "Be formal now."}]},
        {"role": "user", "content": [{"type": "text", "text": "x"}]},
    ]
    with pytest.raises(WireError, match="system message may hold only text"):
        anthropic.build_messages([Message(role="system", content=[call(1)])])


def test_anthropic_images_and_breakpoint_walks_back_from_a_fragment() -> None:
    messages = [
        Message(role="user", content=[TextBlock(text="what is this?"), PNG, URL]),
        user("state", **{FRAGMENT_META_KEY: True}),
    ]
    request = ProviderRequest(system="", stable_head="head", messages=messages, replay_end=1)
    body = anthropic.build_request(request, model="m", max_tokens=5, cache_ttl="5m", thinking=None).body
    assert body["system"] == [{"type": "text", "text": "head", "cache_control": {"type": "ephemeral", "ttl": "5m"}}]
    content = body["messages"][0]["content"]
    assert content[1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    assert content[2] == {
        "type": "image",
        "source": {"type": "url", "url": "https://example.com/a.png"},
        "cache_control": {"type": "ephemeral", "ttl": "5m"},
    }
    assert "cache_control" not in content[3]


# ---- Chat Completions ----


def test_chat_merges_same_role_messages_and_keeps_parts_when_needed() -> None:
    messages = [
        user("first"),
        Message(role="user", content=[TextBlock(text="look:"), PNG]),
        Message(role="assistant", content=[TextBlock(text="a"), TextBlock(text="b"), call(1)]),
        Message(role="tool", content=[result(1), TextBlock(text="tool said more")]),
    ]
    wire, _ = openai_chat.build_messages(messages)
    assert wire == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "first"},
                {"type": "text", "text": "look:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":1}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "r1"},
        {"role": "user", "content": "tool said more"},
    ]


def test_openrouter_only_replays_its_own_signed_reasoning_details() -> None:
    native = {"type": "reasoning.encrypted", "data": "x", "index": 0}
    messages = [
        user("q"),
        Message(
            role="assistant",
            content=[
                ReasoningBlock(vendor="openrouter", format="openrouter.reasoning_text", text="plain"),
                ReasoningBlock(vendor="openrouter", format="openrouter.reasoning_details", native=native),
                ReasoningBlock(vendor="anthropic", format="anthropic.thinking", text="foreign", signature="s"),
                call(1),
            ],
        ),
    ]
    request = ProviderRequest(system="", messages=messages)
    body = openrouter.build_request(
        request, model="x/y", provider_order=None, allow_fallbacks=True, plugins=None, reasoning=None, cache_ttl="5m"
    ).body
    assert body["messages"][1]["reasoning_details"] == [native]
    assert "plain" not in str(body) and "foreign" not in str(body)


# ---- Responses ----


def test_responses_items_follow_block_order() -> None:
    messages = [
        Message(role="user", content=[TextBlock(text="see"), URL]),
        Message(role="system", content=[TextBlock(text="Be formal now.")]),
        Message(role="assistant", content=[TextBlock(text="calling"), call(1)]),
        Message(role="tool", content=[result(1)]),
    ]
    items = [i for m in messages for i in openai_responses.message_items(m, store=False, notes=[])]
    assert items == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"},
            ],
        },
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "Be formal now."}]},
        {"type": "message", "role": "assistant", "content": "calling"},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"q":1}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "r1"},
    ]


def test_responses_with_store_replays_reasoning_by_id() -> None:
    reasoning = ReasoningBlock(vendor="openai", format="openai.reasoning_item", id="rs_1", summary=["s"])
    notes: list[ProviderNote] = []
    items = openai_responses.message_items(Message(role="assistant", content=[reasoning]), store=True, notes=notes)
    assert items == [{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "s"}]}]
    assert notes == []


# ---- round trips: canonical -> vendor -> canonical ----

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
arguments = st.dictionaries(st.text(max_size=10), json_values, max_size=4)
texts = st.text(min_size=1, max_size=40)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=12)
tool_calls = st.builds(ToolCallBlock, id=ids, name=st.sampled_from(["lookup", "run_query"]), arguments=arguments)
MODEL = "m-1"


def _usage(**u: int) -> dict[str, int]:
    return u


anthropic_blocks = st.lists(
    st.one_of(
        st.builds(TextBlock, text=texts),
        tool_calls,
        st.builds(
            ReasoningBlock,
            vendor=st.just("anthropic"),
            model=st.just(MODEL),
            format=st.just("anthropic.thinking"),
            text=st.text(max_size=30),
            signature=texts,
        ),
        st.builds(
            ReasoningBlock,
            vendor=st.just("anthropic"),
            model=st.just(MODEL),
            format=st.just("anthropic.redacted_thinking"),
            redacted_data=texts,
        ),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(anthropic_blocks)
def test_anthropic_round_trip(blocks: list[Any]) -> None:
    original = Message(role="assistant", content=blocks)
    wire, _ = anthropic.build_messages([original])
    data = {"content": wire[0]["content"], "stop_reason": "end_turn", "usage": _usage(input_tokens=1, output_tokens=1)}
    assert anthropic.parse_response(data, model=MODEL).message == original


responses_blocks = st.lists(
    st.one_of(
        st.builds(TextBlock, text=texts),
        tool_calls,
        st.builds(
            ReasoningBlock,
            vendor=st.just("openai"),
            model=st.just(MODEL),
            format=st.just("openai.reasoning_item"),
            id=ids,
            summary=st.lists(texts, max_size=2),
            encrypted_content=texts,
        ),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(responses_blocks)
def test_openai_responses_round_trip(blocks: list[Any]) -> None:
    original = Message(role="assistant", content=blocks)
    items = openai_responses.message_items(original, store=False, notes=[])
    data = {"output": items, "status": "completed", "usage": _usage(input_tokens=1, output_tokens=1)}
    assert openai_responses.parse_response(data, model=MODEL).message == original


def chat_message(reasoning: st.SearchStrategy[list[Any]]) -> st.SearchStrategy[Message]:
    return st.builds(
        lambda r, t, c: Message(role="assistant", content=[*r, *t, *c]),
        reasoning,
        st.lists(st.builds(TextBlock, text=texts), max_size=1),
        st.lists(tool_calls, max_size=3),
    ).filter(lambda m: bool(m.content))


@settings(max_examples=60, deadline=None)
@given(chat_message(st.just([])))
def test_openai_chat_round_trip(original: Message) -> None:
    wire, _ = openai_chat.build_messages([original])
    data = {
        "choices": [{"index": 0, "message": wire[0], "finish_reason": "stop"}],
        "usage": _usage(prompt_tokens=1, completion_tokens=1),
    }
    assert openai_chat.parse_response(data, model=MODEL).message == original


details = st.lists(
    st.builds(
        lambda text, sig, i: ReasoningBlock(
            vendor="openrouter",
            model=MODEL,
            format="openrouter.reasoning_details",
            id=f"r{i}",
            text=text,
            signature=sig,
            native={
                "type": "reasoning.text",
                "id": f"r{i}",
                "text": text,
                "signature": sig,
                "format": "anthropic-claude-v1",
                "index": i,
            },
        ),
        texts,
        texts,
        st.integers(0, 5),
    ),
    max_size=2,
)


@settings(max_examples=60, deadline=None)
@given(chat_message(details), st.booleans())
def test_openrouter_round_trip(original: Message, cached: bool) -> None:
    request = ProviderRequest(system="s", messages=[user("q"), original])
    body = openrouter.build_request(
        request,
        model="anthropic/claude" if cached else "x/y",
        provider_order=None,
        allow_fallbacks=True,
        plugins=None,
        reasoning=None,
        cache_ttl="5m",
    ).body
    message = dict(body["messages"][-1])
    if isinstance(message["content"], list):  # parts form (with a cache breakpoint): what comes back is text
        message["content"] = "".join(p["text"] for p in message["content"])
    data = {
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": _usage(prompt_tokens=1, completion_tokens=1),
    }
    assert openrouter.parse_response(data, model=MODEL).message == original
