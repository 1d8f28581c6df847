"""End to end against segue's twin (an offline emulator of the vendor APIs, their validation and caches): two runs
of a tool loop, the second replaying the first, through each driver, plain and streamed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from segue._core.contracts import FRAGMENT_META_KEY, Provider, ProviderRequest, ProviderResponse
from segue.generated import Message, TextBlock, ToolCallBlock, ToolDefinition, ToolResultBlock
from segue.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider, StreamDone
from segue_twin import Twin

SYSTEM = "You answer questions about the shop database, precisely and briefly. " * 150  # above cache minimums
TOOLS = [
    ToolDefinition(name=name, description=name.replace("_", " "), parameters={"type": "object"})
    for name in ("list_tables", "describe_table", "run_query")
]
RESULTS = {
    "list_tables": ["customers", "orders", "order_items", "products"],
    "describe_table": [{"name": "id", "type": "INTEGER"}, {"name": "country", "type": "TEXT"}],
    "run_query": [{"customers": 42}],
}


def driver(kind: str, twin: Twin) -> Provider:
    if kind == "anthropic":
        return AnthropicProvider("claude-sonnet-4-6", thinking={"type": "adaptive"}, client=twin.anthropic_client())
    if kind == "responses":
        return OpenAIResponsesProvider("gpt-5", reasoning={"effort": "low"}, client=twin.openai_client())
    return OpenAIChatProvider("gpt-4.1", client=twin.openai_client())


async def call(provider: Provider, request: ProviderRequest, streaming: bool) -> ProviderResponse:
    if not streaming:
        return await provider.complete(request)
    done = [item async for item in provider.stream(request) if isinstance(item, StreamDone)]
    assert len(done) == 1
    return done[0].response


async def run(
    provider: Provider, question: str, history: list[Message], *, streaming: bool, append_only: bool
) -> tuple[list[Message], list[ProviderResponse]]:
    """One agent run: the replayed history, the question, and a runtime-state fragment per iteration."""
    messages = [*history, Message(role="user", content=[TextBlock(text=question)])]
    responses = []
    for iteration in range(1, 6):
        fragment = Message(
            role="user", content=[TextBlock(text=f"iteration {iteration} of 5")], meta={FRAGMENT_META_KEY: True}
        )
        if append_only:
            messages.append(fragment)
        request = ProviderRequest(
            system=SYSTEM,
            stable_head="Tables change rarely.",
            messages=messages if append_only else [*messages, fragment],
            tools=TOOLS,
            replay_end=len(history) - 1 if history else None,
        )
        response = await call(provider, request, streaming)
        responses.append(response)
        messages.append(response.message)
        calls = [b for b in response.message.content if isinstance(b, ToolCallBlock)]
        if not calls:
            return messages, responses
        results = [ToolResultBlock(tool_call_id=c.id, content=json.dumps(RESULTS[c.name])) for c in calls]
        messages.append(Message(role="tool", content=results))
    raise AssertionError("the twin's policy should answer within five iterations")


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("kind", ["anthropic", "responses", "chat"])
async def test_replayed_conversation_is_accepted_and_read_from_cache(kind: str, streaming: bool) -> None:
    twin = Twin()
    provider = driver(kind, twin)
    history, first = await run(provider, "Which tables are there?", [], streaming=streaming, append_only=True)
    _, second = await run(provider, "How many customers are there?", history, streaming=streaming, append_only=True)

    calls = [*first, *second]
    assert all(r.notes == [] for r in calls), [r.notes for r in calls]
    assert calls[0].usage.cache_read_tokens == 0
    for r in calls[1:]:
        # Every later request is an extension of the one before it: most of the prompt comes from the cache.
        assert r.usage.cache_read_tokens is not None and r.usage.cache_read_tokens > r.usage.input_tokens * 0.8
    if kind == "anthropic":
        assert any(b["type"] == "thinking" for m in second[0].request_body["messages"] for b in m["content"]), (
            "replayed thinking is on the wire"
        )
        assert all(r.input_transformations == [] for r in calls)


async def test_moving_the_fragment_invalidates_replayed_thinking_and_the_driver_says_so() -> None:
    """Replace-style layout changes the prefix a thinking block was signed under: the vendor drops the block and
    reports it, and the driver turns the report into a vendor-dropped note pointing at the message it came from."""
    twin = Twin()
    provider = driver("anthropic", twin)
    _, responses = await run(provider, "Which tables are there?", [], streaming=False, append_only=False)
    assert len(responses) >= 2
    dropped: list[Any] = responses[1].input_transformations
    assert [t["type"] for t in dropped] == ["thinking_dropped"]
    (note,) = responses[1].notes
    assert note.kind == "vendor-dropped" and dropped[0]["path"] in note.message
    assert note.message_index is not None and note.message_index > 0
