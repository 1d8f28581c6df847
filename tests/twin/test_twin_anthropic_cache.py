"""Anthropic prompt-cache accounting in the twin: breakpoints, 20-block lookback, minimum length, TTLs.

Rules from https://platform.claude.com/docs/en/build-with-claude/prompt-caching. Expected numbers are computed
with segue._core.tokens (4 UTF-8 bytes per token over each block's canonical JSON, cache_control excluded).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest

from segue._core.tokens import count_json
from segue.catalog import Catalog
from segue.demo.sample_tools import FakeClock
from segue_twin import ScriptedPolicy, Twin, rules
from segue_twin.rules import catalog_rules

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


async def test_concurrent_identical_requests_each_write_until_the_first_response_begins() -> None:
    """ "A cache entry only becomes available after the first response begins": ten identical requests sent at
    once (asyncio.gather) all arrive before any response has begun, so each writes the prefix and none reads it
    (a fan-out pays ten writes); a request sent after them reads it.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """
    _, client = _twin()
    # The client's first request resolves its platform headers in a worker thread; the tasks would then reach the
    # twin at thread-completion times, some after a response began. One request first (another prompt) avoids it.
    await client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "warm-up"}])
    system = [_text(SYSTEM, cache=True)]
    ask = [{"role": "user", "content": "q"}]
    fan_out = await asyncio.gather(
        *(client.messages.create(model=MODEL, max_tokens=64, system=system, messages=ask) for _ in range(10))
    )
    assert [(r.usage.cache_read_input_tokens, r.usage.cache_creation_input_tokens) for r in fan_out] == [
        (0, _tokens(*system))
    ] * 10
    after = await client.messages.create(model=MODEL, max_tokens=64, system=system, messages=ask)
    assert (after.usage.cache_read_input_tokens, after.usage.cache_creation_input_tokens) == (_tokens(*system), 0)


PAGE = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"
BIG = "The shop database holds customers, products, orders and order items. " * 90  # ~1600 tokens


def _numbered(count: int, *, cache_on: tuple[int, ...] = (), changed: int | None = None) -> list[dict[str, Any]]:
    """Content blocks 1..count as the page numbers them: block 1 is long (above the minimum), the rest short;
    ``cache_on`` gets cache_control, ``changed`` differs from the other requests' block of that number."""
    blocks = []
    for n in range(1, count + 1):
        text = BIG if n == 1 else f"block {n}" + (" (edited)" if n == changed else "")
        blocks.append(_text(text, cache=n in cache_on))
    return blocks


async def _ask(client: anthropic.AsyncAnthropic, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return await _usage(client, messages=[{"role": "user", "content": blocks}])


async def test_lookback_window_is_20_positions_counting_the_breakpoints_own_block() -> None:
    """The page's lookback example checks "block 30 → 29 → 28... → 11 (check #20)": the window is 20 positions
    and the breakpoint's own block is the first. An entry 19 blocks before the breakpoint's block is read; one 20
    blocks before is one position outside the window, so nothing is read and the whole prefix is written again.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """
    for distance, found in ((19, True), (20, False)):
        _, client = _twin()
        await _ask(client, _numbered(2, cache_on=(2,)))  # an entry after block 2
        usage = await _ask(client, _numbered(2 + distance, cache_on=(2 + distance,)))
        prefix = _tokens(*_numbered(2))
        assert usage["cache_read_input_tokens"] == (prefix if found else 0), distance
        whole = _tokens(*_numbered(2 + distance))
        assert usage["cache_creation_input_tokens"] == whole - usage["cache_read_input_tokens"], distance


async def test_page_example_lookback_window_with_the_pages_block_numbers() -> None:
    """The page's worked example, "a conversation with 30 content blocks where you set cache_control only on
    block 30", with its numbers: block 31 is sent; "If you modify block 25", the system checks "30 → 29 → 28...
    → 25 (no match) → 24 (match!)"; "If you modify block 5", it checks "30 → 29 → 28... → 11 (check #20)" and
    "no cache hit occurs"; "if you had set an explicit cache_control breakpoint on block 5", the system would
    continue "block 5 (no match) → block 4 (match!)". The twin keeps entries where breakpoints wrote them, so the
    matching entries (after blocks 24 and 4) are written by an earlier request that had breakpoints there.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching
    """

    async def after_first_request(blocks: list[dict[str, Any]]) -> dict[str, Any]:
        _, client = _twin()
        await _ask(client, _numbered(30, cache_on=(4, 24, 30)))
        return await _ask(client, blocks)

    unchanged = await after_first_request(_numbered(31, cache_on=(30,)))
    assert unchanged["cache_read_input_tokens"] == _tokens(*_numbered(30))
    block_25 = await after_first_request(_numbered(31, cache_on=(30,), changed=25))
    assert block_25["cache_read_input_tokens"] == _tokens(*_numbered(24))
    block_5 = await after_first_request(_numbered(31, cache_on=(30,), changed=5))
    assert block_5["cache_read_input_tokens"] == 0
    assert block_5["cache_creation_input_tokens"] == _tokens(*_numbered(30, changed=5))
    with_breakpoint_on_5 = await after_first_request(_numbered(31, cache_on=(5, 30), changed=5))
    assert with_breakpoint_on_5["cache_read_input_tokens"] == _tokens(*_numbered(4))


def _calls(count: int) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": f"toolu_{i:02d}", "name": "run_query", "input": {"n": i}} for i in range(count)]


def _results(count: int, *, cache_last: bool = True) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": f"toolu_{i:02d}", "content": f"row {i}"} for i in range(count)
    ]
    if cache_last:
        results[-1]["cache_control"] = {"type": "ephemeral"}
    return results


