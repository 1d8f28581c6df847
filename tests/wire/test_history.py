"""history= in the ecosystem's own shapes: the vendor SDKs' message dicts (built as their TypedDicts and checked
against them), their response objects and `model_dump()`s, converted once by segue.wire.history and replayed
faithfully."""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs
import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

from segue import Agent
from segue.demo.chat import demo_tools
from segue.demo.sample_tools import anthropic_tool_loop, call_shop_tool, responses_tool_loop
from segue.errors import InputError
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
from segue.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider
from segue.run.conversation import as_history
from segue_twin import Twin

PNG = "iVBORw0KGgo="
Q1 = "How many customers are in each country?"
Q2 = "Which customers placed more than 3 orders?"


def sdk_shape(adapter: TypeAdapter[Any], value: Any) -> Any:
    """``value`` validated as the SDK's TypedDict, with its lazily validated iterables drained (pydantic checks
    `Iterable[...]` fields only when they are read), so a test input that is not the SDK's shape fails here."""

    def drain(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: drain(x) for k, x in v.items()}
        if isinstance(v, list | tuple) or type(v).__name__ == "ValidatorIterator":
            return [drain(x) for x in v]
        return v

    return drain(adapter.validate_python(value))


ANTHROPIC: TypeAdapter[Any] = TypeAdapter(MessageParam)
CHAT: TypeAdapter[Any] = TypeAdapter(ChatCompletionMessageParam)
RESPONSES: TypeAdapter[Any] = TypeAdapter(ResponseInputItemParam)


def test_role_and_string_content_is_the_shape_everyone_shares() -> None:
    history = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    for item in history:  # valid for all three SDKs
        sdk_shape(ANTHROPIC, item), sdk_shape(CHAT, item), sdk_shape(RESPONSES, item)
    assert as_history(history) == [
        Message(role="user", content=[TextBlock(text="Hi")]),
        Message(role="assistant", content=[TextBlock(text="Hello!")]),
    ]


def test_anthropic_message_params_with_every_block_segue_holds() -> None:
    params: list[MessageParam] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Compare these", "cache_control": {"type": "ephemeral"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/b.png"}},
                {"type": "text", "text": "two pictures."},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Look both up.", "signature": "c2ln"},
                {"type": "redacted_thinking", "data": "b3BhcXVl"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "a"}},
                {"type": "tool_use", "id": "toolu_2", "name": "lookup", "input": {"q": "b"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "B1"}, {"type": "text", "text": "B2"}],
                    "is_error": True,
                },
            ],
        },
        {"role": "assistant", "content": "They differ."},
    ]
    history = [sdk_shape(ANTHROPIC, p) for p in params]
    assert as_history(history) == [
        Message(
            role="user",
            content=[
                TextBlock(text="Compare these"),
                ImageBlock(source=Base64ImageSource(media_type="image/png", data=PNG)),
                ImageBlock(source=UrlImageSource(url="https://example.com/b.png")),
                TextBlock(text="two pictures."),
            ],
        ),
        Message(
            role="assistant",
            content=[
                ReasoningBlock(vendor="anthropic", format="anthropic.thinking", text="Look both up.", signature="c2ln"),
                ReasoningBlock(vendor="anthropic", format="anthropic.redacted_thinking", redacted_data="b3BhcXVl"),
                TextBlock(text="Checking."),
                ToolCallBlock(id="toolu_1", name="lookup", arguments={"q": "a"}),
                ToolCallBlock(id="toolu_2", name="lookup", arguments={"q": "b"}),
            ],
        ),
        Message(
            role="tool",
            content=[
                ToolResultBlock(tool_call_id="toolu_1", content="A"),
                ToolResultBlock(tool_call_id="toolu_2", content="B1\nB2", is_error=True),
            ],
        ),
        Message(role="assistant", content=[TextBlock(text="They differ.")]),
    ]


