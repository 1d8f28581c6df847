"""Agent.prewarm: the next run's prefix sent ahead of its user message, so that run reads it from the cache.

Checked on the twin with the official clients: the prefix sent is the one the next run sends (byte for byte up to
its user message), the next run's first request reads it from the cache where without the prewarm it would read
nothing, the prewarm is recorded as a call of its own and never as a run, and bad input is refused as `run`
refuses it, with nothing sent or written. Which paths can be prewarmed is catalog data (`llm.cache_prewarm`),
each value with its vendor source.
"""

from __future__ import annotations

import ast
import inspect
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import attrs
import openai
import pytest

from segue import Agent, RunStore
from segue._core.contracts import Provider, ProviderRequest, ProviderResponse, StreamEvent
from segue.apps.cli.main import main
from segue.catalog import Catalog
from segue.demo import shop_db as sample_db
from segue.errors import InputError, ProviderError, ReplayRunError
from segue.generated import PrewarmParams
from segue.providers import AnthropicProvider, OpenAIResponsesProvider
from segue.wire.anthropic.request import PREWARM_TURN
from segue_twin import Twin
from tests._support.helpers import catalog_layer

PROMPT = "You answer questions about the shop database. Keep answers short and exact. " * 150
TOOLS = [sample_db.list_tables, sample_db.describe_table, sample_db.run_query]
#: Past every TTL the two vendors' default cache lifetimes offer (Anthropic 5m, OpenAI breakpoint caches 30m).
LATER = 2 * 3600.0
PATHS = {
    "anthropic": ("claude-sonnet-4-6", AnthropicProvider, "anthropic_client"),
    "openai": ("gpt-5.6-sol", OpenAIResponsesProvider, "openai_client"),
}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def make_agent(vendor: str, twin: Twin, store: RunStore, model: str | None = None) -> Agent:
    default, provider, client = PATHS[vendor]
    return Agent(provider(model or default, client=getattr(twin, client)()), PROMPT, TOOLS, store)


def _site(package: Any) -> Path:
    return Path(inspect.getfile(package)).parent


# -- the catalog says which paths can be prewarmed, each with its source ----------------------------------------


def test_anthropic_documents_prewarming_with_max_tokens_zero() -> None:
    """Anthropic: `max_tokens` "Set to `0` to populate the prompt cache without generating a response" (the pinned
    anthropic SDK's MessageCreateParams docstring, linking the prompt-caching page's pre-warming section): every
    Anthropic model's path says llm.cache_prewarm true."""
    source = (_site(anthropic) / "types" / "message_create_params.py").read_text()
    assert "Set to `0` to populate the\n    [prompt cache]" in source and "without generating a response" in source
    catalog = Catalog.load()
    assert catalog.resolve("claude-sonnet-4-6", "anthropic").cache_prewarm
    assert catalog.resolve("claude-opus-4-6", "anthropic").cache_prewarm
    unknown = catalog.resolve("claude-made-up-9", "anthropic")
    assert unknown.cache_prewarm and unknown.note is not None, "from the vendor's defaults"


def test_openai_documents_prewarming_only_for_breakpoint_caches_on_responses() -> None:
    """OpenAI: `prompt_cache_options.prewarm` "Prepares the prompt cache without generating output" and the options
    are "Supported for `gpt-5.6` and later models" (the pinned openai SDK's Responses PromptCacheOptions); the
    Chat Completions options have no prewarm. So GPT-5.6 and later say true on openai, older models and
    OpenRouter's rows do not."""
    source = (_site(openai) / "types" / "responses" / "response_create_params.py").read_text()
    assert 'prewarm: bool\n    """Prepares the prompt cache without generating output.' in source
    assert "Supported for `gpt-5.6` and later models" in source
    chat = (_site(openai) / "types" / "chat" / "completion_create_params.py").read_text()
    assert "prewarm" not in chat
    catalog = Catalog.load()
    assert catalog.resolve("gpt-5.6-sol", "openai").cache_prewarm
    assert catalog.resolve("gpt-6-sol", "openai").cache_prewarm
    assert not catalog.resolve("gpt-5.5", "openai").cache_prewarm
    assert not catalog.resolve("gpt-4o", "openai").cache_prewarm
    assert not catalog.resolve("gpt-5.6-terra", "openrouter").cache_prewarm


