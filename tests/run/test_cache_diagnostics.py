"""Ask and listen: every request that continues an earlier response names it for the vendor's cache diagnostics,
and the vendor's verdict is recorded with the call, on the twin through the official clients.

Sources: Anthropic's cache-diagnostics page (platform.claude.com/docs/en/build-with-claude/cache-diagnostics),
OpenAI's prompt-caching diagnostics guide (developers.openai.com/api/docs/guides/prompt-caching/diagnostics), the
pinned SDKs' DiagnosticsParam / PromptCacheOptions docstrings.
"""

from __future__ import annotations

import inspect
import itertools
import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from segue import Agent, RunStore
from segue.catalog import Catalog
from segue.demo import shop_db as sample_db
from segue.generated import CacheVerdict
from segue.providers import AnthropicProvider, OpenAIResponsesProvider
from segue_twin import Twin
from tests._support.vendor_http import Recorder, anthropic_client, json_response

PROMPT = "You answer questions about the shop database. Keep answers short and exact. " * 150
TOOLS = [sample_db.list_tables, sample_db.describe_table, sample_db.run_query]


def _agent(vendor: str, twin: Twin, store: RunStore | None, *, model: str | None = None, **options: Any) -> Agent:
    if vendor == "anthropic":
        provider: Any = AnthropicProvider(model or "claude-sonnet-4-6", client=twin.anthropic_client())
    else:
        provider = OpenAIResponsesProvider(model or "gpt-5.6-sol", client=twin.openai_client())
    return Agent(provider, PROMPT, TOOLS, store, **options)


def _site(package: Any) -> Path:
    return Path(inspect.getfile(package)).parent


# -- the catalog says which paths offer diagnostics, with sources -----------------------------------------------


def test_the_catalog_offers_diagnostics_where_a_vendor_source_says_so() -> None:
    """Anthropic: "Cache diagnostics is currently available on the Claude API only. It is not supported on Amazon
    Bedrock or Vertex AI" (cache-diagnostics page), and the pinned SDK's MessageCreateParams has `diagnostics`.
    OpenAI: "Diagnostics are available in the Responses API for GPT-5.6 and later supported models" (diagnostics
    guide), and the pinned SDK's PromptCacheOptions has `comparison_response_id`. Nowhere else says it, so other
    paths (OpenRouter, older OpenAI models) leave it absent."""
    params = (_site(anthropic) / "types" / "message_create_params.py").read_text()
    assert "diagnostics: Optional[DiagnosticsParam]" in params
    options = (_site(openai) / "types" / "responses" / "response_create_params.py").read_text()
    assert "comparison_response_id: Optional[str]" in options
    catalog = Catalog.load()
    assert catalog.resolve("claude-sonnet-4-6", "anthropic").cache_diagnostics
    assert catalog.resolve("gpt-5.6-sol", "openai").cache_diagnostics
    assert catalog.resolve("gpt-6.3-sol", "openai").cache_diagnostics, "the GPT-5.6-and-later pattern"
    assert not catalog.resolve("gpt-4.1", "openai").cache_diagnostics
    assert not catalog.resolve("claude-sonnet-4-6", "openrouter").cache_diagnostics
    row = catalog.resolve("claude-sonnet-4-6", "anthropic")
    assert row.source("llm", "cache_diagnostics"), "the value names where it comes from"


# -- ask --------------------------------------------------------------------------------------------------------


async def test_anthropic_every_request_names_the_previous_response() -> None:
    """ "On the first turn, pass "previous_message_id": null to opt in ... On your next request, include that id as
    `diagnostics.previous_message_id`", with "the beta header `cache-diagnosis-2026-04-07`" (cache-diagnostics
    page): a later iteration names the previous iteration's response, a replayed run's first request names the
    continued run's last response."""
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    agent = _agent("anthropic", twin, store)
    first = await agent.run("Which tables are there?")
    nxt = await agent.run("How many customers?", runs=[first.run_id], replay_last="all")
    runs = [store.get_run(r.run_id) for r in (first, nxt)]
    calls = [c for run in runs if run is not None for c in run.llm_interactions]
    assert len(calls) >= 3
    assert calls[0].provider_request["diagnostics"] == {"previous_message_id": None}
    for before, after in itertools.pairwise(calls):
        assert before.provider_response is not None
        assert after.provider_request["diagnostics"] == {"previous_message_id": before.provider_response["id"]}
        assert after.request_headers is not None
        assert "cache-diagnosis-2026-04-07" in after.request_headers["anthropic-beta"].split(",")
        assert after.cache_verdict == CacheVerdict(status="unchanged", compared_with=before.provider_response["id"])


