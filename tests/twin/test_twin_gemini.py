"""The twin's Gemini OpenAI-compatible endpoint (`/v1beta/openai/chat/completions`): the thought-signature rule.

Source: Google's thought-signatures page (ai.google.dev/gemini-api/docs/thought-signatures): "When using Gemini 3
models, you must pass back thought signatures during function calling, otherwise you will get a validation error
(4xx status code)"; "the first functionCall part in each step of the current turn must include its
thought_signature", the current turn starting at "the most recent User message that contains standard content";
on the OpenAI-compatible endpoint the signature is the tool call's `extra_content.google.thought_signature`.
"""

from __future__ import annotations

import json
from typing import Any

from segue_twin import Twin

PATH = "/v1beta/openai/chat/completions"
HEADERS = {"authorization": "Bearer k", "content-type": "application/json"}
TOOLS = [{"type": "function", "function": {"name": "list_tables", "description": "list", "parameters": {}}}]


def post(twin: Twin, messages: list[dict[str, Any]], model: str = "gemini-3-flash") -> tuple[int, Any]:
    body = {"model": model, "messages": messages, "tools": TOOLS}
    answer = twin.handle("POST", PATH, HEADERS, json.dumps(body).encode())
    return answer.status, json.loads(answer.body)


def call(signature: str | None = None, call_id: str = "call_1") -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": call_id,
        "type": "function",
        "function": {"name": "list_tables", "arguments": "{}"},
    }
    if signature is not None:
        entry["extra_content"] = {"google": {"thought_signature": signature}}
    return entry


def turn(*calls: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": None, "tool_calls": list(calls)},
        *({"role": "tool", "tool_call_id": c["id"], "content": "[]"} for c in calls),
    ]


def test_gemini3_answers_carry_a_thought_signature_on_their_first_call() -> None:
    """'Gemini 3 returns thought signatures for all model responses ... with a function call' (the page)."""
    status, body = post(Twin(), [{"role": "user", "content": "Which tables are there?"}])
    assert status == 200
    calls = body["choices"][0]["message"]["tool_calls"]
    assert isinstance(calls[0]["extra_content"]["google"]["thought_signature"], str)


def test_gemini3_refuses_a_current_turn_step_replayed_without_its_thought_signature() -> None:
    """Missing signature in the current turn: 400 with the vendor's message and Google's error envelope, as a
    captured answer shows it ('Function call is missing a thought_signature in functionCall parts. ...')."""
    question = {"role": "user", "content": "Which tables are there?"}
    status, body = post(Twin(), [question, *turn(call())])
    assert status == 400
    error = body[0]["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    assert error["message"].startswith("Function call is missing a thought_signature in functionCall parts.")
    assert "`default_api:list_tables` , position 2" in error["message"]

    status, _ = post(Twin(), [question, *turn(call("sig"))])
    assert status == 200


def test_gemini3_checks_only_the_current_turn_and_the_first_call_of_each_step() -> None:
    """'(Only the current turn is required; we don't validate on previous turns)'; with parallel calls only the
    first carries a signature, so only the first is checked."""
    earlier = [{"role": "user", "content": "Which tables?"}, *turn(call()), {"role": "assistant", "content": "4."}]
    now = {"role": "user", "content": "And how many customers?"}
    status, _ = post(Twin(), [*earlier, now])
    assert status == 200, "an unsigned call of an earlier turn is not validated"
    status, _ = post(Twin(), [*earlier, now, *turn(call("sig", "call_2"), call(None, "call_3"))])
    assert status == 200, "the second of parallel calls carries no signature"
    status, _ = post(Twin(), [*earlier, now, *turn(call("sig", "call_2")), *turn(call(None, "call_4"))])
    assert status == 400, "every step of the current turn needs its first call signed"


def test_the_rule_binds_gemini_3_only() -> None:
    """The page's rule is for Gemini 3 models; a Gemini 2.5 replay without signatures is not refused."""
    status, _ = post(Twin(), [{"role": "user", "content": "Which tables?"}, *turn(call())], model="gemini-2.5-flash")
    assert status == 200
