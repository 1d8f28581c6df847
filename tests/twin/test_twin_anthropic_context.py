"""The twin's Anthropic context management, through the official SDK's beta client: server-side compaction
(`compact_20260112`) and context editing (`clear_tool_uses_20250919`, `clear_thinking_20251015`).

Sources (quoted in segue_twin/anthropic_context.py, and here where a test holds the rule):
- platform.claude.com/docs/en/build-with-claude/compaction: "Include the beta header compact-2026-01-12"; the API
  "Detects when input tokens exceed your specified trigger threshold. Generates a summary of the current
  conversation. Creates a compaction block containing the summary. Continues the response with the compacted
  context"; "The API automatically drops all message blocks prior to the compaction block".
- the pinned SDK's BetaUsage.iterations: "A `compaction` entry's tokens are not included in the top-level `usage`
  fields"; BetaStopReason has "compaction"; BetaCompact20260112EditParam.pause_after_compaction: "Whether to pause
  after compaction and return the compaction block to the user".
- platform.claude.com/docs/en/build-with-claude/context-editing: "use the beta header
  context-management-2025-06-27"; edits are "Applied before the prompt reaches Claude"; the pinned SDK's
  BetaContextManagementResponse.applied_edits.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import attrs
import pytest

from segue._core.tokens import count_json
from segue_twin import ScriptedPolicy, Twin
from segue_twin.anthropic_context import CLEARED

MODEL = "claude-sonnet-4-6"
COMPACT = "compact-2026-01-12"
EDITING = "context-management-2025-06-27"
LONG = "The order history of the customer, line by line. " * 60  # ~750 tokens


def _twin(answers: int = 10) -> anthropic.AsyncAnthropic:
    return Twin(policy=ScriptedPolicy(["ok"] * answers)).anthropic_client()


def _conversation() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": LONG}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted."}]},
        {"role": "user", "content": [{"type": "text", "text": "Which order was last?"}]},
    ]


async def test_past_the_trigger_the_response_opens_with_a_compaction_block_priced_in_iterations() -> None:
    client = _twin()
    answer = await client.beta.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=_conversation(),  # type: ignore[arg-type]
        betas=[COMPACT],
        context_management={"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 500}}]},
    )
    first = answer.content[0]
    assert first.type == "compaction" and first.content and "Which order was last?" in first.content
    assert answer.content[-1].type == "text" and answer.stop_reason == "end_turn"  # it continued
    iterations = answer.usage.iterations or []
    assert [i.type for i in iterations] == ["compaction", "message"]
    summary, message = iterations
    whole = sum(count_json(m["content"][0]) for m in _conversation())
    assert summary.input_tokens + summary.cache_read_input_tokens + summary.cache_creation_input_tokens == whole
    # The top-level usage is the message iteration's, on the compacted context, not the summary's.
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (message.input_tokens, message.output_tokens)
    assert message.input_tokens < whole


async def test_below_the_trigger_nothing_is_compacted() -> None:
    client = _twin()
    answer = await client.beta.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=_conversation(),  # type: ignore[arg-type]
        betas=[COMPACT],
        context_management={"edits": [{"type": "compact_20260112"}]},  # the default trigger: 150,000 tokens
    )
    assert [b.type for b in answer.content] == ["text"] and answer.usage.iterations is None


async def test_pause_after_compaction_returns_the_block_alone() -> None:
    client = _twin()
    answer = await client.beta.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=_conversation(),  # type: ignore[arg-type]
        betas=[COMPACT],
        context_management={
            "edits": [
                {
                    "type": "compact_20260112",
                    "trigger": {"type": "input_tokens", "value": 500},
                    "pause_after_compaction": True,
                }
            ]
        },
    )
    assert [b.type for b in answer.content] == ["compaction"] and answer.stop_reason == "compaction"
    assert [i.type for i in answer.usage.iterations or []] == ["compaction"]
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (0, 0)


async def test_blocks_before_a_compaction_block_are_dropped_and_the_cached_prefix_moves() -> None:
    """The next request sends the compaction block back; everything before it is dropped, so the prompt (and what
    the cache reads) is the compaction block on."""
    client = _twin()
    block = {"type": "compaction", "content": "Summary: the last order was #42."}
    messages = [
        *_conversation(),
        {"role": "assistant", "content": [block, {"type": "text", "text": "Order #42."}]},
        {"role": "user", "content": [{"type": "text", "text": "And its total?"}]},
    ]
    answer = await client.beta.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=messages,
        betas=[COMPACT],  # type: ignore[arg-type]
    )
    kept = (
        count_json(block) + count_json({"type": "text", "text": "Order #42."}) + count_json(messages[-1]["content"][0])
    )
    assert answer.usage.input_tokens == kept


@pytest.mark.parametrize(
    ("edit", "beta"),
    [({"type": "compact_20260112"}, COMPACT), ({"type": "clear_tool_uses_20250919"}, EDITING)],
)
async def test_an_edit_without_its_beta_is_refused(edit: dict[str, Any], beta: str) -> None:
    client = _twin()
    with pytest.raises(anthropic.BadRequestError, match=beta):
        await client.beta.messages.create(
            model=MODEL,
            max_tokens=64,
            messages=_conversation(),  # type: ignore[arg-type]
            context_management={"edits": [edit]},  # type: ignore[list-item]
        )


def _tool_conversation(uses: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Look everything up."}]}]
    for i in range(uses):
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "lookup", "input": {"n": i}}]}
        )
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": LONG}]})
    messages[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    return messages


TOOLS = [{"name": "lookup", "description": "Look up.", "input_schema": {"type": "object", "properties": {}}}]
CLEAR = {
    "type": "clear_tool_uses_20250919",
    "trigger": {"type": "input_tokens", "value": 1_000},
    "keep": {"type": "tool_uses", "value": 1},
}

KEEP_TWO = {**CLEAR, "keep": {"type": "tool_uses", "value": 2}}


async def test_clear_tool_uses_clears_the_oldest_results_and_reports_it() -> None:
    client = _twin()
    answer = await client.beta.messages.create(
        model=MODEL,
        max_tokens=64,
        tools=TOOLS,  # type: ignore[arg-type]
        messages=_tool_conversation(4),  # type: ignore[arg-type]
        betas=[EDITING],
        context_management={"edits": [CLEAR]},  # type: ignore[list-item]
    )
    assert answer.context_management is not None
    (applied,) = answer.context_management.applied_edits
    cleared = count_json({"type": "tool_result", "tool_use_id": "t0", "content": LONG}) - count_json(
        {"type": "tool_result", "tool_use_id": "t0", "content": CLEARED}
    )
    assert (applied.type, applied.cleared_tool_uses, applied.cleared_input_tokens) == (
        "clear_tool_uses_20250919",
        3,
        3 * cleared,
    )


async def test_an_applied_clearing_moves_the_cached_prefix() -> None:
    """The edit applies before the prompt reaches the model (and its cache): the prefix cached without the edit is
    not read by the edited prompt; the edited prompt's own entry is read by the next identical request. (Two
    results kept, so the edited prompt stays above the model's 1,024-token cache minimum.)"""
    client = _twin()
    plain = await client.beta.messages.create(
        model=MODEL,
        max_tokens=64,
        tools=TOOLS,
        messages=_tool_conversation(6),  # type: ignore[arg-type]
    )
    assert plain.usage.cache_creation_input_tokens and not plain.usage.cache_read_input_tokens

    async def edited() -> Any:
        return await client.beta.messages.create(
            model=MODEL,
            max_tokens=64,
            tools=TOOLS,  # type: ignore[arg-type]
            messages=_tool_conversation(6),  # type: ignore[arg-type]
            betas=[EDITING],
            context_management={"edits": [KEEP_TWO]},  # type: ignore[list-item]
        )

    first, second = await edited(), await edited()
    assert not first.usage.cache_read_input_tokens and first.usage.cache_creation_input_tokens
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


