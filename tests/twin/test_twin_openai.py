"""OpenAI Responses reasoning replay and Chat Completions validation in the twin, via the official client.

Rules: https://developers.openai.com/api/docs/guides/reasoning (encrypted reasoning, store=false) and the
openai SDK's `types/responses` / `types/chat` shapes (see /work/shared/reference/wire-formats.md sections 2-3).
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from segue_twin import AssistantTurn, PlannedCall, ScriptedPolicy, Twin

REASONER = "gpt-5"
TOOLS = [{"type": "function", "name": "list_tables", "parameters": {"type": "object", "properties": {}}}]
CALL = AssistantTurn(tool_calls=(PlannedCall(name="list_tables"),), reasoning="I should list the tables.")


def _twin(*turns: AssistantTurn | str) -> tuple[ScriptedPolicy, openai.AsyncOpenAI]:
    policy = ScriptedPolicy(turns)
    return policy, Twin(policy=policy).openai_client()


async def _first_step(client: openai.AsyncOpenAI, **kwargs: Any) -> list[dict[str, Any]]:
    """A reasoning + function_call step, returned as replayable input items (with the tool output)."""
    response = await client.responses.create(model=REASONER, input="Which tables?", tools=TOOLS, **kwargs)  # type: ignore[arg-type]
    assert [item.type for item in response.output] == ["reasoning", "function_call"]
    call = response.output[1]
    assert call.type == "function_call"
    return [
        {"role": "user", "content": "Which tables?"},
        *(item.model_dump(exclude_none=True) for item in response.output),
        {"type": "function_call_output", "call_id": call.call_id, "output": '["orders"]'},
    ]


async def test_encrypted_reasoning_round_trips_and_tampering_is_rejected() -> None:
    """Under store=false reasoning items carry encrypted_content; replayed verbatim they verify, tampered they
    are rejected (400 invalid_encrypted_content).

    https://developers.openai.com/api/docs/guides/reasoning
    """
    policy, client = _twin(CALL, "There is one table: orders.", "unused")
    items = await _first_step(client, store=False)
    assert items[1]["encrypted_content"]
    done = await client.responses.create(model=REASONER, input=items, tools=TOOLS, store=False)  # type: ignore[arg-type]
    assert done.output_text == "There is one table: orders."
    assert policy.views[-1].turns[1].reasoning == "I should list the tables."

    tampered = [dict(i) for i in items]
    tampered[1]["encrypted_content"] = items[1]["encrypted_content"][:-4] + "AAAA"
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model=REASONER, input=tampered, tools=TOOLS, store=False)  # type: ignore[arg-type]
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["code"] == "invalid_encrypted_content"


async def test_reasoning_without_encrypted_content_under_store_false_is_not_found() -> None:
    """ "Items are not persisted when `store` is set to false": replaying a reasoning item without its
    encrypted_content returns 404 "Item with id 'rs_…' not found".

    https://developers.openai.com/api/docs/guides/reasoning
    """
    _, client = _twin(CALL, "unused")
    items = await _first_step(client, store=False)
    stripped = [dict(i) for i in items]
    del stripped[1]["encrypted_content"]
    with pytest.raises(openai.NotFoundError) as caught:
        await client.responses.create(model=REASONER, input=stripped, tools=TOOLS, store=False)  # type: ignore[arg-type]
    assert caught.value.status_code == 404
    assert caught.value.message.endswith(
        f"Item with id '{items[1]['id']}' not found. Items are not persisted when `store` is set to false. "
        "Try again with `store` set to true, or remove this item from your input."
    )


async def test_encrypted_content_is_included_on_request_or_when_not_stored() -> None:
    """encrypted_content comes back with include=["reasoning.encrypted_content"] or store=false; a stored item
    can be replayed by id alone.

    https://developers.openai.com/api/docs/guides/reasoning
    """
    _, client = _twin(CALL, CALL, "done")
    stored = await _first_step(client)
    assert "encrypted_content" not in stored[1]
    included = await _first_step(client, include=["reasoning.encrypted_content"])
    assert included[1]["encrypted_content"]
    done = await client.responses.create(model=REASONER, input=stored, tools=TOOLS)  # type: ignore[arg-type]
    assert done.output_text == "done"


async def test_function_call_without_its_reasoning_item_is_rejected() -> None:
    """ "Item 'fc_…' of type 'function_call' was provided without its required 'reasoning' item" (400) when a
    reasoning model's function_call is replayed with its id but without the reasoning item before it; dropping
    the id, or a non-reasoning model, is accepted.

    https://developers.openai.com/api/docs/guides/reasoning
    """
    _, client = _twin(CALL, "a", "b")
    items = await _first_step(client, store=False)
    without = [items[0], items[2], items[3]]
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model=REASONER, input=without, tools=TOOLS, store=False)  # type: ignore[arg-type]
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["message"].startswith(
        f"Item '{items[2]['id']}' of type 'function_call' was provided without its required 'reasoning' item."
    )
    no_id = [items[0], {k: v for k, v in items[2].items() if k != "id"}, items[3]]
    ok = await client.responses.create(model=REASONER, input=no_id, tools=TOOLS, store=False)  # type: ignore[arg-type]
    assert ok.output_text == "a"
    ok = await client.responses.create(model="gpt-4.1", input=without, tools=TOOLS, store=False)  # type: ignore[arg-type]
    assert ok.output_text == "b"


async def test_reasoning_from_another_model_is_omitted_not_rejected() -> None:
    """ "When you switch model families, the API omits incompatible reasoning".

    https://developers.openai.com/api/docs/guides/reasoning
    """
    policy, client = _twin(CALL, "fine")
    items = await _first_step(client, store=False)
    response = await client.responses.create(model="gpt-5-mini", input=items, tools=TOOLS, store=False)  # type: ignore[arg-type]
    assert response.output_text == "fine"
    assert policy.views[-1].turns[1].reasoning == ""


async def test_responses_usage_fields() -> None:
    """usage: input_tokens, input_tokens_details.cached_tokens and cache_write_tokens (both required fields of the
    pinned SDK's `InputTokensDetails`; no writes are reported before GPT-5.6), output_tokens,
    output_tokens_details.reasoning_tokens.

    https://developers.openai.com/api/docs/guides/reasoning; pinned openai SDK, `ResponseUsage`
    """
    _, client = _twin(AssistantTurn(text="abcdefgh", reasoning="abcd"))
    response = await client.responses.create(model=REASONER, input="hi")
    assert response.usage is not None
    assert response.usage.output_tokens_details.reasoning_tokens == 1
    assert response.usage.output_tokens == 3  # 1 reasoning + 2 text tokens (8 bytes)
    assert response.usage.input_tokens_details.cached_tokens == 0
    assert response.usage.input_tokens_details.cache_write_tokens == 0
    assert response.usage.total_tokens == response.usage.input_tokens + 3


async def test_chat_tool_messages_must_answer_tool_calls() -> None:
    """Chat Completions: an assistant message with tool_calls must be followed by a tool message per call id,
    and a tool message must answer a preceding tool call.

    https://platform.openai.com/docs/api-reference/chat/create
    """
    _, client = _twin("unused")
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(
            model="gpt-4.1",
            messages=[{"role": "user", "content": "q"}, call, {"role": "user", "content": "x"}],  # type: ignore[list-item]
        )
    assert "The following tool_call_ids did not have response messages: call_1" in caught.value.message
    assert isinstance(caught.value.body, dict) and caught.value.body["param"] == "messages.[1].role"
    with pytest.raises(openai.BadRequestError) as caught:
        await client.chat.completions.create(
            model="gpt-4.1",
            messages=[{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "x", "content": "r"}],
        )
    assert (
        "messages with role 'tool' must be a response to a preceeding message with 'tool_calls'" in caught.value.message
    )


async def test_chat_completion_shape_and_usage() -> None:
    """A tool-calling chat completion: finish_reason tool_calls, usage with prompt_tokens_details.cached_tokens
    and cache_write_tokens.

    https://platform.openai.com/docs/api-reference/chat/create
    """
    _, client = _twin(AssistantTurn(tool_calls=(PlannedCall(name="f", arguments={"a": 1}),)))
    completion = await client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "q"}])
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    assert choice.message.tool_calls[0].function.arguments == '{"a":1}'  # type: ignore[union-attr]
    assert completion.usage is not None and completion.usage.prompt_tokens_details is not None
    assert completion.usage.prompt_tokens_details.cached_tokens == 0
    assert completion.usage.prompt_tokens_details.cache_write_tokens == 0
    assert completion.usage.completion_tokens == 3  # "f" (1) + '{"a":1}' (7 bytes -> 2)
