"""The TypedDict checker of tests/_support/vendor_http.py checks what it is meant to."""

from __future__ import annotations

from tests._support.vendor_http import check_typed


def test_checker_accepts_a_valid_anthropic_body() -> None:
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    body = {
        "model": "claude-x",
        "max_tokens": 10,
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
        ],
    }
    assert check_typed(body, MessageCreateParamsNonStreaming) == []


def test_checker_reports_unknown_and_missing_keys_deep_inside_iterables() -> None:
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    body = {
        "model": "claude-x",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_controll": {}}]}],
    }
    problems = check_typed(body, MessageCreateParamsNonStreaming)
    assert any("missing required key 'max_tokens'" in p for p in problems)
    assert any("unknown key 'cache_controll'" in p and "$.messages[0].content[0]" in p for p in problems)


def test_checker_reports_wrong_literal_and_type() -> None:
    from anthropic.types import ThinkingBlockParam

    assert check_typed({"type": "thinking", "thinking": "x", "signature": 3}, ThinkingBlockParam) == [
        "$.signature: expected str, got int"
    ]
    assert "is not one of" in check_typed({"type": "thought", "thinking": "", "signature": ""}, ThinkingBlockParam)[0]


def test_checker_allows_only_the_extra_keys_it_is_told_about() -> None:
    from anthropic.types import ThinkingConfigEnabledParam

    body = {"type": "enabled", "budget_tokens": 2048, "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
    assert check_typed(body, ThinkingConfigEnabledParam)
    assert check_typed(body, ThinkingConfigEnabledParam, extra={"ThinkingConfigEnabledParam": {"block_binding"}}) == []


def test_checker_validates_iterables_eagerly() -> None:
    from openai.types.responses import EasyInputMessageParam

    problems = check_typed({"role": "user", "content": [{"type": "input_text"}]}, EasyInputMessageParam)
    assert any("$.content[0]" in p and "missing required key 'text'" in p for p in problems)