async def test_clear_at_least_leaves_the_prompt_alone_when_too_little_would_go() -> None:
    client = _twin()
    answer = await client.beta.messages.create(
        model=MODEL,
        max_tokens=64,
        tools=TOOLS,  # type: ignore[arg-type]
        messages=_tool_conversation(4),  # type: ignore[arg-type]
        betas=[EDITING],
        context_management={"edits": [{**CLEAR, "clear_at_least": {"type": "input_tokens", "value": 1_000_000}}]},  # type: ignore[list-item]
    )
    assert answer.context_management is None


async def test_an_agent_stores_the_compaction_block_replays_it_and_prices_the_summary(sqlite_store: Any) -> None:
    """Through segue: the compaction block is the assistant message's CompactionBlock, the next run's request
    carries it back (where the twin drops everything before it), and the call's cost includes the summary's
    sampling (usage.iterations), which the top-level usage leaves out."""
    from segue import Agent
    from segue.catalog import Catalog
    from segue.generated import CompactionBlock
    from segue.providers import AnthropicProvider

    twin = Twin(policy=ScriptedPolicy(["Noted.", "Order #42.", "18 EUR."]))
    agent = Agent(
        AnthropicProvider(MODEL, client=twin.anthropic_client()),
        store=sqlite_store,
        model_settings={"compaction": {"trigger_tokens": 500}},
    )
    first = await agent.run(LONG)  # ~750 tokens: past the trigger
    stored = sqlite_store.get_run(first.run_id)
    answer = stored.traces[-1].message
    (block,) = [b for b in answer.content if isinstance(b, CompactionBlock)]
    assert block.vendor == "anthropic" and block.content and "order history" in block.content
    (call,) = stored.llm_interactions
    assert call.usage.compaction_iterations and call.usage.compaction_iterations[0].input_tokens > 500
    catalog = Catalog.load(env=False)
    top = catalog.cost(attrs.evolve(call.usage, compaction_iterations=None), MODEL, "anthropic")
    assert first.cost is not None and first.cost.twin_usd == pytest.approx(
        top + catalog.cost(call.usage.compaction_iterations[0], MODEL, "anthropic")
    )
    second = await agent.run("Which order was last?", runs=[first.run_id], replay_last="all")
    sent = sqlite_store.get_run(second.run_id).llm_interactions[0].provider_request
    blocks = [b for m in sent["messages"] for b in m["content"]]
    assert {"type": "compaction", "content": block.content} in [
        {k: v for k, v in b.items() if k != "cache_control"} for b in blocks
    ]
    assert sent["context_management"] == {
        "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 500}}]
    }


