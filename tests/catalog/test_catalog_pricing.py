"""Cache writes priced per TTL: the catalog's `pricing.cache_write` map, `Usage.cache_write_tokens_by_ttl`, and
the parsers and sums that fill it."""

from __future__ import annotations

import pytest

from segue._support.readers import tokens_by_ttl
from segue.catalog import Catalog, CatalogLookupError, Prices
from segue.generated import Usage, get_converter
from segue.run.conversation import add_usage
from segue.wire.anthropic import request as anthropic_wire

M = 1_000_000


def test_each_ttl_is_priced_with_its_own_write_price(catalog: Catalog) -> None:
    """OpenAI's GPT-6.2 Sol page: 30-minute writes $2.50 and 12-hour writes $5 per million, cached input $0.10."""
    usage = Usage(input_tokens=4 * M, output_tokens=M, cache_read_tokens=M, cache_write_tokens=2 * M,
                  cache_write_tokens_by_ttl={"30m": M, "12h": M})  # fmt: skip
    # 1M uncached * 2 + 1M read * 0.1 + 1M 30m-writes * 2.5 + 1M 12h-writes * 5 + 1M out * 10
    assert catalog.cost(usage, "gpt-6.2-sol", "openai") == pytest.approx(2 + 0.1 + 2.5 + 5 + 10)