# -- the prefix sent is the next run's ------------------------------------------------------------------------


async def test_prewarm_sends_the_next_runs_prefix_on_the_responses_wire() -> None:
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    agent = make_agent("openai", twin, store)
    first = await agent.run("Which tables are there?", tenant_id="acme")
    warm = await agent.prewarm(runs=[first.run_id], replay_last="all", tenant_id="acme")
    sent = twin.exchanges[-1].request
    nxt = await agent.run("How many customers?", runs=[first.run_id], replay_last="all", tenant_id="acme")
    detail = store.get_run(nxt.run_id, tenant_id="acme")
    assert detail is not None
    then = detail.llm_interactions[0].provider_request

    # The prewarm continues the first run: it names that run's last response for cache diagnostics.
    last = store.get_run(first.run_id, tenant_id="acme")
    assert last is not None and last.llm_interactions[-1].provider_response is not None
    named = last.llm_interactions[-1].provider_response["id"]
    assert sent["prompt_cache_options"] == {
        "mode": "implicit",
        "ttl": "30m",
        "prewarm": True,
        "comparison_response_id": named,
    }
    assert "prewarm" not in then["prompt_cache_options"]
    assert {k: v for k, v in sent.items() if k not in ("input", "prompt_cache_options")} == {
        k: v for k, v in then.items() if k not in ("input", "prompt_cache_options", "stream")
    }
    # Everything up to the new user message, breakpoint markers included; then only the question follows.
    assert sent["input"] == then["input"][: len(sent["input"])]
    assert then["input"][len(sent["input"]) :][0]["role"] == "user"
    assert (warm.vendor, warm.model, warm.runs, warm.tenant_id) == ("openai", "gpt-5.6-sol", [first.run_id], "acme")
    assert warm.usage.output_tokens == 0


async def test_prewarm_sends_the_next_runs_prefix_on_the_anthropic_wire() -> None:
    """The Messages API continues a trailing assistant turn (a prefill), so the prefix, which ends with the last
    answer, gets a placeholder user turn after its last breakpoint; everything before it is the next run's."""
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    agent = make_agent("anthropic", twin, store)
    first = await agent.run("Which tables are there?")
    await agent.prewarm(runs=[first.run_id], replay_last="all")
    sent = twin.exchanges[-1].request
    nxt = await agent.run("How many customers?", runs=[first.run_id], replay_last="all")
    detail = store.get_run(nxt.run_id)
    assert detail is not None
    then = detail.llm_interactions[0].provider_request

    assert sent["max_tokens"] == 0 and then["max_tokens"] > 0
    assert (sent["system"], sent["tools"]) == (then["system"], then["tools"])
    assert sent["messages"][:-1] == then["messages"][:-1]
    assert sent["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": PREWARM_TURN}]}
    assert "cache_control" in sent["messages"][-2]["content"][-1], "the breakpoint ends the prefix"


# -- the next run reads what the prewarm wrote ------------------------------------------------------------------


