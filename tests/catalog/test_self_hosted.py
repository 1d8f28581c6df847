"""Self-hosted paths (llama.cpp, vLLM) cost 0 USD because they have no per-token price, and say so; an app puts its
own price on such a path in a catalog layer (docs/catalogs.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from segue import Agent, RunStore
from segue.apps.dashboard.views import no_pricing, run_row
from segue.catalog import Catalog
from segue.catalog.costs import price_source
from segue.generated import Usage
from segue.providers import OpenAIChatProvider
from tests._support.vendor_http import Recorder, json_response, openai_client

URL = "http://127.0.0.1:8080/v1"
USAGE = Usage(input_tokens=1_000_000, output_tokens=500_000)


def answer(model: str) -> Any:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230},
    }


def test_a_self_hosted_path_costs_nothing_and_its_price_source_says_why() -> None:
    catalog = Catalog.load(env=False)
    for model, vendor in [
        ("llama-3.3-70b-instruct", "llamacpp"),
        ("gemma-3-270m", "llamacpp"),
        ("gpt-oss-120b", "vllm"),
    ]:
        resolved = catalog.resolve(model, vendor)
        assert resolved.self_hosted, (model, vendor)
        assert catalog.cost(USAGE, model, vendor) == 0.0  # a model the catalog does not list too: not "unknown"
        source = price_source(catalog, model, vendor)
        assert source.self_hosted is True and source.file is not None and source.file.endswith("vendors.json")
    assert not catalog.resolve("gpt-4.1-mini", "openai").self_hosted


async def test_a_run_on_llamacpp_is_0_usd_self_hosted_in_the_result_and_the_views(sqlite_store: RunStore) -> None:
    rec = Recorder(json_response(answer("gemma-3-270m")))
    driver = OpenAIChatProvider("gemma-3-270m", base_url=URL, vendor="llamacpp", client=openai_client(rec, URL))
    result = await Agent(driver, store=sqlite_store).run("hi")
    assert result.cost is not None and result.cost.usd == 0.0 and result.cost.missing is None
    assert [p.self_hosted for p in result.cost.prices] == [True]
    (summary,) = sqlite_store.list_runs()
    row = run_row(summary, no_pricing)
    assert row.cost == "$0 (self-hosted)" and "self-hosted: no per-token price" in row.cost_title


def test_an_app_prices_a_self_hosted_path_in_its_own_layer(tmp_path: Path) -> None:
    """A later layer replaces the whole model-vendor row: the app's row sets self_hosted false and its prices (say,
    its GPU hours spread over the tokens it serves)."""
    layer = {
        "$schema": "catalog.schema.json",
        "version": 2,
        "model_vendors": [
            {
                "model": "llama-3.3-70b-instruct",
                "vendor": "llamacpp",
                "role": "inference_provider",
                "priority": 50,
                "api_name": "llama-3.3-70b-instruct",
                "notes": "Our GPU box: hardware and power over a month of tokens.",
                "configuration": {"pricing": {"self_hosted": False, "input": 0.2, "output": 0.6}},
            }
        ],
    }
    (tmp_path / "rows.json").write_text(json.dumps(layer))
    catalog = Catalog.load([tmp_path], env=False)
    assert not catalog.resolve("llama-3.3-70b-instruct", "llamacpp").self_hosted
    assert catalog.cost(USAGE, "llama-3.3-70b-instruct", "llamacpp") == 0.2 + 0.3
    source = price_source(catalog, "llama-3.3-70b-instruct", "llamacpp")
    assert source.self_hosted is None and source.note == "Our GPU box: hardware and power over a month of tokens."