def test_chat_completion_message_params_with_tool_calls_images_and_refusals() -> None:
    params: list[ChatCompletionMessageParam] = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather here?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/sky.jpg"}},
            ],
            "name": "ana",
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Oslo"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "sun"}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Rain in Oslo, "}, {"type": "text", "text": "sun."}],
        },
        {"role": "user", "content": "Anything else?"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot say more."}]},
    ]
    assert as_history([sdk_shape(CHAT, p) for p in params]) == [
        Message(
            role="user",
            content=[
                TextBlock(text="Weather here?"),
                ImageBlock(source=Base64ImageSource(media_type="image/png", data=PNG)),
                ImageBlock(source=UrlImageSource(url="https://example.com/sky.jpg")),
            ],
        ),
        Message(
            role="assistant",
            content=[
                ToolCallBlock(id="call_1", name="weather", arguments={"city": "Oslo"}),
                ToolCallBlock(id="call_2", name="weather", arguments={}),
            ],
        ),
        Message(
            role="tool",
            content=[
                ToolResultBlock(tool_call_id="call_1", content="rain"),
                ToolResultBlock(tool_call_id="call_2", content="sun"),
            ],
        ),
        Message(role="assistant", content=[TextBlock(text="Rain in Oslo, "), TextBlock(text="sun.")]),
        Message(role="user", content=[TextBlock(text="Anything else?")]),
        Message(role="assistant", content=[TextBlock(text="I cannot say more.")]),
    ]


def test_responses_input_items_join_into_turns() -> None:
    items: list[ResponseInputItemParam] = [
        {"role": "user", "content": [{"type": "input_text", "text": "Sum a and b"}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Look up both."}],
            "encrypted_content": "opaque",
        },
        {"type": "function_call", "call_id": "call_a", "name": "get", "arguments": '{"k":"a"}', "id": "fc_1"},
        {"type": "function_call", "call_id": "call_b", "name": "get", "arguments": '{"k":"b"}'},
        {"type": "function_call_output", "call_id": "call_a", "output": "1"},
        {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "2"}]},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "3", "annotations": []}],
        },
    ]
    assert as_history([sdk_shape(RESPONSES, i) for i in items]) == [
        Message(role="user", content=[TextBlock(text="Sum a and b")]),
        Message(
            role="assistant",
            content=[
                ReasoningBlock(
                    vendor="openai",
                    format="openai.reasoning_item",
                    id="rs_1",
                    summary=["Look up both."],
                    encrypted_content="opaque",
                ),
                ToolCallBlock(id="call_a", name="get", arguments={"k": "a"}),
                ToolCallBlock(id="call_b", name="get", arguments={"k": "b"}),
            ],
        ),
        Message(
            role="tool",
            content=[
                ToolResultBlock(tool_call_id="call_a", content="1"),
                ToolResultBlock(tool_call_id="call_b", content="2"),
            ],
        ),
        Message(role="assistant", content=[TextBlock(text="3")]),
    ]


def test_segue_messages_and_their_json_are_kept_exactly() -> None:
    typed = [
        Message(role="user", content=[TextBlock(text="")], meta={"app": 1}),
        Message(role="assistant", content=[TextBlock(text="ok")]),
    ]
    as_json = [{"role": "user", "content": [{"type": "text", "text": ""}], "meta": {"app": 1}}, typed[1]]
    assert as_history(typed) == typed == as_history(as_json)