async def _first_call_of_next_run(vendor: str, prewarm: bool) -> tuple[Any, Any]:
    """A conversation's second turn two hours after the first (every cache entry expired), with or without a
    prewarm just before it: the prewarm's usage and the next run's first request's usage."""
    clock = Clock()
    twin, store = Twin(clock=clock), RunStore("sqlite:///:memory:")
    agent = make_agent(vendor, twin, store)
    first = await agent.run("Which tables are there?")
    clock.now += LATER
    warm = await agent.prewarm(runs=[first.run_id], replay_last="all") if prewarm else None
    clock.now += 5.0  # the user types
    nxt = await agent.run("How many customers are there?", runs=[first.run_id], replay_last="all")
    detail = store.get_run(nxt.run_id)
    assert detail is not None and nxt.status == "success"
    return warm, detail.llm_interactions[0].usage


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_after_a_prewarm_the_next_turn_reads_its_prefix_from_the_cache(vendor: str) -> None:
    cold_warm, cold = await _first_call_of_next_run(vendor, prewarm=False)
    warm, hot = await _first_call_of_next_run(vendor, prewarm=True)
    assert cold_warm is None and cold.cache_read_tokens == 0, "the first turn's cache entries expired"
    assert warm.usage.cache_write_tokens > 0 and warm.usage.output_tokens == 0
    assert hot.cache_read_tokens >= warm.usage.cache_write_tokens
    assert hot.cache_read_tokens / hot.input_tokens > 0.9, hot
    # Priced as a run is (issue 30 item 5: prewarms said cost_usd where runs say cost.usd): the twin charged
    # nothing, its price at the vendor's rates is apart, and the prices' source is named.
    assert warm.served_by == "twin" and warm.cost is not None and warm.cost.usd == 0
    assert warm.cost.twin_usd is not None and warm.cost.twin_usd > 0
    assert [p.model for p in warm.cost.prices] == [warm.model] and warm.cost.prices[0].file
    assert (warm.cost_usd, warm.twin_usd) == (0, warm.cost.twin_usd), "the 1.x fields, for older clients"


# -- a prewarm is recorded as a call of its own, never as a run -------------------------------------------------


async def test_a_prewarm_is_recorded_apart_from_the_runs() -> None:
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    agent = make_agent("openai", twin, store)
    first = await agent.run("Which tables are there?")
    warm = await agent.prewarm(runs=[first.run_id], replay_last="all")
    nxt = await agent.run("How many customers?", runs=[first.run_id], replay_last="all")

    assert [r.run_id for r in store.list_runs()] == [nxt.run_id, first.run_id]
    assert store.get_run(warm.prewarm_id) is None
    assert store.list_runs(continued_from=first.run_id)[0].run_id == nxt.run_id
    record = store.prewarms.get(warm.prewarm_id)
    assert record is not None and store.prewarms.list() == [record]
    assert (record.agent, record.runs, record.interaction.usage) == ("agent", [first.run_id], warm.usage)
    assert record.interaction.provider_request["prompt_cache_options"]["prewarm"] is True
    assert store.prewarms.get(warm.prewarm_id, tenant_id="other") is None
    with pytest.raises(ReplayRunError, match=f"run {warm.prewarm_id}"):
        await agent.run("Replay the prewarm?", runs=[warm.prewarm_id])


async def test_without_a_store_a_prewarm_of_history_still_runs() -> None:
    twin = Twin()
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), PROMPT, TOOLS)
    history = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hello! Ask me about the shop."}]
    warm = await agent.prewarm(history=history)
    assert warm.runs == [] and warm.usage.cache_write_tokens > 0
    answer = await agent.run("How many customers?", history=history)
    assert answer.usage.cache_read_tokens >= warm.usage.cache_write_tokens


# -- refused: paths without prewarming, bad input; nothing sent, nothing written ---------------------------------


async def test_a_path_whose_catalog_row_has_no_prewarm_is_refused_before_sending() -> None:
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    agent = make_agent("openai", twin, store, model="gpt-5.5")
    first = await agent.run("Which tables are there?")
    sent = len(twin.exchanges)
    with pytest.raises(InputError) as info:
        await agent.prewarm(runs=[first.run_id])
    message = str(info.value)
    assert "openai/gpt-5.5 has no documented way to warm its prompt cache" in message
    assert "llm.cache_prewarm=absent" in message and "Send the next run without a prewarm" in message
    assert len(twin.exchanges) == sent and store.prewarms.list() == []


