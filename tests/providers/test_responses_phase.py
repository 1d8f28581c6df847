"""OpenAI `phase` on Responses assistant messages: kept as received, resent on every assistant message, and absent
(byte for byte as before) where the vendor sent none.

The rule, from the pinned openai SDK's `ResponseOutputMessage.phase` (openai/types/responses/response_output_message.py,
and the same words on `EasyInputMessageParam.phase`): "Labels an `assistant` message as intermediate commentary
(`commentary`) or the final answer (`final_answer`). For models like `gpt-5.3-codex` and beyond, when sending
follow-up requests, preserve and resend phase on all assistant messages — dropping it can degrade performance. Not
used for user messages."
"""

from __future__ import annotations

import inspect
from typing import Any

import openai.types.responses.response_output_message as sdk_output_message
import pytest

from segue import Agent, RunStore
from segue._core.contracts import ProviderRequest
from segue.errors import InputError
from segue.generated import Message, TextBlock, ToolResultBlock, get_converter
from segue.providers import OpenAIResponsesProvider, StreamDone
from segue.wire.common import WireRequest
from segue.wire.history import history_messages
from segue.wire.openai_responses.request import build_request, parse_response
from segue.wire.stored import read
from segue_twin import Twin
from segue_twin.openai_common import labels_phase
from segue_twin.scripted import ScriptedPolicy
from segue_twin.view import AssistantTurn, PlannedCall

RULE = "preserve and resend phase on all assistant messages"


def lookup_order(order: int) -> str:
    """Look an order up.

    Args:
        order: the order number
    """
    return f"order {order}: shipped"


def test_the_rule_is_the_pinned_sdks() -> None:
    """The quoted rule is the pinned SDK's own docstring, so a new SDK that drops or changes it fails here."""
    assert RULE in inspect.getsource(sdk_output_message)


def response(*output: dict[str, Any]) -> dict[str, Any]:
    usage = {"input_tokens": 20, "output_tokens": 9, "input_tokens_details": {"cached_tokens": 0}}
    return {"id": "resp_1", "model": "gpt-5.4", "status": "completed", "output": list(output), "usage": usage}