def test_reasoning_segue_cannot_replay_is_left_out_and_logged_never_text(caplog: pytest.LogCaptureFixture) -> None:
    history = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "secret", "signature": ""}, {"type": "text", "text": "a1"}],
        },
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2", "reasoning_content": "secret too"},  # vLLM's Chat extra
        {"role": "user", "content": "q3"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "secret three"}]},  # no id
        {"role": "assistant", "content": "a3"},
        {"role": "user", "content": "q4"},
        {
            "role": "assistant",
            "content": "a4",
            "reasoning_details": [
                {"type": "reasoning.text", "text": "kept", "signature": "s", "format": "x", "index": 0}
            ],
        },
    ]
    with caplog.at_level(logging.WARNING, logger="segue.history"):
        messages = as_history(history)
    assert [m.content for m in messages if m.role == "assistant"][:3] == [
        [TextBlock(text="a1")],
        [TextBlock(text="a2")],
        [TextBlock(text="a3")],
    ]
    assert "secret" not in json.dumps([str(m) for m in messages])
    (record,) = caplog.records
    assert record.getMessage().startswith("history: 3 reasoning item(s) left out")
    assert "history[1].content[0]" in record.getMessage() and "history[5]" in record.getMessage()
    kept = messages[-1].content[0]
    assert isinstance(kept, ReasoningBlock) and kept.format == "openrouter.reasoning_details" and kept.text == "kept"


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ([{"role": "system", "content": "Be brief."}], r"history\[0\] has role 'system'; put system text in the agent"),
        ([{"role": "developer", "content": "x"}], r"history\[0\] has role 'developer'"),
        (
            [{"role": "user", "content": [{"type": "document", "source": {"type": "text", "data": "x"}}]}],
            r"history\[0\]\.content\[0\] is a 'document' part, which segue's messages cannot hold",
        ),
        (
            [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}}]}],
            r"history\[0\]\.content\[0\] is a 'input_audio' part",
        ),
        ([{"type": "item_reference", "id": "msg_1"}], r"history\[0\] is an item_reference.*pass the item itself"),
        ([{"type": "web_search_call", "id": "ws_1"}], r"history\[0\] is a 'web_search_call' item.*history= takes"),
        (
            [{"role": "user", "content": [{"type": "input_image", "file_id": "file_1", "detail": "auto"}]}],
            r"history\[0\]\.content\[0\] has no image URL",
        ),
        (["hello"], r"history\[0\] is a str, not a message; history= takes segue Messages"),
        ([{"text": "hi"}], r"history\[0\] is not a message: it has neither a 'role' nor a Responses item 'type'"),
        (
            [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}],
            r"history\[1\] could not be read \(openai_chat 'function' item: .*\); history= takes",
        ),
        (
            [
                {"role": "user", "content": "q"},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": "r"},
                {"role": "user", "content": "next"},
            ],
            r"history\[3\] is a user message after a tool message",  # the item's index, not the merged message's
        ),
        (
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "tool_call", "id": "c"}]}],
            r"history\[1\]\.content\[0\] could not be read \(required field missing @ \$\.name",
        ),
        (
            [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "tool_result"}]}],
            r"history\[1\]\.content\[0\] is a tool_result block in an assistant message",
        ),
    ],
)
def test_a_shape_segue_cannot_read_is_an_error_naming_the_index(history: list[Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        as_history(history)


async def test_anthropic_history_from_the_official_client_replays_its_thinking_faithfully() -> None:
    """A conversation held by the app as Anthropic dicts (thinking blocks with signatures, tool_use, tool_result)
    goes on the wire unchanged, so the twin (which binds each signature to its prefix) keeps every thinking block
    and the model does not re-explore the facts the history already holds."""
    twin = Twin()
    thinking = {"type": "enabled", "budget_tokens": 1024}
    provider = AnthropicProvider("claude-sonnet-4-6", thinking=thinking, client=twin.anthropic_client())
    agent = Agent(provider, "You analyse the shop database.", demo_tools())
    await agent.run("Which tables are there?")
    sent = twin.exchanges[0].request
    conversation: list[dict[str, Any]] = [{"role": "user", "content": Q1}]
    responses = await anthropic_tool_loop(
        twin.anthropic_client(),
        messages=conversation,
        model="claude-sonnet-4-6",
        max_tokens=4096,
        system=sent["system"],
        tools=sent["tools"],
        thinking=thinking,
    )
    for message in conversation:
        sdk_shape(ANTHROPIC, message)
    # The response object itself, and its full model_dump() (None fields included), read the same, with the model.
    expected = as_history(conversation)[-1]
    for answer in (responses[-1], responses[-1].model_dump()):
        last = as_history([*conversation[:-1], answer])[-1]
        assert last.content[1:] == expected.content[1:] and last.content[0] == attrs.evolve(
            expected.content[0], model="claude-sonnet-4-6"
        )
    before = len(twin.exchanges)
    result = await agent.run(Q2, history=conversation)
    assert result.status == "success"
    first = twin.exchanges[before]
    replayed = [_without_cache_control(m) for m in first.request["messages"][: len(conversation)]]
    assert replayed == [{"role": "user", "content": [{"type": "text", "text": Q1}]}, *conversation[1:]]
    assert first.response["input_transformations"] == []  # no thinking block was dropped
    calls = [e.response["content"][-1].get("name") for e in list(twin.exchanges)[before:]]
    assert calls == ["describe_table", "run_query", None]  # customers was described in the history


async def test_responses_history_from_the_official_client_replays_its_reasoning_items() -> None:
    twin = Twin()
    agent = Agent(
        OpenAIResponsesProvider("gpt-5", reasoning={"effort": "low"}, client=twin.openai_client()), "p", demo_tools()
    )
    await agent.run("Which tables are there?")
    sent = twin.exchanges[0].request
    items: list[dict[str, Any]] = [{"role": "user", "content": Q1}]
    responses = await responses_tool_loop(
        twin.openai_client(), items=items, model="gpt-5", tools=sent["tools"], store=False, reasoning={"effort": "low"}
    )
    history: list[Any] = [*items[:1], *(json.loads(json.dumps(i)) for i in items[1:])]
    for item in history:
        sdk_shape(RESPONSES, item)
    history[-1] = responses[-1].output[-1]  # an SDK object as it came back works too
    before = len(twin.exchanges)
    result = await agent.run(Q2, history=history)
    assert result.status == "success"
    sent_items = twin.exchanges[before].request["input"]
    reasoning = [(i["id"], i["encrypted_content"]) for i in sent_items if i["type"] == "reasoning"]
    original = [(i["id"], i["encrypted_content"]) for i in items if i.get("type") == "reasoning"]
    assert reasoning[: len(original)] == original and len(original) == 4
    assert twin.exchanges[before].response["output"][-1]["name"] == "describe_table"


async def test_chat_history_from_response_objects_and_their_dumps() -> None:
    twin = Twin()
    agent = Agent(OpenAIChatProvider("gpt-4.1", client=twin.openai_client()), "p", demo_tools())
    await agent.run("Which tables are there?")
    tools = twin.exchanges[0].request["tools"]
    client = twin.openai_client()
    messages: list[Any] = [{"role": "user", "content": Q1}]
    for _ in range(5):
        completion = await client.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools)
        message = completion.choices[0].message
        messages.append(message.model_dump() if len(messages) % 2 else message)  # dumps and objects, mixed
        for call in message.tool_calls or []:
            text, _ = call_shop_tool(call.function.name, json.loads(call.function.arguments))  # type: ignore[union-attr]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        if not message.tool_calls:
            break
    converted = as_history(messages)
    assert [m.role for m in converted] == ["user", *["assistant", "tool"] * 3, "assistant"]
    before = len(twin.exchanges)
    result = await agent.run(Q2, history=messages)
    assert result.status == "success"
    wire = twin.exchanges[before].request["messages"]
    calls = [c["id"] for m in wire if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    assert calls[:3] == [c["id"] for m in converted for c in _tool_calls(m)]


def _tool_calls(message: Message) -> list[dict[str, Any]]:
    return [{"id": b.id} for b in message.content if isinstance(b, ToolCallBlock)]


def _without_cache_control(message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    if isinstance(content, list):
        content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
    return {**message, "content": content}


async def test_the_history_example_in_docs_replay_md_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    import ast
    import re

    from tests._support.environment import REPO

    page = (REPO / "docs" / "replay.md").read_text()
    section = page[page.index("## `history=`") :]
    example = re.search(r"```python\n(.+?)```", section, flags=re.S)
    assert example is not None
    namespace: dict[str, Any] = {}
    await eval(compile(example.group(1), "docs/replay.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), namespace)
    result = namespace["result"]
    assert result.status == "success" and result.answer.startswith("Customers per country:")
    assert result.iterations == 3  # describe_table, run_query, answer: no list_tables, the history had the tables
    printed = capsys.readouterr().out
    assert printed.startswith("Customers per country:\n- country: ")
