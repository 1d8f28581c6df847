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

from segue.catalog import Catalog
from tests._support.docs_blocks import blocks
from tests._support.environment import REPO

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


def _settings_block() -> str:
    return next(b.source for b in blocks(PAGE).blocks if "model_settings=ModelSettings(" in b.source)


def test_the_quickstarts_settings_example_takes_settings_every_wire_takes_and_links_the_table() -> None:
    """Issue 40 item 5: the quickstart listed `temperature` among the model settings, which Anthropic's wire
    refuses. Its example uses only settings every driver sends, the page links providers.md's table, and a
    refusal message points at it."""
    from segue import ModelSettings
    from segue._support.readers import WireError
    from segue.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider
    from segue.twin import Twin
    from segue.wire.settings import SETTINGS_TABLE

    source = _settings_block()
    example = source.split("try:")[0]  # the refusal after `try:` is the point of that part
    used = set(re.findall(r"ModelSettings\((\w+)=", example)) | set(re.findall(r'\{"(\w+)":', example))
    assert used == {"max_tokens", "reasoning_effort"}
    twin = Twin()
    drivers = [
        AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()),
        OpenAIResponsesProvider("gpt-5", client=twin.openai_client()),
        OpenAIChatProvider("gpt-4.1", client=twin.openai_client()),
    ]
    for driver in drivers:
        driver.check_settings(ModelSettings(max_tokens=1024, reasoning_effort="low"))
    text = PAGE.read_text(encoding="utf-8")
    assert "](providers.md#model-settings)" in text and "## Model settings" in (REPO / "docs/providers.md").read_text()
    assert SETTINGS_TABLE == "docs/providers.md#model-settings"
    with pytest.raises(WireError) as refused:  # the run turns it into an InputError before any write
        drivers[0].check_settings(ModelSettings(temperature=0.2))
    assert str(refused.value).endswith(f"(which wire takes which setting: {SETTINGS_TABLE})")


def test_the_quickstart_shows_the_offline_options_side_by_side() -> None:
    """Issue 40 item 1: the twin's rules, a scripted provider and a local OpenAI-compatible server, in one table,
    with the rules of the twin for an app's own tools stated where a newcomer reads them."""
    text = PAGE.read_text(encoding="utf-8")
    table = text[text.index("### Offline: the twin, a script, or a local model") :]
    table = table[: table.index("```python")]
    for expected in (
        "`client=Twin().anthropic_client()`",
        "`segue.testing.ScriptedProvider`",
        "`llama-server`",
        "](providers.md#self-hosted-servers-llamacpp-vllm)",
        'calls `look_up_order(order_id="4417")`',
        "`twin-note`",
        "`tool-failed`",
    ):
        assert expected in table, expected
    assert "## Self-hosted servers (llama.cpp, vLLM)" in (REPO / "docs/providers.md").read_text()


def test_the_stream_example_ends_its_line_and_both_front_pages_name_cached_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40 item 8: the stream example left `6345.50>>>` on one line (the deltas end without a newline), and
    `cached_share` was in neither the README nor the quickstart."""
    monkeypatch.chdir(tmp_path)
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "SEGUE_CATALOG_PATH"):
        monkeypatch.delenv(key, raising=False)
    page = blocks(PAGE).blocks
    stream = next(b for b in page if "agent.stream(" in b.source)
    continued = next(b for b in page if "second = await agent.run(" in b.source)
    _run_blocks([page[0].source, continued.source, stream.source])
    assert capsys.readouterr().out.endswith("6345.50\n")
    for text in (PAGE.read_text(encoding="utf-8"), (REPO / "README.md").read_text(encoding="utf-8")):
        assert "cached_share" in text