#: The lookback's unit, from the prompt-caching page (platform.claude.com/docs/en/build-with-claude/prompt-caching):
#: "The system only checks up to 20 blocks before each explicit `cache_control` breakpoint", and the same page in
#: Korean (docs.anthropic.com/ko/docs/build-with-claude/prompt-caching): the system checks "all previous content
#: block boundaries" ("모든 이전 콘텐츠 블록 경계"), up to about 20 blocks before the explicit breakpoint. The unit is
#: the content block; the page names no exception for tool_use or tool_result blocks, and strands#3348 measured a
#: full re-write (134,082 tokens) after 18 parallel tool calls and their 18 results.
LOOKBACK_UNIT = "content block"


@pytest.mark.parametrize(("calls", "found"), [(9, True), (10, False)])
async def test_each_tool_use_and_tool_result_block_is_one_lookback_position(calls: int, found: bool) -> None:
    """Each `tool_use` and each `tool_result` is one content block of the lookback (LOOKBACK_UNIT): after 9
    parallel calls and their 9 results the breakpoint on the last result is 18 blocks after the entry and finds it;
    after 10 (20 blocks) the entry is one position outside the window, exactly as 20 text blocks would be."""
    assert LOOKBACK_UNIT == "content block"
    _, client = _twin()
    question = [{"role": "user", "content": [_text(BIG, cache=True)]}]
    await _usage(client, messages=question)
    moved = [{"role": "user", "content": [_text(BIG)]}]  # the only breakpoint is now on the last result
    parallel = [*moved, {"role": "assistant", "content": _calls(calls)}, {"role": "user", "content": _results(calls)}]
    usage = await _usage(client, messages=parallel)
    assert usage["cache_read_input_tokens"] == (_tokens(_text(BIG)) if found else 0)
    # The same number of text blocks gives the same answer: the block type does not matter.
    _, client = _twin()
    await _usage(client, messages=question)
    texts = [_text(f"row {i}") for i in range(2 * calls - 1)] + [_text("last row", cache=True)]
    as_text = await _usage(client, messages=[{"role": "user", "content": [_text(BIG), *texts]}])
    assert as_text["cache_read_input_tokens"] == usage["cache_read_input_tokens"]


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


