"""Anthropic prompt-cache accounting in the twin: breakpoints, 20-block lookback, minimum length, TTLs.

Rules from https://platform.claude.com/docs/en/build-with-claude/prompt-caching. Expected numbers are computed
with segue.tokens (4 UTF-8 bytes per token over each block's canonical JSON, cache_control excluded).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic

from segue.catalog import Catalog
from segue.tokens import count_json
from segue.twin import ScriptedPolicy, Twin
from segue.twin.rules import catalog_rules
from segue.twin.testing import FakeClock

MODEL = "claude-sonnet-4-6"  # minimum cacheable prompt: 1024 tokens


def _text(text: str, ttl: str | None = None, *, cache: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if ttl or cache:
        block["cache_control"] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    return block


def _tokens(*blocks: dict[str, Any]) -> int:
    return sum(count_json({k: v for k, v in b.items() if k != "cache_control"}) for b in blocks)


def _twin(clock: FakeClock | None = None) -> tuple[Twin, anthropic.AsyncAnthropic]:
    twin = Twin(policy=ScriptedPolicy(["ok"] * 20), clock=clock)
    return twin, twin.anthropic_client()


async def _usage(client: anthropic.AsyncAnthropic, *, model: str = MODEL, **kwargs: Any) -> dict[str, Any]:
    response = await client.messages.create(model=model, max_tokens=64, **kwargs)
    return response.usage.model_dump()


SYSTEM = "You are a meticulous analyst. " * 200  # ~1500 tokens


async def test_breakpoint_writes_then_reads() -> None:
    """The prefix up to a cache_control block is written, then read by an identical prefix; input_tokens counts
    only what follows the last breakpoint (total = read + creation + input).

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """
    _, client = _twin()
    system = _text(SYSTEM, cache=True)
    user = _text("How many customers?")
    first = await _usage(client, system=[system], messages=[{"role": "user", "content": [user]}])
    assert first["cache_creation_input_tokens"] == _tokens(system)
    assert first["cache_creation"] == {"ephemeral_5m_input_tokens": _tokens(system), "ephemeral_1h_input_tokens": 0}
    assert first["cache_read_input_tokens"] == 0
    assert first["input_tokens"] == _tokens(user)
    second = await _usage(client, system=[system], messages=[{"role": "user", "content": [user]}])
    assert second["cache_read_input_tokens"] == _tokens(system)
    assert second["cache_creation_input_tokens"] == 0
    assert second["input_tokens"] == _tokens(user)


async def test_entry_is_readable_only_after_the_response_that_wrote_it() -> None:
    """Two breakpoints in one request: the later one cannot read the entry the earlier one is writing.

    "A cache entry only becomes available after the first response begins."

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """
    _, client = _twin()
    system, user = _text(SYSTEM, cache=True), _text("question", cache=True)
    first = await _usage(client, system=[system], messages=[{"role": "user", "content": [user]}])
    assert first["cache_read_input_tokens"] == 0
    assert first["cache_creation_input_tokens"] == _tokens(system, user)
    assert first["input_tokens"] == 0
    second = await _usage(client, system=[system], messages=[{"role": "user", "content": [user]}])
    assert second["cache_read_input_tokens"] == _tokens(system, user)


async def _lookback_usage(extra_blocks: int) -> dict[str, Any]:
    """Write an entry after 2 blocks (system, question), then put the only breakpoint ``extra_blocks`` later."""
    _, client = _twin()
    system = _text(SYSTEM)
    await _usage(client, system=[system], messages=[{"role": "user", "content": [_text("question", cache=True)]}])
    extras = [_text(f"note {i}") for i in range(extra_blocks - 1)] + [_text("last note", cache=True)]
    return await _usage(client, system=[system], messages=[{"role": "user", "content": [_text("question"), *extras]}])


async def test_lookback_finds_entries_at_most_20_blocks_back() -> None:
    """ "The system only checks up to 20 blocks before each explicit cache_control breakpoint": an entry 20
    blocks before the breakpoint is read; 21 or 25 blocks before, it is missed and everything is written again.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """
    prefix = _tokens(_text(SYSTEM), _text("question"))
    hit = await _lookback_usage(20)
    assert hit["cache_read_input_tokens"] == prefix
    for distance in (21, 25):
        miss = await _lookback_usage(distance)
        assert miss["cache_read_input_tokens"] == 0, distance
        assert miss["cache_creation_input_tokens"] > prefix


MODELS_512_AND_4096 = {
    "$schema": "../schemas/catalog.schema.json",
    "version": 1,
    "models": [
        {
            "id": "claude-opus-5",
            "model_type": "llm",
            "developer": "anthropic",
            "configuration": {"llm": {"cache_kind": "block", "cache_min_tokens": 512}},
        },
        {
            "id": "claude-opus-4-6",
            "model_type": "llm",
            "developer": "anthropic",
            "configuration": {"llm": {"cache_kind": "block", "cache_min_tokens": 4096}},
        },
    ],
    "model_vendors": [
        {
            "model": "claude-opus-5",
            "vendor": "anthropic",
            "role": "inference_provider",
            "priority": 100,
            "api_name": "claude-opus-5",
        },
        {
            "model": "claude-opus-4-6",
            "vendor": "anthropic",
            "role": "inference_provider",
            "priority": 100,
            "api_name": "claude-opus-4-6",
        },
    ],
}


async def test_minimum_cacheable_length_depends_on_the_model(tmp_path: Path) -> None:
    """Below the model's minimum (512 / 1024 / 2048 / 4096 tokens) nothing is written and no error is returned.
    The minimums are catalog data: two models come from an app catalog directory layered over the packaged one.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """
    (tmp_path / "extra.json").write_text(json.dumps(MODELS_512_AND_4096))
    client = Twin(rules=catalog_rules(Catalog.load([tmp_path]))).anthropic_client()
    system = _text(SYSTEM, cache=True)  # ~1500 tokens
    assert 1024 <= _tokens(system) < 2048
    sonnet = await _usage(
        client, model="claude-sonnet-4-6", system=[system], messages=[{"role": "user", "content": "q"}]
    )
    assert sonnet["cache_creation_input_tokens"] == _tokens(system)
    for model in ("claude-opus-4-7", "claude-opus-4-6", "claude-haiku-4-5"):  # 2048, 4096, 4096
        usage = await _usage(client, model=model, system=[system], messages=[{"role": "user", "content": "q"}])
        assert usage["cache_creation_input_tokens"] == 0, model
        assert usage["cache_read_input_tokens"] == 0, model
        assert usage["input_tokens"] == _tokens(system, _text("q")), model
    short = _text("Be brief. " * 240, cache=True)  # ~600 tokens
    assert 512 <= _tokens(short) < 1024
    opus5 = await _usage(client, model="claude-opus-5", system=[short], messages=[{"role": "user", "content": "q"}])
    assert opus5["cache_creation_input_tokens"] == _tokens(short)
    sonnet = await _usage(client, system=[short], messages=[{"role": "user", "content": "q"}])
    assert sonnet["cache_creation_input_tokens"] == 0


async def test_ttl_expiry_on_the_test_clock_five_minutes_vs_one_hour() -> None:
    """5m entries expire 300 s after their last use (a hit refreshes them); 1h entries live 3600 s.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """
    clock = FakeClock()
    _, client = _twin(clock)
    five, hour = _text(SYSTEM, "5m"), _text(SYSTEM + "(hourly)", "1h")
    ask = [{"role": "user", "content": "q"}]
    await _usage(client, system=[five], messages=ask)
    await _usage(client, system=[hour], messages=ask)
    clock.advance(299)
    assert (await _usage(client, system=[five], messages=ask))["cache_read_input_tokens"] == _tokens(five)
    clock.advance(299)  # 598 s after the write, 299 s after the refreshing hit
    assert (await _usage(client, system=[five], messages=ask))["cache_read_input_tokens"] == _tokens(five)
    clock.advance(301)
    expired = await _usage(client, system=[five], messages=ask)
    assert expired["cache_read_input_tokens"] == 0
    assert expired["cache_creation"]["ephemeral_5m_input_tokens"] == _tokens(five)
    hour_hit = await _usage(client, system=[hour], messages=ask)  # 899 s after its write
    assert hour_hit["cache_read_input_tokens"] == _tokens(hour)
    clock.advance(3601)
    hour_miss = await _usage(client, system=[hour], messages=ask)
    assert hour_miss["cache_read_input_tokens"] == 0
    assert hour_miss["cache_creation"] == {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": _tokens(hour)}


async def test_creation_is_split_per_ttl() -> None:
    """cache_creation.ephemeral_1h/5m_input_tokens split the written tokens by the breakpoint that wrote them.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """
    _, client = _twin()
    tools = [{"name": "t", "description": "d", "input_schema": {"type": "object", "properties": {}}}]
    system, user = _text(SYSTEM, "1h"), _text("question " * 10, "5m")
    usage = await _usage(client, tools=tools, system=[system], messages=[{"role": "user", "content": [user]}])
    assert usage["cache_creation"] == {
        "ephemeral_5m_input_tokens": _tokens(user),
        "ephemeral_1h_input_tokens": count_json(tools[0]) + _tokens(system),
    }


async def test_thinking_change_misses_message_entries_but_keeps_system_entries() -> None:
    """Changing thinking parameters invalidates message-level cache entries; tools and system stay cached.

    https://platform.claude.com/docs/en/build-with-claude/extended-thinking
    """
    _, client = _twin()
    system, user = _text(SYSTEM, cache=True), _text("question " * 10, cache=True)
    await _usage(client, system=[system], messages=[{"role": "user", "content": [user]}])
    response = await client.messages.create(
        model=MODEL,
        max_tokens=2048,
        system=[system],
        messages=[{"role": "user", "content": [user]}],
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    assert response.usage.cache_read_input_tokens == _tokens(system)
    assert response.usage.cache_creation_input_tokens == _tokens(user)


async def test_top_level_cache_control_caches_the_last_block() -> None:
    """Automatic caching (top-level cache_control) puts the breakpoint on the last block.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """
    _, client = _twin()
    messages = [{"role": "user", "content": SYSTEM}]
    first = await _usage(client, messages=messages, extra_body={"cache_control": {"type": "ephemeral"}})
    assert first["cache_creation_input_tokens"] == _tokens(_text(SYSTEM))
    second = await _usage(client, messages=messages, extra_body={"cache_control": {"type": "ephemeral"}})
    assert second["cache_read_input_tokens"] == _tokens(_text(SYSTEM))
