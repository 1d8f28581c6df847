"""Notes, stop_reason and the model that served are shown wherever a run is shown (issue 39, item 2): `segue runs
show` (text, and the top level of --json), `segue runs list`, the dashboard's list and run page; a self-hosted call
costs "$0 (self-hosted)" in the run page's iteration table as in its header; `catalog explain` says a self-hosted
path costs 0 USD; a provider failure's RUN_ERROR names its kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from segue import Agent, ModelSettings, RunStore
from segue.apps.cli.main import _catalog_cost, main
from segue.apps.dashboard import create_app
from segue.catalog import Catalog
from segue.providers import OpenAIChatProvider
from tests._support.dashboard import get
from tests._support.vendor_http import Recorder, json_response, openai_client

URL = "http://127.0.0.1:8080/v1"


def cut_answer() -> Any:
    """llama-server serving SmolLM2 whatever the request named, cut at max_tokens."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "smollm2-135m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Once upon a"}, "finish_reason": "length"}
        ],
        "usage": {"prompt_tokens": 31, "completion_tokens": 4, "total_tokens": 35},
    }


@pytest.fixture
def cut_run(tmp_path: Path) -> tuple[str, str]:
    """(store url, run id) of a run llama.cpp answered as another model and cut at the limit."""
    import asyncio

    url = f"sqlite:///{tmp_path / 'segue.db'}"
    store = RunStore(url)
    rec = Recorder(json_response(cut_answer()))
    driver = OpenAIChatProvider("llama-3.3-70b-instruct", base_url=URL, vendor="llamacpp", client=openai_client(rec))
    agent = Agent(driver, "Answer briefly.", store=store, model_settings=ModelSettings(max_tokens=4))
    result = asyncio.run(agent.run("Tell me a story."))
    store.close()
    assert result.status == "success" and result.stop_reason == "max_tokens"
    assert [n.kind for n in result.notes or []] == ["served-model", "output-truncated"]
    return url, result.run_id


def test_runs_show_text_and_json_name_the_served_model_the_stop_reason_and_the_notes(
    cut_run: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, run_id = cut_run
    assert main(["runs", "show", run_id, "--db", url]) == 0
    out = capsys.readouterr().out
    assert "model llama-3.3-70b-instruct @ llamacpp · answered by smollm2-135m" in out
    assert "stopped: max_tokens" in out
    assert "note [served-model] (iteration 1): asked llamacpp for 'llama-3.3-70b-instruct'" in out
    assert "note [output-truncated] (iteration 1): the final answer was cut at the output limit" in out
    assert main(["runs", "show", run_id, "--db", url, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["stop_reason"] == "max_tokens" and data["served_model"] == "smollm2-135m"
    assert [n["kind"] for n in data["notes"]] == ["served-model", "output-truncated"]


def test_runs_list_shows_them_in_columns(cut_run: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    url, run_id = cut_run
    assert main(["runs", "list", "--db", url]) == 0
    assert run_id in capsys.readouterr().out
    assert main(["runs", "list", "--db", url]) == 0
    out = capsys.readouterr().out
    header, row = out.splitlines()[:2]
    assert "STOP" in header and "NOTES" in header
    assert "max_tokens" in row and "served-model, output-t" in row and "llama-3.3-70b-i" in row
    assert main(["runs", "list", "--db", url, "--wide"]) == 0
    wide = capsys.readouterr().out.splitlines()[1]
    assert "llama-3.3-70b-instruct→smollm2-135m" in wide and "served-model, output-truncated" in wide
    assert "$0 (self-hosted)" in wide


def test_the_dashboard_list_and_run_page_show_them_and_price_each_call_as_self_hosted(
    cut_run: tuple[str, str],
) -> None:
    url, run_id = cut_run
    store = RunStore(url)
    try:
        app = create_app(store, cost=_catalog_cost())
        listing = get(app, "/").text
        page = get(app, f"/runs/{run_id}").text
    finally:
        store.close()
    assert "→ smollm2-135m" in listing and '<span class="badge stop"' in listing and ">output-truncated<" in listing
    assert '<dd class="served-model">smollm2-135m</dd>' in page and '<dd class="stop-reason">max_tokens</dd>' in page
    assert '<section id="notes">' in page and "cut at the output limit" in page
    assert "$0.0000" not in page  # the iteration table says what the header says
    assert page.count("$0 (self-hosted)") >= 2


def test_catalog_explain_says_a_self_hosted_path_costs_nothing() -> None:
    text = Catalog.load(env=False).explain_text("smollm2-135m", "llamacpp")
    assert "self-hosted (pricing.self_hosted), so every call on this path costs 0 USD" in text
    assert "no cost is computed" not in text


async def test_run_error_meta_names_the_provider_error_kind() -> None:
    rec = Recorder(json_response({"error": {"code": 401, "message": "bad key", "type": "authentication_error"}}, 401))
    driver = OpenAIChatProvider("smollm2-135m", base_url=URL, vendor="llamacpp", client=openai_client(rec))
    events = [e async for e in Agent(driver).stream("hi")]
    error = events[-1]
    assert error.type == "RUN_ERROR"
    assert error.meta == {"error_type": "ProviderError", "kind": "auth"}
