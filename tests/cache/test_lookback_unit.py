"""segue's own lookback check (`cache-beyond-lookback`) counts what Anthropic counts: content blocks, each tool_use
and each tool_result one. "The system only checks up to 20 blocks before each explicit `cache_control` breakpoint"
(platform.claude.com/docs/en/build-with-claude/prompt-caching); in Korean the page names the unit, "all
previous content block boundaries" ("모든 이전 콘텐츠 블록 경계",
docs.anthropic.com/ko/docs/build-with-claude/prompt-caching)."""

from __future__ import annotations

from typing import Any

import pytest

from segue.cache.misses import cache_notes
from segue.catalog import Catalog
from segue.generated import Usage

MODEL = "claude-sonnet-4-6"
MARK = {"type": "ephemeral"}


def question(*, marked: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": "Which orders shipped?"}
    return {"role": "user", "content": [{**block, "cache_control": MARK} if marked else block]}


def fan_out(calls: int) -> dict[str, Any]:
    """The previous request (the question, marked) and the next one after `calls` parallel calls and results."""
    uses = [{"type": "tool_use", "id": f"toolu_{i}", "name": "lookup", "input": {"n": i}} for i in range(calls)]
    results: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "shipped"} for i in range(calls)
    ]
    results[-1] = {**results[-1], "cache_control": MARK}
    messages = [question(marked=False), {"role": "assistant", "content": uses}, {"role": "user", "content": results}]
    return {"model": MODEL, "messages": messages}


@pytest.mark.parametrize(("calls", "noted"), [(9, False), (10, True)])
def test_each_tool_block_counts_one_lookback_position(calls: int, noted: bool) -> None:
    path = Catalog.load().resolve(MODEL, "anthropic")
    previous = {"model": MODEL, "messages": [question(marked=True)]}
    usage = Usage(input_tokens=5000, output_tokens=1, cache_read_tokens=0, cache_write_tokens=5000)
    notes = cache_notes(path, fan_out(calls), usage, previous)
    assert [n.kind for n in notes] == (["cache-beyond-lookback"] if noted else [])
    if noted:
        assert notes[0].measured == 2 * calls and notes[0].limit == 20


def test_every_wire_reads_its_own_bodies_for_the_misses_check() -> None:
    """cache/misses.py reads no vendor key: each catalog `wire` (the enum of schemas/catalog.schema.json) has its
    `segue.wire.<wire>.misses` module, so a new wire cannot be skipped silently."""
    import json

    from segue.cache import misses
    from tests._support.environment import REPO

    schema = json.loads((REPO / "schemas" / "catalog.schema.json").read_text())
    wires = set(schema["$defs"]["Vendor"]["properties"]["wire"]["enum"])
    assert set(misses._WIRES) == wires
    assert {m.__name__ for m in misses._WIRES.values()} == {f"segue.wire.{w}.misses" for w in wires}


def test_the_lookback_and_the_routing_key_are_each_one_wires_knowledge() -> None:
    """The same marked body: Anthropic's wire (and OpenRouter's, whose anthropic/* bodies carry Anthropic's
    cache_control) counts its breakpoints; the OpenAI wires have no block lookback. Only the Responses wire routes by
    `prompt_cache_key`."""
    from segue.wire.anthropic import misses as anthropic
    from segue.wire.openai_chat import misses as chat
    from segue.wire.openai_responses import misses as responses
    from segue.wire.openrouter import misses as openrouter

    body = fan_out(3)
    assert anthropic.breakpoint_positions(body) == openrouter.breakpoint_positions(body) == [7]
    assert chat.breakpoint_positions(body) == responses.breakpoint_positions(body) == []
    assert responses.lacks_routing_key({"input": []}) and not responses.lacks_routing_key({"prompt_cache_key": "t1"})
    assert not any(m.lacks_routing_key({"input": []}) for m in (anthropic, chat, openrouter))
