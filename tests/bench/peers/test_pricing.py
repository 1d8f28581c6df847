"""bench/peers/ledger.py: the one pricing function of bench/peers.py, on numbers worked out by hand.

Prices are the packaged catalog's (catalogs/models.json): claude-sonnet-4-6 $3 input, $15 output, $0.30 read,
$3.75 5m write, $6 1h write per million tokens ("5m writes 1.25x, 1h writes 2x, reads 0.1x input", Anthropic's
prompt-caching page as the catalog records it); gpt-5.6-sol $4 / $20, $0.40 read, $5 30m write; gpt-5.6-terra
$2 / $12, $0.20 read, $2.50 30m write; no 12h write price is known for either, so such a call stays unpriced.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from segue.catalog import Catalog
from segue_twin import ScriptedPolicy, Twin

LEDGER = Path(__file__).resolve().parents[3] / "bench" / "peers" / "ledger.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_peers_ledger", LEDGER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ledger = _load()


def _anthropic(write_5m: int, write_1h: int, *, uncached: int = 100, read: int = 2000, out: int = 50) -> dict:
    return {
        "model": "claude-sonnet-4-6",
        "content": [{"type": "tool_use", "id": "t1", "name": "describe_table", "input": {"table": "orders"}}],
        "usage": {
            "input_tokens": uncached,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write_5m + write_1h,
            "cache_creation": {"ephemeral_5m_input_tokens": write_5m, "ephemeral_1h_input_tokens": write_1h},
            "output_tokens": out,
        },
    }


def test_anthropic_writes_are_priced_per_ttl(catalog: Catalog) -> None:
    call = ledger.price_call("/v1/messages", {}, 200, _anthropic(400, 600), catalog)
    # 100 x $3 + 2000 x $0.30 + 400 x $3.75 + 600 x $6 + 50 x $15 = 300 + 600 + 1500 + 3600 + 750 = $6,750 / 1e6
    assert call.cost == pytest.approx(0.00675)
    assert call.usage.input_tokens == 3100  # Anthropic's input_tokens leaves out the cached parts
    assert call.tool_calls == (("describe_table", '{"table": "orders"}'),)


def test_a_1h_write_costs_more_than_the_same_5m_write(catalog: Catalog) -> None:
    five = ledger.price_call("/v1/messages", {}, 200, _anthropic(1000, 0, uncached=0, read=0, out=0), catalog)
    hour = ledger.price_call("/v1/messages", {}, 200, _anthropic(0, 1000, uncached=0, read=0, out=0), catalog)
    assert five.cost == pytest.approx(0.00375)  # 1000 x $3.75 / 1e6
    assert hour.cost == pytest.approx(0.006)  # 1000 x $6 / 1e6


def test_openai_responses_cached_and_written_tokens(catalog: Catalog) -> None:
    response = {
        "model": "gpt-5.6-sol",
        "output": [{"type": "function_call", "name": "run_query", "arguments": '{"sql":"SELECT 1"}'}],
        "usage": {
            "input_tokens": 3000,
            "input_tokens_details": {
                "cached_tokens": 2000,
                "cache_write_tokens": 500,
                "cache_write_tokens_details": {"ttl_30m_tokens": 500},
            },
            "output_tokens": 100,
        },
    }
    call = ledger.price_call("/v1/responses", {}, 200, response, catalog)
    # uncached 500 x $4 + read 2000 x $0.40 + written 500 x $5 + output 100 x $20 = 2000 + 800 + 2500 + 2000
    assert call.cost == pytest.approx(0.0073)
    assert call.tool_calls == (("run_query", '{"sql": "SELECT 1"}'),)


def test_openai_chat_completions_cached_tokens(catalog: Catalog) -> None:
    response = {
        "model": "gpt-5.6-terra",
        "choices": [{"message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 800}},
    }
    call = ledger.price_call("/v1/chat/completions", {}, 200, response, catalog)
    assert call.cost == pytest.approx(0.00068)  # 200 x $2 + 800 x $0.20 + 10 x $12 = 400 + 160 + 120


def test_a_price_the_catalog_lacks_or_an_error_is_not_guessed(catalog: Catalog) -> None:
    twelve = {
        "model": "gpt-5.6-sol",
        "output": [],
        "usage": {
            "input_tokens": 2000,
            "input_tokens_details": {
                "cached_tokens": 0,
                "cache_write_tokens": 2000,
                "cache_write_tokens_details": {"ttl_12h_tokens": 2000},
            },
            "output_tokens": 1,
        },
    }
    assert ledger.price_call("/v1/responses", {}, 200, twelve, catalog).cost is None
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    failed = ledger.price_call("/v1/messages", {"model": "claude-sonnet-4-6"}, 400, error, catalog)
    assert (failed.status, failed.cost, failed.model) == (400, None, "claude-sonnet-4-6")


def test_the_twins_own_response_is_priced_from_its_wire_usage(catalog: Catalog) -> None:
    twin = Twin(policy=ScriptedPolicy(["pong", "pong"]))
    system = [{"type": "text", "text": "x " * 3000, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    body = {"model": "claude-sonnet-4-6", "max_tokens": 64, "system": system}
    body["messages"] = [{"role": "user", "content": "ping"}]
    headers = {"x-api-key": "k", "content-type": "application/json", "anthropic-version": "2023-06-01"}
    for _ in range(2):
        twin.handle("POST", "/v1/messages", headers, json.dumps(body).encode())
    first, second = ledger.price_exchanges(twin.exchanges, catalog)
    raw = twin.exchanges[0].response["usage"]
    written = raw["cache_creation"]["ephemeral_1h_input_tokens"]
    assert written > 0 and first.usage.cache_write_tokens_by_ttl == {"1h": written}
    by_hand = (raw["input_tokens"] * 3 + written * 6 + raw["output_tokens"] * 15) / 1e6
    assert first.cost == pytest.approx(by_hand)
    assert second.usage.cache_read_tokens == written and second.cost < first.cost