def test_writes_without_a_ttl_count_at_the_default_ttl(catalog: Catalog) -> None:
    """The first of llm.cache_ttls is the default: 30m on GPT-5.6 and later, 5m on Anthropic."""
    usage = Usage(input_tokens=2 * M, output_tokens=0, cache_write_tokens=M)
    assert catalog.cost(usage, "gpt-6-sol", "openai") == pytest.approx(2 + 2.5)
    assert catalog.cost(usage, "claude-opus-5", "anthropic") == pytest.approx(5 + 6.25)
    partly = Usage(input_tokens=2 * M, output_tokens=0, cache_write_tokens=M, cache_write_tokens_by_ttl={"1h": M // 2})
    assert catalog.cost(partly, "claude-opus-5", "anthropic") == pytest.approx(5 + 6.25 / 2 + 10 / 2)


def test_a_write_ttl_without_a_price_means_no_cost(catalog: Catalog) -> None:
    """GPT-6 Sol's page gives the 30-minute write price only: 12-hour writes have no known price."""
    usage = Usage(input_tokens=M, output_tokens=0, cache_write_tokens=M, cache_write_tokens_by_ttl={"12h": M})
    with pytest.raises(CatalogLookupError) as info:
        catalog.cost(usage, "gpt-6-sol", "openai")
    assert str(info.value).startswith("no cost for gpt-6-sol@openai: the usage needs pricing.cache_write['12h']")
    assert info.value.expected == "pricing.cache_write['12h']"


def test_writes_on_a_path_with_no_ttl_cannot_be_priced() -> None:
    prices = Prices(input=1, output=1, cache_write={})
    usage = Usage(input_tokens=10, output_tokens=0, cache_write_tokens=5)
    assert prices.writes_by_ttl(usage) == {"": 5}
    assert prices.missing(usage) == ["llm.cache_ttls (writes name no TTL)"]


def test_per_ttl_counts_must_be_parts_of_the_total() -> None:
    prices = Prices(input=1, output=1, cache_write={"5m": 1}, default_ttl="5m")
    with pytest.raises(ValueError, match=r"adds up to 12 tokens, more than cache_write_tokens \(10\)"):
        prices.cost(
            Usage(input_tokens=20, output_tokens=0, cache_write_tokens=10, cache_write_tokens_by_ttl={"5m": 12})
        )
    only_details = Usage(input_tokens=20, output_tokens=0, cache_write_tokens_by_ttl={"5m": 12})
    assert prices.writes_by_ttl(only_details) == {"5m": 12}  # a vendor that sends the parts but no total


def test_add_usage_sums_writes_per_ttl() -> None:
    a = Usage(input_tokens=10, output_tokens=1, cache_write_tokens=6, cache_write_tokens_by_ttl={"5m": 4, "1h": 2})
    b = Usage(input_tokens=5, output_tokens=1, cache_write_tokens=3, cache_write_tokens_by_ttl={"1h": 3})
    total = add_usage(a, b)
    assert (total.cache_write_tokens, total.cache_write_tokens_by_ttl) == (9, {"5m": 4, "1h": 5})
    plain = Usage(input_tokens=1, output_tokens=1)
    assert add_usage(plain, plain).cache_write_tokens_by_ttl is None  # unknown stays unknown
    assert add_usage(plain, b).cache_write_tokens_by_ttl == {"1h": 3}


def test_anthropic_usage_keeps_each_ttl() -> None:
    """Anthropic's usage: `cache_creation` splits cache_creation_input_tokens into ephemeral_5m_input_tokens and
    ephemeral_1h_input_tokens (anthropic SDK `CacheCreation`)."""
    usage = anthropic_wire.parse_usage({
        "input_tokens": 12, "output_tokens": 7, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 50,
        "cache_creation": {"ephemeral_5m_input_tokens": 30, "ephemeral_1h_input_tokens": 20},
    })  # fmt: skip
    assert (usage.input_tokens, usage.cache_write_tokens) == (162, 50)
    assert usage.cache_write_tokens_by_ttl == {"5m": 30, "1h": 20}
    bare = anthropic_wire.parse_usage({"input_tokens": 12, "output_tokens": 7, "cache_creation_input_tokens": 5})
    assert bare.cache_write_tokens_by_ttl is None  # no split reported: priced at the default TTL


def test_openai_ttl_details_read_with_the_same_helper() -> None:
    """The openai SDK's `InputTokensDetailsCacheWriteTokensDetails` has ttl_30m_tokens and ttl_12h_tokens."""
    details = {"ttl_30m_tokens": 600, "ttl_12h_tokens": 400}
    assert tokens_by_ttl(details, "ttl_", "_tokens", "openai usage") == {"30m": 600, "12h": 400}
    assert tokens_by_ttl(None, "ttl_", "_tokens", "openai usage") is None
    assert tokens_by_ttl({"ttl__tokens": 1, "other": 2}, "ttl_", "_tokens", "openai usage") == {}


def test_per_ttl_counts_are_checked_when_structured() -> None:
    conv = get_converter()
    usage = conv.structure({"input_tokens": 3, "output_tokens": 1, "cache_write_tokens_by_ttl": {"5m": 2}}, Usage)
    assert usage.cache_write_tokens_by_ttl == {"5m": 2}
    for bad in ({"5m": "2"}, {"5m": -1}, {"5m": 1.5}, ["5m"]):
        with pytest.raises(Exception):  # noqa: B017 - cattrs wraps TypeError/ValueError in ClassValidationError
            conv.structure({"input_tokens": 3, "output_tokens": 1, "cache_write_tokens_by_ttl": bad}, Usage)


def test_sonnet_5_5_cache_reads_cost_5_percent_of_input(catalog: Catalog) -> None:
    """Anthropic cut Claude Sonnet 5.5 cache hits to 0.05x input on 2026-10-07: $0.10 per million, not $0.20.

    Source: the pricing page (platform.claude.com/docs/en/about-claude/pricing) as the row's note records it.
    """
    r = catalog.resolve("claude-sonnet-5-5", "anthropic")
    assert (r.get("pricing", "input"), r.get("pricing", "cache_read")) == (2, 0.1)
    assert str(r.source("pricing", "cache_read")).startswith("catalogs/models.json#/models/")
    assert "0.05x input" in (catalog.model("claude-sonnet-5-5").notes or "")
    usage = Usage(input_tokens=1_000_000, output_tokens=0, cache_read_tokens=1_000_000)
    assert catalog.cost(usage, "claude-sonnet-5-5", "anthropic") == pytest.approx(0.1)  # every input token read