async def test_responses_names_the_previous_response_only_where_the_path_offers_it() -> None:
    """`prompt_cache_options.comparison_response_id` "selects a response as the diagnostic baseline" (diagnostics
    guide): sent on GPT-5.6 paths from the second request on, never on gpt-4.1 (no source says it has them)."""
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    first = await _agent("openai", twin, store).run("Which tables are there?")
    run = store.get_run(first.run_id)
    assert run is not None and len(run.llm_interactions) >= 2
    assert "comparison_response_id" not in run.llm_interactions[0].provider_request["prompt_cache_options"]
    previous = run.llm_interactions[0].provider_response
    assert previous is not None
    second = run.llm_interactions[1]
    assert second.provider_request["prompt_cache_options"]["comparison_response_id"] == previous["id"]
    assert second.cache_verdict is not None and second.cache_verdict.status == "unchanged"
    older = await _agent("openai", twin, store, model="gpt-4.1").run("Which tables are there?")
    old_run = store.get_run(older.run_id)
    assert old_run is not None
    assert all("prompt_cache_options" not in c.provider_request for c in old_run.llm_interactions)
    assert all(c.cache_verdict is None for c in old_run.llm_interactions)


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_off_per_agent(vendor: str) -> None:
    """Agent(cache_diagnostics=False) sends nothing of it: no diagnostics object, no beta header, no
    comparison id, and no verdict is recorded."""
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    result = await _agent(vendor, twin, store, cache_diagnostics=False).run("Which tables are there?")
    run = store.get_run(result.run_id)
    assert run is not None and len(run.llm_interactions) >= 2
    for call in run.llm_interactions:
        body = call.provider_request
        assert "diagnostics" not in body
        assert "comparison_response_id" not in body.get("prompt_cache_options", {})
        assert "cache-diagnosis" not in json.dumps(call.request_headers or {})
        assert call.cache_verdict is None
    with pytest.raises(TypeError, match="cache_diagnostics must be True or False"):
        _agent(vendor, twin, store, cache_diagnostics="yes")


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_asking_does_not_change_the_cached_prefix(vendor: str) -> None:
    """Naming a response changes nothing the cache reads. OpenAI: "comparison_response_id in prompt_cache_options
    selects a response as the diagnostic baseline. It does not load that response's conversation content or
    restrict which matching cache the request can use" (diagnostics guide). Anthropic: the cached prefix is
    "`tools`, `system`, and `messages` (in that order)" (prompt-caching page), and `diagnostics` is none of them:
    "the API stores a lightweight fingerprint of each request" and compares it (cache-diagnostics page).

    The same conversation with and without diagnostics: every request's prompt (the parts segue's explain reads in
    prompt order) is byte-identical, and the twin reads and writes the same tokens."""
    from segue.cache.explain import compare_bodies

    usages, bodies = [], []
    for on in (True, False):
        twin, store = Twin(), RunStore("sqlite:///:memory:")
        agent = _agent(vendor, twin, store, cache_diagnostics=on)
        first = await agent.run("Which tables are there?")
        nxt = await agent.run("How many customers?", runs=[first.run_id], replay_last="all")
        calls = [c for r in (first, nxt) for c in (store.get_run(r.run_id) or _none()).llm_interactions]
        usages.append([c.usage for c in calls])
        bodies.append([c.provider_request for c in calls])
    assert usages[0] == usages[1]
    for asked, plain in zip(bodies[0], bodies[1], strict=True):
        reused, total, divergence = compare_bodies(asked, plain)
        assert divergence is None and reused == total
        assert compare_bodies(plain, asked)[2] is None