async def test_a_model_without_a_published_minimum_is_served_and_cached_from_the_first_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Not a vendor rule but the twin's policy where the vendor is silent: the prompt caching page lists no
    minimum for some models the SDK names (the catalog leaves `cache_min_tokens` absent rather than invent one).
    The twin serves them instead of failing, caches from the first token, and says so once in the log, without
    claiming the vendor publishes none (a page may, that the catalog's sources did not show)."""
    resolved = Catalog.load().resolve("claude-sonnet-5-5", "anthropic")
    assert resolved.get("llm", "cache_min_tokens", default=None) is None
    rules._warn_no_minimum.cache_clear()  # once per process: clear it so this test sees the line
    _, client = _twin()
    short = _text("Be brief. " * 20, cache=True)  # far below every published minimum
    with caplog.at_level("WARNING", logger="segue.twin"):
        first = await _usage(
            client, model="claude-sonnet-5-5", system=[short], messages=[{"role": "user", "content": "q"}]
        )
        again = await _usage(
            client, model="claude-sonnet-5-5", system=[short], messages=[{"role": "user", "content": "q"}]
        )
    assert first["cache_creation_input_tokens"] == _tokens(short)
    assert again["cache_read_input_tokens"] == _tokens(short)
    notes = [r.getMessage() for r in caplog.records if "no llm.cache_min_tokens" in r.getMessage()]
    assert len(notes) == 1 and "claude-sonnet-5-5" in notes[0]
    # The gap is the catalog's, not the vendor's: the line names segue's catalog and blames no vendor.
    assert "segue's catalog has no minimum for" in notes[0] and "publishes none" not in notes[0]
    assert "none was found in a vendor source" in notes[0]


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


TOOL = {  # long enough to be cached on its own (above the 1024-token minimum)
    "name": "run_query",
    "description": "Run one read-only SQL query against the shop database. " * 80,
    "input_schema": {"type": "object", "properties": {}},
}
PNG = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg=="}}


async def _levels_read(first: dict[str, Any], second: dict[str, Any]) -> tuple[int, dict[str, int]]:
    """Send a request with a breakpoint at the end of each level (tools, system, messages), then a changed one;
    returns what the second read and the token count of each level's prefix."""
    _, client = _twin()
    tools = [{**TOOL, "cache_control": {"type": "ephemeral"}}]
    system = [_text(SYSTEM, cache=True)]
    question = {"role": "user", "content": [_text("question " * 300, cache=True)]}
    base = {"model": MODEL, "max_tokens": 64, "tools": tools, "system": system}
    await client.messages.create(**{**base, "messages": [question], **first})
    messages = second.pop("messages", [question])
    response = await client.messages.create(**{**base, "messages": messages, **second})
    tools_tokens = count_json(TOOL)
    system_tokens = tools_tokens + _tokens(*system)
    return response.usage.cache_read_input_tokens or 0, {
        "tools": tools_tokens,
        "system": system_tokens,
        "messages": system_tokens + _tokens(*question["content"]),
    }


async def test_changing_tool_choice_invalidates_the_message_cache() -> None:
    """ "Changes to `tool_choice` parameter only affect message blocks": tools and system stay cached.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching (what invalidates the cache)
    """
    read, levels = await _levels_read({}, {"tool_choice": {"type": "auto"}})
    assert read == levels["system"]
    same, levels = await _levels_read({"tool_choice": {"type": "auto"}}, {"tool_choice": {"type": "auto"}})
    assert same == levels["messages"]


async def test_adding_an_image_invalidates_the_message_cache() -> None:
    """ "Adding/removing images anywhere in the prompt affects message blocks": a later turn that adds an image
    misses the earlier message entries although they are unchanged; tools and system stay cached.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching (what invalidates the cache)
    """
    question = {"role": "user", "content": [_text("question " * 300, cache=True)]}
    follow_up: list[dict[str, Any]] = [_text("and this one?", cache=True)]
    with_image = [question, {"role": "assistant", "content": "ok"}, {"role": "user", "content": [PNG, *follow_up]}]
    read, levels = await _levels_read({}, {"messages": with_image})
    assert read == levels["system"]
    without_image = [question, {"role": "assistant", "content": "ok"}, {"role": "user", "content": follow_up}]
    read, levels = await _levels_read({}, {"messages": without_image})
    assert read == levels["messages"]


async def test_effort_change_has_the_thinking_parameters_effect_and_its_default_invalidates_nothing() -> None:
    """Effort has "the same model-specific effect on tool and system caches as thinking parameters", and "setting
    effort explicitly to the model's default is equivalent to omitting it and does not invalidate". The default is
    `high`: "Setting effort to `"high"` produces exactly the same behavior as omitting the effort parameter
    entirely" (the effort page). So `high` -> `low` misses the message entries as a thinking change does (tools
    and system stay cached, as `test_thinking_change_misses_message_entries_but_keeps_system_entries`), and
    omitted -> `high` reads the whole prefix.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching (what invalidates the cache);
    https://platform.claude.com/docs/en/build-with-claude/effort
    """
    read, levels = await _levels_read({"output_config": {"effort": "high"}}, {"output_config": {"effort": "low"}})
    assert read == levels["system"]
    read, levels = await _levels_read({}, {"output_config": {"effort": "high"}})
    assert read == levels["messages"]
    read, levels = await _levels_read({"output_config": {"effort": "high"}}, {})
    assert read == levels["messages"]
    same, levels = await _levels_read({"output_config": {"effort": "low"}}, {"output_config": {"effort": "low"}})
    assert same == levels["messages"]


async def test_changing_speed_invalidates_the_system_and_message_cache() -> None:
    """The page's invalidation table lists `speed` with the system cache: switching to fast mode misses the
    system and message entries; the tools entry survives.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching (what invalidates the cache)
    """
    read, levels = await _levels_read({}, {"speed": "fast"})
    assert read == levels["tools"]


async def test_max_tokens_zero_populates_the_cache_without_generating_a_response() -> None:
    """`max_tokens`: "Set to `0` to populate the prompt cache without generating a response." The pre-warming
    request writes the prefix and returns no content; the real request then reads it.

    Pinned anthropic SDK, `MessageCreateParamsBase.max_tokens` (linking the page's "pre-warming the cache").
    """
    twin = Twin(policy=ScriptedPolicy(["the answer"]))
    client = twin.anthropic_client()
    system = [_text(SYSTEM, cache=True)]
    ask = [{"role": "user", "content": "q"}]
    warm = await client.messages.create(model=MODEL, max_tokens=0, system=system, messages=ask)
    assert warm.content == [] and warm.stop_reason == "max_tokens" and warm.usage.output_tokens == 0
    assert warm.usage.cache_creation_input_tokens == _tokens(*system)
    answer = await client.messages.create(model=MODEL, max_tokens=64, system=system, messages=ask)
    assert answer.usage.cache_read_input_tokens == _tokens(*system)
    assert [b.type for b in answer.content] == ["text"]
    assert len(twin.policy.views) == 1  # type: ignore[attr-defined]


async def test_max_tokens_zero_is_refused_with_stream_thinking_structured_outputs_or_a_forced_tool_choice() -> None:
    """Pre-warming (`max_tokens: 0`) is refused by the vendor with `stream: true`, with thinking enabled, with
    structured outputs (`output_config.format`) and with a forced `tool_choice`: each is a 400
    invalid_request_error naming the setting, and nothing is written to the cache.

    https://platform.claude.com/docs/en/build-with-claude/prompt-caching ("pre-warming the cache")
    """
    twin = Twin(policy=ScriptedPolicy(["the answer"]))
    client = twin.anthropic_client()
    system = [_text(SYSTEM, cache=True)]
    ask = [{"role": "user", "content": "q"}]
    tools = [{"name": "t", "description": "d", "input_schema": {"type": "object", "properties": {}}}]
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    refused = {
        "`stream: true`": {"stream": True},
        "thinking ('enabled')": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
        "thinking ('adaptive')": {"thinking": {"type": "adaptive"}},
        "structured outputs (`output_config.format`)": {
            "output_config": {"format": {"type": "json_schema", "schema": schema}}
        },
        "a forced `tool_choice` ('any')": {"tools": tools, "tool_choice": {"type": "any"}},
        "a forced `tool_choice` ('tool')": {"tools": tools, "tool_choice": {"type": "tool", "name": "t"}},
    }
    for named, extra in refused.items():
        with pytest.raises(anthropic.BadRequestError) as caught:
            await client.messages.create(model=MODEL, max_tokens=0, system=system, messages=ask, **extra)
        body = caught.value.body
        assert isinstance(body, dict) and body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
        assert body["error"]["message"].startswith(f"max_tokens: 0 (cache pre-warming) cannot be combined with {named}")
    allowed = await client.messages.create(
        model=MODEL, max_tokens=0, system=system, messages=ask, tools=tools, tool_choice={"type": "auto"}
    )
    assert allowed.content == [] and allowed.usage.cache_creation_input_tokens > 0
