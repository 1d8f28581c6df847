"""Gemini 3 tool turns replayed through the Chat Completions path keep their thought signatures.

Rule (ai.google.dev/gemini-api/docs/thought-signatures): "When using Gemini 3 models, you must pass back thought
signatures during function calling, otherwise you will get a validation error (4xx status code)"; on Gemini's
OpenAI-compatible endpoint the signature is the tool call's `extra_content.google.thought_signature`. segue keeps
it on the ToolCallBlock (`signature`, stored with the trace) and sends it back on the gemini vendor's requests.
The twin's Gemini endpoint enforces the rule (tests/twin/test_twin_gemini.py).
"""

from __future__ import annotations

import json

import pytest

from segue._core.contracts import ProviderRequest, ProviderResponse
from segue.generated import Message, TextBlock, ToolCallBlock, ToolDefinition, ToolResultBlock
from segue.generated.converter import get_converter
from segue.providers import OpenAIChatProvider, StreamDone
from segue_twin import Twin

TOOLS = [
    ToolDefinition(name=name, description=name.replace("_", " "), parameters={"type": "object"})
    for name in ("list_tables", "describe_table", "run_query")
]


async def answer(provider: OpenAIChatProvider, messages: list[Message], streaming: bool) -> ProviderResponse:
    request = ProviderRequest(system="You answer questions about the shop.", messages=messages, tools=TOOLS)
    if not streaming:
        return await provider.complete(request)
    done = [item async for item in provider.stream(request) if isinstance(item, StreamDone)]
    return done[0].response


def stored(message: Message) -> Message:
    """The message as the store keeps it (its JSON) and reads it back."""
    conv = get_converter()
    return conv.structure(json.loads(json.dumps(conv.unstructure(message, Message))), Message)


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streamed"])
async def test_a_replayed_gemini_tool_conversation_passes_the_signature_rule(streaming: bool) -> None:
    twin = Twin()
    provider = OpenAIChatProvider("gemini-3-flash", vendor="gemini", client=twin.gemini_client())
    messages = [Message(role="user", content=[TextBlock(text="Which tables are there?")])]
    signed = 0
    for _ in range(5):
        response = await answer(provider, messages, streaming)  # each request replays the turn's earlier calls
        messages.append(stored(response.message))
        calls = [b for b in response.message.content if isinstance(b, ToolCallBlock)]
        if not calls:
            break
        signed += sum(c.signature is not None for c in calls)
        messages.append(Message(role="tool", content=[ToolResultBlock(tool_call_id=c.id, content="[]") for c in calls]))
    else:
        raise AssertionError("the twin's policy answers within five iterations")
    assert signed >= 1, "the twin's Gemini 3 answers signed their calls and segue kept the signatures"
    sent = twin.exchanges[-1].request["messages"]
    replayed = [c for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert replayed and all("thought_signature" in c["extra_content"]["google"] for c in replayed)
    assert all(e.status == 200 for e in twin.exchanges)


async def test_other_vendors_on_the_chat_path_never_see_the_field() -> None:
    """The signature is Gemini's: an OpenAI request replaying the same call leaves extra_content out."""
    twin = Twin()
    call = ToolCallBlock(id="call_1", name="list_tables", arguments={}, signature="sig")
    messages = [
        Message(role="user", content=[TextBlock(text="Which tables are there?")]),
        Message(role="assistant", content=[call]),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="call_1", content="[]")]),
    ]
    await answer(OpenAIChatProvider("gpt-4.1", client=twin.openai_client()), messages, streaming=False)
    sent = twin.exchanges[-1].request["messages"]
    assert [c for m in sent for c in m.get("tool_calls") or [] if "extra_content" in c] == []


async def test_the_vendors_message_reaches_the_error_when_the_signature_is_missing() -> None:
    """Gemini wraps its error in a list ([{"error": {...}}]); the driver still says the vendor's message."""
    from segue.errors import ProviderError

    twin = Twin()
    messages = [
        Message(role="user", content=[TextBlock(text="Which tables are there?")]),
        Message(role="assistant", content=[ToolCallBlock(id="call_1", name="list_tables", arguments={})]),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="call_1", content="[]")]),
    ]
    provider = OpenAIChatProvider("gemini-3-flash", vendor="gemini", client=twin.gemini_client())
    with pytest.raises(ProviderError) as caught:
        await answer(provider, messages, streaming=False)
    assert caught.value.vendor_message.startswith("Function call is missing a thought_signature")
