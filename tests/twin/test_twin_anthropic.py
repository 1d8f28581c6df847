"""The twin rejects Anthropic Messages requests exactly where the vendor does, through the official client."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from segue_twin import AssistantTurn, PlannedCall, ScriptedPolicy, Twin

MODEL = "claude-sonnet-4-6"
BETA = "thinking-binding-controls-2026-08-01"
THINKING = {"type": "enabled", "budget_tokens": 1024}
TOOLS = [{"name": "list_tables", "description": "List tables.", "input_schema": {"type": "object", "properties": {}}}]


def _client(*turns: AssistantTurn | str) -> tuple[Twin, anthropic.AsyncAnthropic]:
    twin = Twin(policy=ScriptedPolicy(turns or ["ok"] * 8))
    return twin, twin.anthropic_client()


async def _rejects(client: anthropic.AsyncAnthropic, **kwargs: Any) -> str:
    kwargs.setdefault("model", MODEL)
    kwargs.setdefault("max_tokens", 2048)
    with pytest.raises(anthropic.BadRequestError) as caught:
        await client.messages.create(**kwargs)
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    return str(body["error"]["message"])


async def test_roles_start_with_user() -> None:
    """The first turn is a user turn.

    https://platform.claude.com/docs/en/api/messages
    """
    _, client = _client()
    message = await _rejects(client, messages=[{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}])
    assert message == 'messages: first message must use the "user" role'


async def test_consecutive_same_role_turns_are_combined_into_one_turn() -> None:
    """ "Consecutive `user` or `assistant` turns in your request will be combined into a single turn": two user
    turns in a row are answered like one user turn holding both blocks, and they are counted and cached as it is.

    Pinned anthropic SDK, `MessageCreateParamsBase.messages` docstring.
    """
    twin, client = _client("one", "two")
    split = [{"role": "user", "content": "a " * 2400}, {"role": "user", "content": [_marked("b " * 2400)]}]
    first = await client.messages.create(model=MODEL, max_tokens=64, messages=split)
    assert first.content[0].type == "text" and first.content[0].text == "one"
    shown = twin.policy.views[0].turns  # type: ignore[attr-defined]
    assert [t.role for t in shown] == ["user"] and shown[0].text == "a " * 2400 + "\n" + "b " * 2400
    combined = [{"role": "user", "content": [{"type": "text", "text": "a " * 2400}, _marked("b " * 2400)]}]
    second = await client.messages.create(model=MODEL, max_tokens=64, messages=combined)
    assert first.usage.cache_creation_input_tokens > 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens


async def test_tool_use_needs_tool_result_first_in_next_user_message() -> None:
    """ "Tool result blocks must immediately follow their corresponding tool use blocks", first in the user turn.

    https://platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls
    """
    _, client = _client()
    call = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "list_tables", "input": {}}]}
    message = await _rejects(
        client, tools=TOOLS, messages=[{"role": "user", "content": "q"}, call, {"role": "user", "content": "hi"}]
    )
    assert message.startswith(
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_a."
    )

    text_first = [{"type": "text", "text": "here"}, {"type": "tool_result", "tool_use_id": "toolu_a", "content": "[]"}]
    message = await _rejects(
        client, tools=TOOLS, messages=[{"role": "user", "content": "q"}, call, {"role": "user", "content": text_first}]
    )
    assert message.startswith("messages.2.content.1: `tool_result` blocks must come first")

    stray = [{"type": "tool_result", "tool_use_id": "toolu_zzz", "content": "[]"}]
    message = await _rejects(client, messages=[{"role": "user", "content": stray}])
    assert "unexpected `tool_use_id` found in `tool_result` blocks: toolu_zzz" in message


def _marked(text: str, ttl: str | None = None) -> dict[str, Any]:
    control: dict[str, Any] = {"type": "ephemeral"}
    if ttl:
        control["ttl"] = ttl
    return {"type": "text", "text": text, "cache_control": control}


async def test_at_most_four_cache_breakpoints() -> None:
    """ "You can define up to 4 cache breakpoints" across tools, system and messages.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """
    _, client = _client()
    system = [_marked("s1"), _marked("s2")]
    user = [_marked("u1"), _marked("u2"), _marked("u3")]
    message = await _rejects(client, system=system, messages=[{"role": "user", "content": user}])
    assert message == "A maximum of 4 blocks with cache_control may be provided. Found 5."
    ok = await client.messages.create(
        model=MODEL, max_tokens=64, system=system, messages=[{"role": "user", "content": user[:2]}]
    )
    assert ok.stop_reason == "end_turn"
    # Top-level automatic caching uses one of the four slots.
    message = await _rejects(
        client,
        system=system,
        messages=[{"role": "user", "content": [*user[:2], {"type": "text", "text": "x"}]}],
        extra_body={"cache_control": {"type": "ephemeral"}},
    )
    assert message.startswith("A maximum of 4 blocks with cache_control may be provided. Found 5")


async def test_one_hour_entry_may_not_follow_five_minute_entry() -> None:
    """ "A 1-hour cache entry must appear before any 5-minute cache entries" (tools -> system -> messages).

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """
    _, client = _client()
    message = await _rejects(
        client, system=[_marked("sys", "5m")], messages=[{"role": "user", "content": [_marked("q", "1h")]}]
    )
    assert message.startswith(
        "messages.0.content.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m'"
    )
    ok = await client.messages.create(
        model=MODEL,
        max_tokens=64,
        system=[_marked("sys", "1h")],
        messages=[{"role": "user", "content": [_marked("q")]}],
    )
    assert ok.stop_reason == "end_turn"


async def test_thinking_must_lead_the_assistant_turn_of_a_tool_loop() -> None:
    """With thinking on, the final assistant message must start with a thinking block before tool_use.

    https://platform.claude.com/docs/en/build-with-claude/extended-thinking (thinking with tool use)
    """
    _, client = _client()
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "list_tables", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "[]"}]},
    ]
    message = await _rejects(client, tools=TOOLS, thinking=THINKING, messages=messages)
    assert message.startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When "
        "`thinking` is enabled, a final `assistant` message must start with a thinking block"
    )
    ok = await client.messages.create(model=MODEL, max_tokens=64, tools=TOOLS, messages=messages)
    assert ok.content[0].type == "text"


async def _tool_loop_turn(client: anthropic.AsyncAnthropic, system: str) -> list[dict[str, Any]]:
    """One thinking + tool_use turn and its tool result, as a client would replay them."""
    first = await client.messages.create(
        model=MODEL,
        max_tokens=2048,
        system=system,
        tools=TOOLS,
        thinking=THINKING,
        messages=[{"role": "user", "content": "Which tables are there?"}],
    )
    assert [b.type for b in first.content] == ["thinking", "tool_use"]
    tool_use = first.content[1]
    assert tool_use.type == "tool_use"
    return [
        {"role": "user", "content": "Which tables are there?"},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": '["a"]'}]},
    ]


async def test_thinking_with_a_forced_tool_choice_is_refused() -> None:
    """Thinking only supports `tool_choice` `auto` (the default) or `none`: "Attempting to use `tool_choice:
    {"type": "any"}` or `tool_choice: {"type": "tool", "name": "..."}` will result in an error because these
    options force tool use, which is incompatible with extended thinking." Adaptive thinking is thinking too.

    https://platform.claude.com/docs/en/build-with-claude/extended-thinking (extended thinking with tool use)
    """
    _, client = _client()
    ask = [{"role": "user", "content": "q"}]
    for thinking in (THINKING, {"type": "adaptive"}):
        for choice in ({"type": "any"}, {"type": "tool", "name": "list_tables"}):
            message = await _rejects(client, tools=TOOLS, messages=ask, thinking=thinking, tool_choice=choice)
            assert message.startswith("Thinking may not be enabled when tool_choice forces tool use"), message
    for choice in ({"type": "auto"}, {"type": "none"}):
        await client.messages.create(
            model=MODEL, max_tokens=2048, tools=TOOLS, messages=ask, thinking=THINKING, tool_choice=choice
        )
    forced = await client.messages.create(
        model=MODEL, max_tokens=64, tools=TOOLS, messages=ask, tool_choice={"type": "any"}
    )
    assert forced.content  # without thinking, forcing a tool is fine


async def test_thinking_signature_is_bound_to_its_prefix() -> None:
    """A thinking block's signature binds it to the model and the prefix (system, tools, earlier messages).

    Unchanged prefix -> accepted (moving cache_control does not matter); changed system -> 400 naming the block.
    https://platform.claude.com/docs/en/build-with-claude/preserved-thinking
    """
    _, client = _client(
        AssistantTurn(tool_calls=(PlannedCall(name="list_tables"),), reasoning="List the tables first."), "a", "b", "c"
    )
    messages = await _tool_loop_turn(client, "You are an analyst.")
    ok = await client.messages.create(
        model=MODEL, max_tokens=2048, system="You are an analyst.", tools=TOOLS, thinking=THINKING, messages=messages
    )
    assert ok.content[-1].type == "text"

    moved = [dict(m) for m in messages]
    moved[0] = {"role": "user", "content": [_marked("Which tables are there?")]}
    ok = await client.messages.create(
        model=MODEL, max_tokens=2048, system="You are an analyst.", tools=TOOLS, thinking=THINKING, messages=moved
    )
    assert ok.content[-1].type == "text"

    message = await _rejects(
        client, system="You are a different analyst.", tools=TOOLS, thinking=THINKING, messages=messages
    )
    assert message.startswith("messages.1.content.0: Invalid `signature` in `thinking` block: the conversation before")

    message = await _rejects(
        client, model="claude-opus-4-8", system="You are an analyst.", tools=TOOLS, thinking=THINKING, messages=messages
    )
    assert "the model that produced it differs" in message


async def test_drop_block_drops_mismatched_thinking_and_every_later_one() -> None:
    """With block_binding.prefix_mismatch_behavior = "drop_block" (beta thinking-binding-controls-2026-08-01)
    a mismatched block and every later thinking block are dropped and listed in `input_transformations`.

    https://platform.claude.com/docs/en/build-with-claude/preserved-thinking
    """
    policy = ScriptedPolicy(
        [
            AssistantTurn(tool_calls=(PlannedCall(name="list_tables"),), reasoning="First step."),
            AssistantTurn(tool_calls=(PlannedCall(name="list_tables"),), reasoning="Second step."),
            "done",
            "done again",
        ]
    )
    twin = Twin(policy=policy)
    client = twin.anthropic_client()
    messages = await _tool_loop_turn(client, "sys")
    second = await client.messages.create(
        model=MODEL, max_tokens=2048, system="sys", tools=TOOLS, thinking=THINKING, messages=messages
    )
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in second.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": second.content[1].id, "content": "[]"}]},  # type: ignore[union-attr]
    ]
    binding = {**THINKING, "block_binding": {"prefix_mismatch_behavior": "drop_block"}}

    message = await _rejects(client, system="changed", tools=TOOLS, thinking=binding, messages=messages)
    assert "thinking-binding-controls-2026-08-01" in message  # the binding needs its beta header

    dropped = await client.messages.create(
        model=MODEL,
        max_tokens=2048,
        system="changed",
        tools=TOOLS,
        messages=messages,
        extra_headers={"anthropic-beta": BETA},
        extra_body={"thinking": binding},
    )
    assert dropped.stop_reason == "end_turn"
    assert dropped.model_extra is not None
    assert dropped.model_extra["input_transformations"] == [
        {"type": "thinking_dropped", "path": "messages.1.content.0", "reason": "prefix_binding_mismatch"},
        {"type": "thinking_dropped", "path": "messages.3.content.0", "reason": "prefix_binding_mismatch"},
    ]
    assert policy.views[-1].turns[1].reasoning == "" and policy.views[-1].turns[3].reasoning == ""

    kept = await client.beta.messages.create(
        model=MODEL,
        max_tokens=2048,
        system="sys",
        tools=TOOLS,
        messages=messages,  # type: ignore[arg-type]
        thinking=binding,
        betas=[BETA],  # type: ignore[arg-type]
    )
    assert kept.input_transformations == []
    assert policy.views[-1].turns[1].reasoning == "First step."


async def test_bodies_are_deterministic() -> None:
    """Ids come from seeded counters and signatures from a fixed secret, so tests can assert exact bodies."""
    bodies = []
    for _ in range(2):
        twin = Twin(policy=ScriptedPolicy([AssistantTurn(text="hi", reasoning="think")]), clock=lambda: 0.0)
        response = await twin.anthropic_client().messages.create(
            model=MODEL, max_tokens=2048, thinking=THINKING, messages=[{"role": "user", "content": "hello"}]
        )
        bodies.append(response.model_dump())
    assert bodies[0] == bodies[1]
    assert bodies[0]["id"] == "msg_000000000001"
    assert bodies[0]["content"][1] == {"type": "text", "text": "hi", "citations": None}
    # Output tokens by segue._core.tokens: "think" is 5 bytes (2 tokens), "hi" 2 bytes (1 token).
    assert bodies[0]["usage"]["output_tokens"] == 3