@pytest.mark.parametrize("thinking", [{"type": "enabled", "budget_tokens": 1024}, {"type": "adaptive"}])
async def test_an_anthropic_prewarm_with_thinking_on_is_refused_before_sending(thinking: dict[str, Any]) -> None:
    """The vendor refuses `max_tokens: 0` with thinking enabled (the prompt-caching page, "pre-warming the
    cache"), and warming the prefix without thinking would warm entries the next run (with thinking) does not read
    (a thinking change misses the message entries). So segue's prewarm says it cannot warm, naming why, before
    anything is sent or written."""
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    provider = AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client(), thinking=thinking)
    agent = Agent(provider, PROMPT, TOOLS, store)
    with pytest.raises(InputError) as info:
        await agent.prewarm()
    message = str(info.value)
    assert "Anthropic cannot prewarm this prefix: thinking" in message
    assert "refuses thinking with max_tokens: 0" in message and "Send the next run without a prewarm" in message
    assert not twin.exchanges and store.prewarms.list() == []


async def test_a_catalog_layer_can_turn_prewarming_off(tmp_path: Path) -> None:
    """No model name in code: an app's catalog layer decides, like for every other key."""
    catalog = catalog_layer(tmp_path, {"cache_prewarm": False}, file="rows.json")
    twin = Twin()
    provider = AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client())
    agent = Agent(provider, PROMPT, TOOLS, catalog=catalog)
    with pytest.raises(InputError, match=r"llm.cache_prewarm=false \(.*rows.json"):
        await agent.prewarm()
    assert not twin.exchanges


@pytest.mark.parametrize(
    "arguments",
    [
        {"runs": ["01J0000000000000000000000X"]},  # no such run
        {"runs": "01J0000000000000000000000X"},  # not a list
        {"runs": ["not-a-run-id"]},
        {"replay_last": -1},
        {"replay_reasoning": "yes"},
        {"tenant_id": ""},
        {"model": 7},
        {"vendor": "nobody"},
    ],
)
async def test_bad_input_is_refused_as_run_refuses_it(arguments: dict[str, Any]) -> None:
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    agent = make_agent("anthropic", twin, store)
    with pytest.raises((ReplayRunError, InputError)) as by_run:
        await agent.run("Hi", **arguments)
    with pytest.raises(type(by_run.value)) as by_prewarm:
        await agent.prewarm(**arguments)
    assert str(by_prewarm.value) == str(by_run.value)
    assert not twin.exchanges and store.prewarms.list() == [] and store.list_runs() == []


async def test_another_tenants_runs_are_refused_as_run_refuses_them() -> None:
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    agent = make_agent("anthropic", twin, store)
    first = await agent.run("Which tables are there?", tenant_id="acme")
    sent = len(twin.exchanges)
    with pytest.raises(ReplayRunError) as by_run:
        await agent.run("Hi", runs=[first.run_id], tenant_id="globex")
    with pytest.raises(ReplayRunError) as by_prewarm:
        await agent.prewarm(runs=[first.run_id], tenant_id="globex")
    assert str(by_prewarm.value) == str(by_run.value) and by_prewarm.value.reason == by_run.value.reason
    assert len(twin.exchanges) == sent
    assert store.prewarms.list(tenant_id="globex") == store.prewarms.list(tenant_id="acme") == []


class _Failing(Provider):
    """A provider on a prewarmable path whose vendor is down."""

    vendor, model, requires_stable_reasoning_prefix = "anthropic", "claude-sonnet-4-6", False

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        assert request.prewarm
        raise ProviderError("overloaded", vendor="anthropic", kind="overloaded")

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        raise AssertionError("a prewarm is never streamed")
        yield  # pragma: no cover


async def test_a_vendor_failure_raises_and_records_nothing() -> None:
    store = RunStore("sqlite:///:memory:")
    agent = Agent(_Failing(), PROMPT, store=store)
    with pytest.raises(ProviderError, match="overloaded"):
        await agent.prewarm()
    assert store.prewarms.list() == [] and store.list_runs() == []


