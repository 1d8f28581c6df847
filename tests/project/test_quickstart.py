"""The quickstart shows caching (issue 30 item 2): its agent's prompt and tools are above the model's minimum
cacheable prompt, so its second turn reads from the cache, and the page says what that minimum is.

Before, the quickstart's prompt was one line: every run warned "cached nothing" and the conversation read 0-37%
of its input from the cache, with no word on why.
"""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from docs_blocks import blocks

from segue.catalog import Catalog

PAGE = REPO / "docs" / "quickstart.md"


def _run_blocks(sources: list[str]) -> dict[str, Any]:
    """The blocks in one namespace with top-level await, as `python -m asyncio` runs a paste."""
    namespace: dict[str, Any] = {}

    async def run() -> None:
        for source in sources:
            result = eval(compile(source, str(PAGE), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), namespace)
            if asyncio.iscoroutine(result):
                await result

    asyncio.run(run())
    return namespace


def test_the_quickstarts_second_turn_reads_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "SEGUE_CATALOG_PATH"):
        monkeypatch.delenv(key, raising=False)
    page = blocks(PAGE).blocks
    agent_block = page[0]
    continue_block = next(b for b in page if "second = await agent.run(" in b.source)
    ns = _run_blocks([agent_block.source, continue_block.source])
    first, second = ns["first"], ns["second"]

    minimum = Catalog.load().resolve("claude-sonnet-4-6", "anthropic").cache_min_tokens
    assert minimum is not None
    # Turn 1 wrote its prefix (it was above the minimum); turn 2 replayed turn 1 and read it back.
    assert first.usage.cache_write_tokens > 0
    assert second.usage.cache_read_tokens >= minimum and second.cached_share > 0.5

    # What the page prints and says is what ran, and the minimum it names is the catalog's.
    printed = capsys.readouterr().out.splitlines()[-1]
    comment = re.search(r"^# (turn 2 read .+)$", continue_block.source, re.M)
    assert comment is not None and printed == comment.group(1)
    text = PAGE.read_text(encoding="utf-8")
    assert f"turn 2 reads {second.cached_share:.0%} of its input from the cache" in text
    assert f"{minimum:,} tokens for claude-sonnet-4-6 (the catalog's `llm.cache_min_tokens`" in text