def _none() -> Any:
    raise AssertionError("run not stored")


async def test_the_verdict_survives_the_store_and_an_unknown_shape_is_recorded_as_unknown() -> None:
    """A diagnostics answer of a shape the SDK does not know is recorded as `unknown` (with what came), never a
    failed run (pending and the other shapes: tests/wire/test_cache_verdict.py)."""
    answers = iter(
        [
            None,
            {"cache_miss_reason": {"type": "prompt_mood_changed", "cache_missed_input_tokens": 3}},
        ]
    )

    def handler(request: Any) -> Any:
        body = json.loads(request.content)
        number = len(body["messages"])
        message = {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": "done"}]
            if number > 2
            else [{"type": "tool_use", "id": f"toolu_{number}", "name": "list_tables", "input": {}}],
            "stop_reason": "end_turn" if number > 2 else "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 0},
            "diagnostics": next(answers),
        }
        return json_response(message)

    client = anthropic_client(Recorder(handler, handler))
    store = RunStore("sqlite:///:memory:")
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=client), PROMPT, TOOLS, store)
    result = await agent.run("Which tables are there?")
    assert result.status == "success"
    run = store.get_run(result.run_id)
    assert run is not None
    verdicts = [c.cache_verdict for c in run.llm_interactions]
    assert verdicts[0] is None, "the first request opted in with nothing to compare"
    assert verdicts[1] is not None and verdicts[1].status == "unknown"
    assert verdicts[1].raw == {"cache_miss_reason": {"type": "prompt_mood_changed", "cache_missed_input_tokens": 3}}
    assert result.cache_verdict is not None and result.cache_verdict.status == "unknown"


async def test_a_resumed_run_names_the_paused_runs_last_response() -> None:
    """The first request after a resume continues the paused run's last response (its meta
    `segue.last_response`), so it names that response, not the run it continued from."""
    from segue import tool

    @tool(requires_approval=True)
    def list_tables() -> str:
        """List the shop database's tables."""
        return "customers, orders"

    twin, store = Twin(), RunStore("sqlite:///:memory:")
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), PROMPT, [list_tables], store)
    paused = await agent.run("Which tables are there?")
    assert paused.status == "waiting_approval"
    before = store.get_run(paused.run_id)
    assert before is not None and before.meta is not None and before.meta.segue_last_response is not None
    done = await agent.resume(paused.run_id, approved=True)
    assert done.status == "success"
    run = store.get_run(paused.run_id)
    assert run is not None
    resumed = run.llm_interactions[len(before.llm_interactions)]
    named = before.meta.segue_last_response.id
    assert resumed.provider_request["diagnostics"] == {"previous_message_id": named}
    assert resumed.cache_verdict is not None and resumed.cache_verdict.compared_with == named


@pytest.mark.parametrize("setting", [False, None])
async def test_a_served_agent_takes_the_switch_from_its_config(tmp_path: Path, setting: bool | None) -> None:
    """`segue serve`'s agent config carries `cache_diagnostics` (schemas/serve.schema.json), as Agent() does: false
    sends nothing of it; left out, the default asks."""
    from segue.apps.protocol.config import build_app, load_config

    agent_config: dict[str, Any] = {
        "name": "analyst",
        "provider": {"kind": "twin-anthropic", "model": "claude-sonnet-4-6"},
        "prompt": "You answer questions about the shop database.",
    }
    if setting is not None:
        agent_config["cache_diagnostics"] = setting
    path = tmp_path / "serve.json"
    agent_config["store"] = "sqlite:///runs.db"
    path.write_text(json.dumps({"agents": [agent_config]}))
    app = build_app(load_config(path), path, "http")
    entry = app.agent("analyst")
    first = await entry.agent.run("Which tables are there?")
    second = await entry.agent.run("And the customers?", runs=[first.run_id], replay_last="all")
    run = entry.store.get_run(second.run_id)
    assert run is not None
    asked = ["diagnostics" in call.provider_request for call in run.llm_interactions]
    assert asked == [setting is None] * len(asked)