async def test_segue_runs_show_says_a_prewarm_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = RunStore(url)
    agent = make_agent("openai", Twin(), store)
    first = await agent.run("Which tables are there?", tenant_id="acme")
    warm = await agent.prewarm(runs=[first.run_id], tenant_id="acme")
    store.close()

    assert main(["runs", "show", warm.prewarm_id, "--db", url, "--tenant", "acme"]) == 1
    said = capsys.readouterr().err
    assert f"{warm.prewarm_id} is a prewarm, not a run: openai/gpt-5.6-sol" in said
    assert f"for the runs {first.run_id}" in said and "Traceback" not in said
    assert main(["runs", "show", warm.prewarm_id, "--db", url, "--tenant", "globex"]) == 1
    assert f"no run {warm.prewarm_id!r} for tenant 'globex'" in capsys.readouterr().err
    assert main(["runs", "list", "--db", url, "--tenant", "acme", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [first.run_id]


async def test_the_docs_example_runs_offline_as_printed(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/replay.md "Pre-warming the next turn": its block runs as pasted (top-level await) and prints what its
    comments say."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "replay.md").read_text()
    section = page[page.index("## Pre-warming the next turn") :]
    block = section[section.index("```python\n") + len("```python\n") : section.index("```\n", 10)]
    code = compile(block, "docs/replay.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    await eval(code, {})
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "anthropic claude-sonnet-4-6 1411 0",
        "twin 0.0 $0.00534",
        "99% of its first request read from the cache",
    ]
    assert "anthropic claude-sonnet-4-6 1411 0" in block and "$0.00534" in block and "# 99%" in block


def test_prewarm_takes_the_next_runs_arguments_with_the_same_defaults() -> None:
    """PrewarmParams (the protocol schema) is the one list of what a prewarm takes: Agent.prewarm's keyword
    arguments are its fields, and each has Agent.run's annotation and default, since they mean the same run."""
    prewarm = inspect.signature(Agent.prewarm).parameters
    run = inspect.signature(Agent.run).parameters
    fields = {f.name for f in attrs.fields(PrewarmParams)} - {"agent"}
    assert set(prewarm) - {"self"} == fields
    for name in fields:
        assert prewarm[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert (prewarm[name].annotation, prewarm[name].default) == (run[name].annotation, run[name].default), name


async def test_nothing_to_warm_is_refused() -> None:
    twin = Twin()
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()))
    with pytest.raises(InputError, match=r"sends nothing before its user message .* nothing to warm"):
        await agent.prewarm()
    assert not twin.exchanges


@pytest.mark.parametrize("layout", ["auto", "appendOnly", "replace"])
async def test_the_prefix_is_the_next_runs_with_a_trailing_state_layout(layout: Any) -> None:
    """The replayed runs carry their runtime-state fragments as their layout kept them; the prewarm lays them out as
    the next run's first iteration does (kept, escaped or left out), and stops before the user message."""
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    provider = OpenAIResponsesProvider("gpt-5.6-sol", client=twin.openai_client())
    agent = Agent(
        provider, PROMPT, TOOLS, store, trailing_state=lambda s: f"step {s.iteration}", trailing_state_layout=layout
    )
    first = await agent.run("Which tables are there?")
    await agent.prewarm(runs=[first.run_id], replay_last="all")
    sent = twin.exchanges[-1].request
    nxt = await agent.run("How many customers?", runs=[first.run_id], replay_last="all")
    detail = store.get_run(nxt.run_id)
    assert detail is not None
    then = detail.llm_interactions[0].provider_request
    assert sent["input"] == then["input"][: len(sent["input"])]
    assert [i.get("role") for i in then["input"][len(sent["input"]) :]] == ["user", "user"], "question, fragment"