async def test_a_run_paused_after_compaction_goes_on_with_the_block(sqlite_store: Any) -> None:
    """pause_after_compaction: "Whether to pause after compaction and return the compaction block to the user"
    (the pinned SDK's BetaCompact20260112EditParam); the run is not over: segue sends the block back and the model
    answers from it."""
    from segue import Agent
    from segue.providers import AnthropicProvider

    twin = Twin(policy=ScriptedPolicy(["The last order was #42."]))
    agent = Agent(
        AnthropicProvider(MODEL, client=twin.anthropic_client()),
        store=sqlite_store,
        model_settings={"compaction": {"trigger_tokens": 500, "pause_after": True}},
    )
    result = await agent.run(LONG)
    assert result.status == "success", result.error
    assert result.answer == "The last order was #42."
    first, second = sqlite_store.get_run(result.run_id).llm_interactions
    assert first.provider_response is not None and first.provider_response["stop_reason"] == "compaction"
    assert second.provider_request["messages"][-1]["content"][0]["type"] == "compaction"


async def test_context_editing_is_part_of_anthropics_prefix_descriptor(sqlite_store: Any) -> None:
    """Context editing is "Applied before the prompt reaches Claude" (the context-editing page): it changes what the
    model saw, so it is one of Anthropic's prefix settings; another configuration between runs of a conversation is
    a prefix change (cause settings), and the same one is none."""
    from segue import Agent
    from segue.providers import AnthropicProvider

    agent = Agent(
        AnthropicProvider(MODEL, thinking={"type": "adaptive"}, client=Twin().anthropic_client()),
        store=sqlite_store,
    )
    keep_two = {"context_editing": {"clear_tool_uses": {"trigger_tokens": 50_000, "keep_tool_uses": 2}}}
    first = await agent.run("What is 2+2?", model_settings=keep_two)
    prefix = sqlite_store.get_run(first.run_id).meta.segue_prefix
    assert prefix is not None and prefix.settings_hash is not None
    same = await agent.run("And 3+3?", runs=[first.run_id], replay_last=1, model_settings=keep_two)
    assert same.replay is not None and [w.cause for w in same.replay.warnings] == []
    keep_one = {"context_editing": {"clear_tool_uses": {"trigger_tokens": 50_000, "keep_tool_uses": 1}}}
    other = await agent.run("And 4+4?", runs=[first.run_id], replay_last=1, model_settings=keep_one)
    assert other.replay is not None and [w.cause for w in other.replay.warnings] == ["settings"]


