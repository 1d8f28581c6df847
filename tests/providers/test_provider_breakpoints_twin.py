"""GPT-5.6 breakpoint caching and pre-warming end to end: a real Agent and the drivers against the twin.

The twin emulates the vendors' documented cache rules (docs/twin.md; GPT-5.6: reads only at breakpoints written
before, one implicit breakpoint at the end of the latest eligible message). Each test compares segue's requests
with the same requests stripped of breakpoints and cache options (`implicit_only`), replayed on a fresh twin at
the same times, so what the breakpoints change is measured, not assumed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from segue import Agent, RunStore, tool
from segue._core.contracts import ProviderRequest
from segue.apps.protocol.config import build_app, load_config
from segue.cache.layout import RuntimeState
from segue.demo.sample_tools import FakeClock
from segue.generated import Message, TextBlock
from segue.generated.wire.openai_responses import tool as tool_param
from segue.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider
from segue.wire.breakpoints import implicit_only
from segue_twin import ScriptedPolicy, Twin
from segue_twin.view import AssistantTurn, PlannedCall
from tests._support.helpers import stored_meta

MODEL = "gpt-5.6-sol"  # catalog: a breakpoint cache
#: Long enough that tools + instructions pass the catalog's minimum cacheable length (1,024 tokens).
PROMPT = "You answer questions about the shop's orders from the tool's results, citing the rows you used. " * 60


@tool
def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: what to look up
    """
    return f"result for {q}: " + "row " * 80


def usage(exchange: Any) -> dict[str, int]:
    u = exchange.response["usage"]
    details = u.get("input_tokens_details") or u.get("prompt_tokens_details")
    return {"input": u.get("input_tokens", u.get("prompt_tokens")), "read": details["cached_tokens"]}


async def replay_implicit_only(twin: Twin, path: str) -> list[dict[str, int]]:
    """The same requests without breakpoints or cache options, on a fresh twin at the times they were sent."""
    clock = FakeClock()
    fresh = Twin(policy=ScriptedPolicy(["ok"] * 100), clock=clock)
    client = fresh.openai_client()
    out = []
    for exchange in list(twin.exchanges):
        clock.now = float(exchange.response.get("created_at", exchange.response.get("created")))
        body = implicit_only(exchange.request)
        if path == "responses":
            await client.responses.create(**body)
        else:
            await client.chat.completions.create(**body)
        out.append(usage(fresh.exchanges[-1]))
    return out


