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
