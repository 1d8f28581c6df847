"""`cache_ttl="auto"`: the cache lifetime chosen per run from the conversation's pauses and the catalog's prices.

The rule (segue.cache.ttl, docs/replay.md "Cache TTL") is checked on its own with the packaged catalog's prices,
with prices of a catalog layer that move the break-even, and end to end on the twin with a fake clock: the run
after a pause longer than five minutes writes with 1h, the runs before it with 5m, every breakpoint of a request
with the same lifetime, and the choice is the run's `ttl-chosen` note. Bad configurations are refused when the
driver is built, before any run row exists.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from segue import Agent, RunStore
from segue.cache.ttl import auto_ttl, choose_ttl, pauses_between, ttl_seconds
from segue.catalog import Catalog
from segue.demo import shop_db as sample_db
from segue.providers import AnthropicProvider
from segue_twin import Twin

MODEL = "claude-sonnet-4-6"
MINUTE = 60.0
PROMPT = "You answer questions about the shop database. Keep answers short and exact. " * 150
TOOLS = [sample_db.list_tables, sample_db.describe_table, sample_db.run_query]


def _layer(tmp_path: Path, configuration: dict[str, Any]) -> Catalog:
    d = tmp_path / "layer"
    d.mkdir(exist_ok=True)
    row = {"model": MODEL, "vendor": "anthropic", "role": "inference_provider", "priority": 100}
    (d / "rows.json").write_text(
        json.dumps({"$schema": "x", "version": 2, "model_vendors": [{**row, "configuration": configuration}]})
    )
    return Catalog.load([d], env=False)


def test_ttl_names_spell_their_lifetimes() -> None:
    assert [ttl_seconds(n) for n in ("5m", "1h", "30m", "12h", "24h")] == [300, 3600, 1800, 43200, 86400]
    assert ttl_seconds("in_memory") is None


def test_pauses_run_from_each_end_to_the_next_start_and_to_now() -> None:
    spans = [(0.0, 10.0), (190.0, 200.0), (920.0, None), (1000.0, 1010.0)]
    # 10 -> 190, 200 -> 920; the unfinished run tells nothing; 1010 -> now
    assert pauses_between(spans, 1310.0) == (180.0, 720.0, 300.0)
    assert pauses_between([], 5.0) == ()


def test_the_packaged_prices_write_5m_until_a_pause_outlives_it(catalog: Catalog) -> None:
    """Anthropic's prompt-caching page: 5m writes 1.25x input, 1h writes 2x, reads 0.1x; the catalog's
    claude-sonnet-4-6@anthropic prices ($3.75, $6, $0.30 per million) are those multiples of $3."""
    terms = auto_ttl(catalog.resolve(MODEL, "anthropic"))
    assert [(n, s, w) for n, s, w in terms.lifetimes] == [("5m", 300, 3.75), ("1h", 3600, 6.0)]
    assert terms.read == 0.3
    assert choose_ttl(terms, []).ttl == "5m"  # the first turn: nothing seen
    assert choose_ttl(terms, [3 * MINUTE, 2 * MINUTE]).ttl == "5m"  # turns come quickly
    after_long = choose_ttl(terms, [3 * MINUTE, 12 * MINUTE])
    assert after_long.ttl == "1h"
    assert "'1h'" in after_long.reason and "1 outlived 5m" in after_long.reason
    # A pause past the hour expires both lifetimes: it is no reason to pay the longer one.
    assert choose_ttl(terms, [3 * MINUTE, 90 * MINUTE]).ttl == "5m"


def test_the_break_even_moves_with_the_prices(catalog: Catalog, tmp_path: Path) -> None:
    """cost[t] = write[t] + (n + 1) * share[t] * (write[cheapest] - read). At the packaged prices one long pause
    in ten pays for 1h; with a 1h write at 20x a 5m one it does not, and twenty long pauses in twenty do."""
    one_in_ten = [2 * MINUTE] * 9 + [12 * MINUTE]
    assert choose_ttl(auto_ttl(catalog.resolve(MODEL, "anthropic")), one_in_ten).ttl == "1h"  # 3.75 + 11*0.1*3.45
    pricey = _layer(tmp_path, {"pricing": {"cache_write": {"5m": 3.75, "1h": 75.0}}})
    terms = auto_ttl(pricey.resolve(MODEL, "anthropic"))
    assert choose_ttl(terms, one_in_ten).ttl == "5m"  # 3.75 + 11 * 0.1 * 3.45 = 7.55 < 75
    assert choose_ttl(terms, [12 * MINUTE] * 19).ttl == "5m"  # 3.75 + 20 * 3.45 = 72.75 < 75
    assert choose_ttl(terms, [12 * MINUTE] * 20).ttl == "1h"  # 3.75 + 21 * 3.45 = 76.2 > 75


@pytest.mark.parametrize(
    ("configuration", "says"),
    [
        ({"llm": {"cache_ttls": ["5m"]}, "pricing": {"cache_write": {"1h": None}}}, "offers ['5m']"),
        (
            {"llm": {"cache_ttls": ["5m", "forever"]}, "pricing": {"cache_write": {"1h": None, "forever": 9.0}}},
            "no duration",
        ),
        ({"llm": {"cache_ttls": ["5m", "1h", "30m"]}, "pricing": {"cache_write": {"30m": 5.0}}}, "cannot send"),
    ],
)
def test_auto_where_the_path_cannot_choose_is_refused_when_the_driver_is_built(
    tmp_path: Path, configuration: dict[str, Any], says: str
) -> None:
    twin = Twin()
    store = RunStore("sqlite:///:memory:")
    with pytest.raises(ValueError, match="cache_ttl='auto'") as e:
        AnthropicProvider(
            MODEL, cache_ttl="auto", catalog=_layer(tmp_path, configuration), client=twin.anthropic_client()
        )
    assert says in str(e.value)
    assert store.list_runs() == []  # nothing was ever written: the agent could not even be built


def test_auto_on_a_path_without_cache_prices_or_entry_is_refused(tmp_path: Path) -> None:
    twin = Twin()
    with pytest.raises(ValueError, match=r"claude-unknown-9@anthropic's cache prices, but the catalog has no input/"):
        AnthropicProvider("claude-unknown-9", cache_ttl="auto", client=twin.anthropic_client())
    unpriced = _layer(tmp_path, {"pricing": {"cache_write": {"1h": None}}})
    with pytest.raises(ValueError, match=r"pricing.cache_write\['1h'\]"):
        AnthropicProvider(MODEL, cache_ttl="auto", catalog=unpriced, client=twin.anthropic_client())


def test_unknown_ttl_values_are_refused() -> None:
    twin = Twin()
    with pytest.raises(ValueError, match=r"cache_ttl must be '5m', '1h', 'auto' or None, got '2h'"):
        AnthropicProvider(MODEL, cache_ttl="2h", client=twin.anthropic_client())  # type: ignore[arg-type]


class Clock:
    """The twin's clock and the store's, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def iso(self) -> str:
        return datetime.fromtimestamp(self.now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _ttls(body: dict[str, Any]) -> list[str]:
    """Every cache_control ttl of a request body, in wire order (tools -> system -> messages)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("cache_control"), dict):
                found.append(node["cache_control"].get("ttl", "5m"))
            for key in ("tools", "system", "messages", "content"):
                if isinstance(node.get(key), list):
                    for item in node[key]:
                        walk(item)

    walk(body)
    return found


async def test_a_conversation_writes_5m_until_a_long_pause_then_1h() -> None:
    """Pauses of 3 then 12 minutes: turns 1 and 2 write with 5m, turn 3 (after the 12-minute pause, which
    outlived 5m) with 1h, on every breakpoint of every request: the prompt-caching page's rule for mixing
    lifetimes, "a 1-hour cache entry must appear before any 5-minute cache entries"
    (https://platform.claude.com/docs/en/build-with-claude/prompt-caching), holds because a request carries one.
    The choice is the run's ttl-chosen note; the run's input after the pause is read from the 1h entry later."""
    clock = Clock()
    twin = Twin(clock=clock)
    store = RunStore("sqlite:///:memory:")
    agent = Agent(AnthropicProvider(MODEL, cache_ttl="auto", client=twin.anthropic_client()), PROMPT, TOOLS, store)
    runs: list[str] = []
    notes: list[str] = []
    with (
        mock.patch("segue.store.records.utc_now", clock.iso),
        mock.patch("segue.store.run_store.utc_now", clock.iso),
    ):
        for pause in (0, 3, 12, 20):
            clock.now += pause * MINUTE
            result = await agent.run("Which tables are there?", runs=runs or None)
            assert result.status == "success"
            runs.append(result.run_id)
            note = [n for n in result.notes or [] if n.kind == "ttl-chosen"]
            assert len(note) == 1 and note[0].count == result.iterations
            notes.append(note[0].message)
            bodies = [c.provider_request for c in store.get_run(result.run_id).llm_interactions]
            written = {ttl for body in bodies for ttl in _ttls(body)}
            assert len(written) == 1, written  # one lifetime per request, so never a 1h after a 5m
            if pause == 20:  # the 1h entry turn 3 wrote outlived the 20 minutes: the prefix is read, not written
                assert (result.usage.cache_read_tokens or 0) > 0
                assert {t for t, n in (result.usage.cache_write_tokens_by_ttl or {}).items() if n} <= {"1h"}
            clock.now += 5.0
    assert [m.split("'")[1] for m in notes] == ["5m", "5m", "1h", "1h"]
    assert "no pause seen yet" in notes[0]
    assert "2 pause(s) seen, the longest 12.1 min (1 outlived 5m, 0 outlived 1h)" in notes[2]


async def test_runs_show_says_which_ttl_auto_chose(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from segue.apps.cli.main import main

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = RunStore(url)
    twin = Twin()
    agent = Agent(AnthropicProvider(MODEL, cache_ttl="auto", client=twin.anthropic_client()), PROMPT, TOOLS, store)
    result = await agent.run("Which tables are there?")
    store.close()
    capsys.readouterr()
    assert main(["runs", "show", result.run_id, "--db", url]) == 0
    out = capsys.readouterr().out
    assert "cache TTL: cache_ttl auto chose '5m' on claude-sonnet-4-6@anthropic: no pause seen yet" in out