async def test_a_streamed_compaction_reads_as_the_unstreamed(sqlite_store: Any) -> None:
    """The stream carries the block as a compaction_delta (the pinned SDK's BetaCompactionContentBlockDelta) and
    the iterations on message_delta (BetaMessageDeltaUsage.iterations): the stored message and usage equal a
    non-streamed run's."""
    from segue import Agent
    from segue.generated import CompactionBlock
    from segue.providers import AnthropicProvider

    settings = {
        "compaction": {"trigger_tokens": 500},
        "context_editing": {"clear_tool_uses": {"trigger_tokens": 100, "keep_tool_uses": 0}},
    }
    runs = []
    for streaming in (False, True):
        agent = Agent(
            AnthropicProvider(MODEL, client=Twin(policy=ScriptedPolicy(["ok"])).anthropic_client()),
            store=sqlite_store,
            model_settings=settings,
        )
        if streaming:
            events = [e async for e in agent.stream(LONG)]
            run_id = events[-1].run_id
        else:
            run_id = (await agent.run(LONG)).run_id
        runs.append(sqlite_store.get_run(run_id))
    plain, streamed = runs
    assert [type(b) for b in streamed.traces[-1].message.content] == [
        CompactionBlock,
        type(plain.traces[-1].message.content[1]),
    ]
    assert streamed.traces[-1].message == plain.traces[-1].message
    assert streamed.llm_interactions[0].usage == plain.llm_interactions[0].usage
    assert streamed.llm_interactions[0].usage.compaction_iterations


def test_applied_edits_reported_on_message_delta_become_the_note() -> None:
    """BetaRawMessageDeltaEvent.context_management: a stream reports the applied edits on message_delta; segue's
    assembler keeps them, so a streamed response has the same context-edited note as a non-streamed one."""
    from segue.wire.anthropic.request import parse_response
    from segue.wire.anthropic.stream import AnthropicStream
    from segue_twin.anthropic_api import stream_events

    applied = {
        "applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2, "cleared_input_tokens": 900}]
    }
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 1,
        },
        "context_management": applied,
    }
    assembler = AnthropicStream()
    for raw in stream_events(message):
        data = raw.decode().split("data: ", 1)[1].strip()
        assembler.feed(json.loads(data))
    notes = [n for n in parse_response(assembler.result()).notes if n.kind == "context-edited"]
    assert len(notes) == 1 and "cleared 2 tool uses, 900 input tokens" in notes[0].message


