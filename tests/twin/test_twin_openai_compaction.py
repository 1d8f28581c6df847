"""The twin's OpenAI server-side compaction (Responses `context_management`), through the official SDK client.

developers.openai.com/api/docs/guides/compaction: "You can enable server-side compaction in a Responses create
request (POST /responses or client.responses.create) by setting context_management with compact_threshold. When
the rendered token count crosses the configured threshold, the server runs server-side compaction"; "The response
stream includes the encrypted compaction item"; "you can drop items that came before the most recent compaction
item ... The latest compaction item carries the necessary context to continue the conversation". The pinned SDK's
ContextManagement.type: "Currently only 'compaction' is supported".
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from segue import Agent
from segue.generated import CompactionBlock
from segue.providers import OpenAIResponsesProvider
from segue_twin import ScriptedPolicy, Twin

MODEL = "gpt-5.4"
LONG = "The order history of the customer, line by line. " * 60  # ~750 tokens


async def test_past_the_threshold_the_output_opens_with_an_encrypted_compaction_item() -> None:
    client = Twin(policy=ScriptedPolicy(["ok"])).openai_client()
    response = await client.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": LONG}, {"role": "user", "content": "Which order was last?"}],
        context_management=[{"type": "compaction", "compact_threshold": 500}],
    )
    first = response.output[0]
    assert first.type == "compaction" and first.encrypted_content and LONG[:40] not in first.encrypted_content
    assert response.output[-1].type == "message"


async def test_below_the_threshold_and_without_one_nothing_is_compacted() -> None:
    client = Twin(policy=ScriptedPolicy(["ok", "ok"])).openai_client()
    for management in ([{"type": "compaction", "compact_threshold": 100_000}], [{"type": "compaction"}]):
        response = await client.responses.create(
            model=MODEL,
            input=LONG,
            context_management=management,  # type: ignore[arg-type]
        )
        assert "compaction" not in [item.type for item in response.output]


async def test_an_entry_other_than_compaction_is_refused() -> None:
    client = Twin().openai_client()
    with pytest.raises(openai.BadRequestError, match="only 'compaction' is supported"):
        await client.responses.create(model=MODEL, input="hi", context_management=[{"type": "clear_tool_uses"}])


async def test_items_before_the_latest_compaction_item_are_not_read() -> None:
    """The prompt starts at the compaction item: the same request with or without the items before it costs the
    same input tokens."""
    client = Twin(policy=ScriptedPolicy(["ok"] * 3)).openai_client()
    first = await client.responses.create(
        model=MODEL, input=LONG, context_management=[{"type": "compaction", "compact_threshold": 500}]
    )
    item = first.output[0].model_dump(exclude_none=True)
    follow: list[Any] = [item, {"role": "user", "content": "And its total?"}]
    full = await client.responses.create(model=MODEL, input=[{"role": "user", "content": LONG}, *follow])
    short = await client.responses.create(model=MODEL, input=follow)
    assert full.usage is not None and short.usage is not None
    assert full.usage.input_tokens == short.usage.input_tokens


async def test_an_agent_keeps_the_compaction_item_and_sends_it_back(sqlite_store: Any) -> None:
    twin = Twin(policy=ScriptedPolicy(["Noted.", "Order #42."]))
    agent = Agent(
        OpenAIResponsesProvider(MODEL, client=twin.openai_client()),
        store=sqlite_store,
        model_settings={"compaction": {"trigger_tokens": 500}},
    )
    first = await agent.run(LONG)
    answer = sqlite_store.get_run(first.run_id).traces[-1].message
    (block,) = [b for b in answer.content if isinstance(b, CompactionBlock)]
    assert block.vendor == "openai" and block.encrypted_content and block.id
    second = await agent.run("Which order was last?", runs=[first.run_id], replay_last="all")
    sent = sqlite_store.get_run(second.run_id).llm_interactions[0].provider_request
    assert {"type": "compaction", "encrypted_content": block.encrypted_content, "id": block.id} in sent["input"]
    assert sent["context_management"] == [{"type": "compaction", "compact_threshold": 500}]


async def test_a_streamed_compaction_item_reads_as_the_unstreamed(sqlite_store: Any) -> None:
    """ "The response stream includes the encrypted compaction item": segue's stream assembler keeps it, so the
    stored message equals a non-streamed run's (the twin seals with a per-twin secret: one twin serves both)."""
    twin = Twin(policy=ScriptedPolicy(["Noted.", "Noted."]))
    agent = Agent(
        OpenAIResponsesProvider(MODEL, client=twin.openai_client()),
        store=sqlite_store,
        model_settings={"compaction": {"trigger_tokens": 500}},
    )
    plain = (await agent.run(LONG)).run_id
    streamed = [e async for e in agent.stream(LONG)][-1].run_id
    one, two = (sqlite_store.get_run(r).traces[-1].message for r in (plain, streamed))
    assert [type(b) for b in one.content] == [type(b) for b in two.content]
    assert isinstance(two.content[0], CompactionBlock) and two.content[0].encrypted_content


async def test_responses_compact_answers_the_user_messages_and_one_compaction_item() -> None:
    """The pinned SDK's CompactedResponse: `object` "Always `response.compaction`"; output "a list of all user
    messages, followed by a single compaction item"; usage the "Token accounting for the compaction pass". The item
    continues a later conversation like one made by server-side compaction."""
    client = Twin(policy=ScriptedPolicy(["The last order was #42."])).openai_client()
    user = [{"role": "user", "content": LONG}, {"role": "assistant", "content": "Noted."}]
    compacted = await client.responses.compact(model=MODEL, input=[*user, {"role": "user", "content": "Thanks."}])
    assert compacted.object == "response.compaction"
    assert [(i.type, getattr(i, "role", None)) for i in compacted.output] == [
        ("message", "user"),
        ("message", "user"),
        ("compaction", None),
    ]
    assert compacted.usage.input_tokens > 500 and compacted.usage.output_tokens > 0
    item = compacted.output[-1].model_dump(exclude_none=True)
    answer = await client.responses.create(model=MODEL, input=[item, {"role": "user", "content": "Which order?"}])
    assert answer.output_text == "The last order was #42."