def message_item(text: str, phase: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    if phase is not None:
        item["phase"] = phase
    return item


CALL = {"type": "function_call", "call_id": "call_1", "name": "lookup_order", "arguments": '{"order":7}'}


def test_phase_is_kept_on_each_text_block_and_resent_on_its_assistant_message() -> None:
    parsed = parse_response(
        response(message_item("Let me look.", "commentary"), CALL, message_item("Order 7 shipped.", "final_answer"))
    )
    texts = [b for b in parsed.message.content if isinstance(b, TextBlock)]
    assert [(b.text, b.phase) for b in texts] == [("Let me look.", "commentary"), ("Order 7 shipped.", "final_answer")]
    # Stored canonically (the run's JSON) and read back, the phase survives.
    stored = get_converter().unstructure(parsed.message)
    assert stored["content"][0] == {"type": "text", "text": "Let me look.", "phase": "commentary"}
    again = get_converter().structure(stored, Message)
    request = ProviderRequest(
        system="s",
        messages=[
            Message(role="user", content=[TextBlock(text="Where is order 7?")]),
            again,
            Message(role="tool", content=[ToolResultBlock(tool_call_id="call_1", content="shipped")]),
        ],
    )
    body = build_request(request, model="gpt-5.4", reasoning=None, store=False, cache_key_prefix=None).body
    assistant = [i for i in body["input"] if i.get("role") == "assistant"]
    assert assistant == [
        {"type": "message", "role": "assistant", "content": "Let me look.", "phase": "commentary"},
        {"type": "message", "role": "assistant", "content": "Order 7 shipped.", "phase": "final_answer"},
    ]


#: A run stored before segue kept phase: an assistant text block without one.
OLD_ROW = [
    {"role": "user", "content": [{"type": "text", "text": "Where is order 7?"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_call", "id": "call_1", "name": "lookup_order", "arguments": {"order": 7}},
        ],
    },
    {"role": "tool", "content": [{"type": "tool_result", "tool_call_id": "call_1", "content": "shipped"}]},
]
#: The bytes segue sent for OLD_ROW before phase existed (main at df98bde): no `phase` key anywhere.
OLD_BYTES = (
    b'{"model":"gpt-5","instructions":"s","input":[{"type":"message","role":"user","content":[{"type":"input_text",'
    b'"text":"Where is order 7?"}]},{"type":"message","role":"assistant","content":"Let me look."},{"type":'
    b'"function_call","call_id":"call_1","name":"lookup_order","arguments":"{\\"order\\":7}"},{"type":'
    b'"function_call_output","call_id":"call_1","output":"shipped"}],"store":false}'
)


def test_a_run_stored_without_phase_replays_byte_for_byte_as_before() -> None:
    messages = [get_converter().structure(m, Message) for m in OLD_ROW]
    request = ProviderRequest(system="s", messages=messages)
    wire = build_request(request, model="gpt-5", reasoning=None, store=False, cache_key_prefix=None)
    assert WireRequest(body=wire.body).encoded() == OLD_BYTES


def test_a_phase_the_pinned_sdk_does_not_know_is_dropped_with_a_note_not_a_failed_call() -> None:
    parsed = parse_response(response(message_item("Hi.", "aside")))
    assert parsed.message.content == [TextBlock(text="Hi.")]
    assert [n.kind for n in parsed.notes] == ["unknown-output"]
    assert "'aside'" in parsed.notes[0].message


def test_history_keeps_an_assistant_items_phase_and_refuses_one_it_does_not_know() -> None:
    messages, _ = history_messages(
        [
            {"role": "user", "content": "Where is order 7?"},
            {"type": "message", "role": "assistant", "phase": "final_answer", "content": "Shipped."},
        ]
    )
    assert messages[1].content == [TextBlock(text="Shipped.", phase="final_answer")]
    with pytest.raises(InputError, match=r"history\[0\] has phase 'later'.*commentary"):
        history_messages([{"type": "message", "role": "assistant", "phase": "later", "content": "x"}])


def test_the_stored_request_view_shows_the_phase_that_was_resent() -> None:
    body = {
        "model": "gpt-5.4",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
            {"type": "message", "role": "assistant", "content": "Let me look.", "phase": "commentary"},
        ],
    }
    stored = read(body)
    assert stored.messages()[1].blocks == [TextBlock(text="Let me look.", phase="commentary")]


def test_the_twin_labels_phase_from_gpt_5_3_on() -> None:
    """The twin labels as the docstring says the models do ("For models like `gpt-5.3-codex` and beyond"): text
    that comes with tool calls is intermediate commentary, text alone the final answer; earlier models send none."""
    assert labels_phase("gpt-5.3-codex") and labels_phase("gpt-5.4") and labels_phase("gpt-6")
    assert not labels_phase("gpt-5") and not labels_phase("gpt-5.2") and not labels_phase("gpt-4.1")


SCRIPT = [
    AssistantTurn(text="Let me look.", tool_calls=(PlannedCall(name="lookup_order", arguments={"order": 7}),)),
    AssistantTurn(text="Order 7 has shipped."),
    AssistantTurn(text="It was order 7."),
]


@pytest.mark.parametrize(("model", "labelled"), [("gpt-5.4", True), ("gpt-5", False)])
async def test_a_replayed_run_resends_every_assistant_messages_phase(model: str, labelled: bool) -> None:
    """End to end on the twin: the first run's answers carry phase (gpt-5.4) or none (gpt-5); the run's own second
    request and the next run's first request resend each assistant message with the phase it came with."""
    twin = Twin(policy=ScriptedPolicy(SCRIPT))
    store = RunStore("sqlite:///:memory:")
    provider = OpenAIResponsesProvider(model, client=twin.openai_client())
    agent = Agent(provider, "You track orders.", [lookup_order], store)
    first = await agent.run("Where is order 7?")
    second = await agent.run("Which order was it?", runs=[first.run_id], replay_last="all")
    assert first.status == second.status == "success"
    bodies = [c.provider_request for r in (first, second) for c in store.get_run(r.run_id).llm_interactions]  # type: ignore[union-attr]
    assert len(bodies) == 3

    def assistant(body: dict[str, Any]) -> list[tuple[str, str | None]]:
        return [(i["content"], i.get("phase")) for i in body["input"] if i.get("role") == "assistant"]

    commentary, final = ("commentary", "final_answer") if labelled else (None, None)
    assert assistant(bodies[1]) == [("Let me look.", commentary)]
    assert assistant(bodies[2]) == [("Let me look.", commentary), ("Order 7 has shipped.", final)]
    if not labelled:
        assert all("phase" not in i for b in bodies for i in b["input"])


async def test_a_streamed_answer_keeps_its_phase_as_the_plain_one_does() -> None:
    """The stream's final message is assembled from `response.output_item.done`, which carries the item's phase."""
    twin = Twin(policy=ScriptedPolicy(["Done.", "Done."]))
    provider = OpenAIResponsesProvider("gpt-5.4", client=twin.openai_client())
    request = ProviderRequest(system="s", messages=[Message(role="user", content=[TextBlock(text="hi")])])
    plain = await provider.complete(request)
    [done] = [item async for item in provider.stream(request) if isinstance(item, StreamDone)]
    texts = [b for b in done.response.message.content if isinstance(b, TextBlock)]
    assert texts == [TextBlock(text="Done.", phase="final_answer")] == plain.message.content[-1:]