async def test_after_a_compaction_the_system_cache_is_read_and_the_messages_are_cached_anew() -> None:
    """What is cached after a compaction: the prefix up to the system prompt is unchanged and read; the messages
    before the compaction block are dropped, so their entry is not read and the prompt from the block on is written
    at the request's breakpoint (prompt-caching page: the prefix is tools, system, messages in order)."""
    client = _twin()
    system = {"type": "text", "text": "You are a meticulous analyst. " * 200, "cache_control": {"type": "ephemeral"}}
    conversation = _conversation()
    conversation[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    await client.beta.messages.create(
        model=MODEL,
        max_tokens=64,
        system=[system],
        messages=conversation,  # type: ignore[list-item,arg-type]
    )
    block = {"type": "compaction", "content": "Summary: the last order was #42. " * 40}
    text = {"type": "text", "text": "Order #42."}
    question = {"type": "text", "text": "And its total?", "cache_control": {"type": "ephemeral"}}
    after = await client.beta.messages.create(
        model=MODEL,
        max_tokens=64,
        system=[system],  # type: ignore[list-item]
        messages=[
            *_conversation(),
            {"role": "assistant", "content": [block, text]},
            {"role": "user", "content": [question]},
        ],  # type: ignore[arg-type]
        betas=[COMPACT],
    )

    def tokens(b: dict[str, Any]) -> int:
        return count_json({k: v for k, v in b.items() if k != "cache_control"})

    assert after.usage.cache_read_input_tokens == tokens(system)
    assert after.usage.cache_creation_input_tokens == tokens(block) + tokens(text) + tokens(question)


THINKING = {"type": "enabled", "budget_tokens": 1024}


async def _thinking_conversation(client: anthropic.AsyncAnthropic, turns: int) -> list[dict[str, Any]]:
    """`turns` answered user turns, each assistant turn with the twin's signed thinking block first, then the next
    question (marked for caching: the prompt is past claude-sonnet-4-6's 1,024-token minimum)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": LONG + LONG}]}]
    for i in range(turns):
        answer = await client.beta.messages.create(
            model=MODEL,
            max_tokens=2048,
            thinking=THINKING,  # type: ignore[arg-type]
            messages=messages,  # type: ignore[arg-type]
        )
        assert answer.content[0].type == "thinking"
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.content]})
        messages.append({"role": "user", "content": [{"type": "text", "text": f"And question {i + 2}?"}]})
    messages[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    return messages


async def _ask(client: anthropic.AsyncAnthropic, messages: list[dict[str, Any]], edit: dict[str, Any] | None) -> Any:
    extra: dict[str, Any] = {"betas": [EDITING], "context_management": {"edits": [edit]}} if edit else {}
    return await client.beta.messages.create(
        model=MODEL,
        max_tokens=2048,
        thinking=THINKING,  # type: ignore[arg-type]
        messages=messages,  # type: ignore[arg-type]
        **extra,
    )


@pytest.mark.parametrize(
    "keep",
    [{"type": "thinking_turns", "value": 1}, None],
    ids=["keep one turn", "keep left to the default"],
)
async def test_clear_thinking_removes_the_thinking_of_older_assistant_turns_and_reports_it(keep: Any) -> None:
    """clear_thinking_20251015, "keep": "Number of most recent assistant turns to keep thinking blocks for. Older
    turns will have their thinking blocks removed" (the pinned SDK's BetaClearThinking20251015EditParam). Left
    unset, the context-editing page gives the default as equivalent to `keep: {type: "thinking_turns", value: 1}`
    (its zh-CN and ja versions). The response reports it: "cleared_thinking_turns: Number of thinking turns that
    were cleared", "cleared_input_tokens: Number of input tokens cleared by this edit"
    (BetaClearThinking20251015EditResponse); the edit is "Applied before the prompt reaches Claude", so the
    prompt counts that many tokens fewer."""
    client = _twin()
    messages = await _thinking_conversation(client, 3)
    plain = await _ask(client, messages, None)
    edit = {"type": "clear_thinking_20251015", **({"keep": keep} if keep is not None else {})}
    edited = await _ask(client, messages, edit)
    assert edited.context_management is not None
    (applied,) = edited.context_management.applied_edits
    assert (applied.type, applied.cleared_thinking_turns) == ("clear_thinking_20251015", 2)  # 3 turns, 1 kept
    whole = plain.usage.input_tokens + plain.usage.cache_read_input_tokens + plain.usage.cache_creation_input_tokens
    sent = edited.usage.input_tokens + edited.usage.cache_read_input_tokens + edited.usage.cache_creation_input_tokens
    assert applied.cleared_input_tokens > 0 and whole - sent == applied.cleared_input_tokens


async def test_clear_thinking_keeping_all_turns_clears_nothing_and_keeps_the_cache() -> None:
    """`keep: "all"` keeps every thinking block (the SDK's Keep takes the literal "all" or BetaAllThinkingTurnsParam);
    the context-editing page: set it to maximize cache hits, since "when thinking blocks are cleared, the cache is
    invalidated at the point where clearing occurs" (its prompt-caching section, read in its zh-CN and ja
    versions). So a request keeping all reads the prompt an unedited request cached, and one clearing older turns
    does not read past the first cleared block."""
    client = _twin()
    messages = await _thinking_conversation(client, 3)
    plain = await _ask(client, messages, None)
    assert plain.usage.cache_creation_input_tokens
    for keep in ("all", {"type": "all"}):
        kept = await _ask(client, messages, {"type": "clear_thinking_20251015", "keep": keep})
        assert kept.context_management is None  # nothing applied
        assert kept.usage.cache_read_input_tokens == plain.usage.cache_creation_input_tokens
    cleared = await _ask(
        client, messages, {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}
    )
    assert cleared.context_management is not None
    assert cleared.usage.cache_read_input_tokens < plain.usage.cache_creation_input_tokens