async def head_tokens(system: str) -> int:
    """Input tokens of a Responses request holding only the tools and the system prompt (a fresh twin)."""
    twin = Twin(policy=ScriptedPolicy(["ok"]))
    await twin.openai_client().responses.create(
        model=MODEL,
        input=[{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": system}]}],
        tools=[tool_param(lookup.definition)],
    )
    return usage(twin.exchanges[-1])["input"]


async def two_conversations(twin: Twin, clock: FakeClock, provider: Any) -> None:
    agent = Agent(provider, PROMPT, [lookup], RunStore("sqlite:///:memory:"))
    await agent.run("How many orders were there in March?", tenant_id="customer-7")
    clock.advance(600)  # ten minutes later, well within the 30-minute TTL
    await agent.run("Which products sold best?", tenant_id="customer-7")


async def test_a_customers_second_conversation_reads_the_tools_and_instructions_from_cache() -> None:
    """The first request of a second conversation shares only tools + instructions with the first one. With the
    implicit breakpoint alone ("at the end of the latest eligible message", the prompt caching guide) it reads
    nothing; segue's breakpoint at the end of the system prompt makes it read exactly that prefix."""
    clock = FakeClock()
    twin = Twin(policy=ScriptedPolicy(["March: 12 orders.", "The desk organizer."]), clock=clock)
    provider = OpenAIResponsesProvider(MODEL, cache_key_prefix="shop", client=twin.openai_client())

    await two_conversations(twin, clock, provider)

    second = usage(twin.exchanges[-1])
    assert second["read"] == await head_tokens(PROMPT) > 1024
    baseline = await replay_implicit_only(twin, "responses")
    assert baseline[-1]["read"] == 0


async def test_chat_completions_take_the_breakpoints_too() -> None:
    clock = FakeClock()
    twin = Twin(policy=ScriptedPolicy(["March: 12 orders.", "The desk organizer."]), clock=clock)
    provider = OpenAIChatProvider(MODEL, client=twin.openai_client())

    await two_conversations(twin, clock, provider)

    assert twin.exchanges[-1].request["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}
    assert usage(twin.exchanges[-1])["read"] > 1024
    assert (await replay_implicit_only(twin, "chat"))[-1]["read"] == 0


def loop_policy(calls: int) -> ScriptedPolicy:
    turns = [
        AssistantTurn(tool_calls=(PlannedCall(name="lookup", arguments={"q": f"part {i}"}),)) for i in range(calls)
    ]
    return ScriptedPolicy([*turns, AssistantTurn(text="All parts agree.")])


def state(s: RuntimeState) -> str:
    return f"iteration {s.iteration} of {s.max_iterations}; input so far {s.usage_so_far.input_tokens}"


async def test_a_tool_loop_with_a_fragment_replaces_it_and_reads_up_to_the_breakpoint_before_it() -> None:
    """On a breakpoint cache `auto` decides replace (the catalog says prefix_prompt_cache false, like Anthropic's
    block cache), and the newest breakpoint sits before the fragment: every iteration after the first reads the
    previous request up to its fragment. The implicit breakpoint alone sits at the end of the fragment, which the
    next request no longer carries, so nothing after the first write is ever read."""
    store = RunStore("sqlite:///:memory:")
    twin = Twin(policy=loop_policy(4), clock=FakeClock())
    provider = OpenAIResponsesProvider(MODEL, client=twin.openai_client())
    agent = Agent(provider, PROMPT, [lookup], store, trailing_state=state)

    result = await agent.run("Check every part.", tenant_id="customer-7")

    detail = store.get_run(result.run_id, tenant_id="customer-7")
    assert detail is not None and stored_meta(detail)["segue.layout"]["mode"] == "replace"
    sent = [usage(e) for e in twin.exchanges]
    assert len(sent) == 5
    for earlier, later, exchange in zip(sent[:-1], sent[1:], list(twin.exchanges)[:-1], strict=True):
        fragment = exchange.request["input"][-1]["content"][-1]
        assert fragment["text"].startswith("<segue-runtime-state>") and "prompt_cache_breakpoint" not in fragment
        assert 0 < later["read"] < earlier["input"]  # the previous request up to its fragment
    baseline = await replay_implicit_only(twin, "responses")
    assert [b["read"] for b in baseline] == [0] * 5


async def test_responses_prewarm_makes_the_next_request_read_the_warmed_prefix() -> None:
    """`prompt_cache_options.prewarm` "Prepares the prompt cache without generating output": the next request,
    the same prefix plus a new question, reads the prefix."""
    twin = Twin(policy=ScriptedPolicy(["12 orders."]))
    provider = OpenAIResponsesProvider(MODEL, client=twin.openai_client())
    prefix = [Message(role="user", content=[TextBlock(text="Earlier question. " * 300)])]

    warm = await provider.complete(ProviderRequest(system=PROMPT, messages=prefix, prewarm=True, cache_key="c"))
    question = Message(role="user", content=[TextBlock(text="How many orders?")])
    answer = await provider.complete(ProviderRequest(system=PROMPT, messages=[*prefix, question], cache_key="c"))

    assert warm.message.content == [] and warm.usage.output_tokens == 0
    assert warm.usage.cache_write_tokens == warm.usage.input_tokens
    assert answer.usage.cache_read_tokens == warm.usage.input_tokens
    assert answer.message.content[-1] == TextBlock(text="12 orders.", phase="final_answer")


async def test_anthropic_prewarm_makes_the_next_request_read_the_warmed_prefix() -> None:
    """`max_tokens: 0` populates the cache "without generating a response" (pinned anthropic SDK)."""
    twin = Twin(policy=ScriptedPolicy(["12 orders."]))
    provider = AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client())
    prefix = [Message(role="user", content=[TextBlock(text="Earlier question. " * 300)])]

    warm = await provider.complete(ProviderRequest(system=PROMPT, messages=prefix, prewarm=True))
    question = Message(role="user", content=[TextBlock(text="How many orders?")])
    answer = await provider.complete(ProviderRequest(system=PROMPT, messages=[*prefix, question]))

    assert warm.message.content == [] and warm.usage.output_tokens == 0
    assert warm.usage.cache_write_tokens == warm.usage.input_tokens > 0
    assert answer.usage.cache_read_tokens == warm.usage.input_tokens


async def test_segue_serve_configures_mode_and_ttl(tmp_path: Path) -> None:
    """`segue serve` configs take `cache_mode` and the OpenAI `cache_ttl`; the twin sees them on the wire."""
    config = {
        "agents": [
            {
                "name": "shop",
                "prompt": PROMPT,
                "store": "sqlite:///:memory:",
                "provider": {"kind": "twin-openai", "model": MODEL, "cache_mode": "explicit", "cache_ttl": "12h"},
            }
        ]
    }
    path = tmp_path / "agents.json"
    path.write_text(json.dumps(config))
    app = build_app(load_config(path), path, "stdio")
    try:
        await app.agents["shop"].agent.run("Hello?")
        assert app.twin.exchanges[-1].request["prompt_cache_options"] == {"mode": "explicit", "ttl": "12h"}
    finally:
        app.close()
