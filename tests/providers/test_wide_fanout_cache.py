"""Wide parallel tool fan-outs keep Anthropic's prefix readable.

The rule (prompt caching page, platform.claude.com/docs/en/build-with-claude/prompt-caching): "The system only
checks up to 20 blocks before each explicit `cache_control` breakpoint"; the page in Korean
(docs.anthropic.com/ko/docs/build-with-claude/prompt-caching) says what is counted: the system checks for hits "at
all previous content block boundaries" ("모든 이전 콘텐츠 블록 경계에서"), up to about 20 blocks before the explicit
breakpoint. Every tool_use and every tool_result is a content block, so 18 parallel calls and their 18 results put
36 blocks between the previous request's breakpoint and the new last one; strands#3348 measured exactly that case
re-writing the whole prefix (134,082 tokens). "You can define up to 4 cache breakpoints" (same page).
"""

from __future__ import annotations

from typing import Any

from segue import Agent, RunStore
from segue._core.contracts import ProviderRequest
from segue.catalog import Catalog
from segue.generated import Message, TextBlock, ToolCallBlock, ToolResultBlock
from segue.providers import AnthropicProvider
from segue.wire.anthropic.request import build_request
from segue_twin import Twin
from segue_twin.scripted import ScriptedPolicy
from segue_twin.view import AssistantTurn, PlannedCall

MODEL = "claude-sonnet-4-6"
SYSTEM = "You answer questions about orders, precisely and briefly. " * 120  # above the 1,024-token minimum
QUESTION = "Look up orders 1 to 18 and tell me which have shipped. " + "Be thorough about each one. " * 40
LOOKBACK = Catalog.load().resolve(MODEL, "anthropic").cache_lookback_blocks


def lookup_order(order: int) -> str:
    """Look an order up.

    Args:
        order: the order number
    """
    return f"order {order}: shipped"


def fan_out(calls: int) -> list[Message]:
    """The question, one answer with `calls` parallel tool calls, and their results."""
    return [
        Message(role="user", content=[TextBlock(text=QUESTION)]),
        Message(
            role="assistant",
            content=[
                ToolCallBlock(id=f"toolu_{i:02d}", name="lookup_order", arguments={"order": i}) for i in range(calls)
            ],
        ),
        Message(
            role="tool",
            content=[ToolResultBlock(tool_call_id=f"toolu_{i:02d}", content="shipped") for i in range(calls)],
        ),
    ]


def marked(body: dict[str, Any]) -> list[tuple[int, int]]:
    """(message, block) of each message block with a cache breakpoint."""
    return [
        (i, j)
        for i, m in enumerate(body["messages"])
        for j, b in enumerate(m["content"])
        if isinstance(b, dict) and "cache_control" in b
    ]


def test_the_catalog_lookback_is_the_pages_20_blocks() -> None:
    assert LOOKBACK == 20


def test_after_18_parallel_calls_the_previous_requests_end_is_marked_too() -> None:
    """The question (the previous request's last breakpoint) is 36 blocks before the last result: beyond the
    lookback, so the question keeps a breakpoint beside the last result's."""
    request = ProviderRequest(system=SYSTEM, messages=fan_out(18))
    body = build_request(
        request,
        model=MODEL,
        max_tokens=1024,
        cache_ttl="5m",
        thinking=None,
        lookback_blocks=LOOKBACK,
        max_breakpoints=4,
    ).body
    assert marked(body) == [(0, 0), (2, 17)]
    assert [b for b in body["system"] if "cache_control" in b] == body["system"]


def test_a_narrow_fan_out_within_the_lookback_keeps_the_one_breakpoint_it_had() -> None:
    """9 calls and 9 results put the question 18 blocks back: the last result's breakpoint finds it, so nothing
    is added (bodies stay as they were)."""
    request = ProviderRequest(system=SYSTEM, messages=fan_out(9))
    body = build_request(
        request,
        model=MODEL,
        max_tokens=1024,
        cache_ttl="5m",
        thinking=None,
        lookback_blocks=LOOKBACK,
        max_breakpoints=4,
    ).body
    assert marked(body) == [(2, 8)]


def test_four_breakpoints_at_most_the_previous_end_taking_the_replayed_ends_place() -> None:
    """System, stable head, last replayed message and last message already make four: the previous request's end
    takes the last replayed message's place, whose entry it reads anyway."""
    messages = [
        Message(role="user", content=[TextBlock(text="earlier question")]),
        Message(role="assistant", content=[TextBlock(text="earlier answer")]),
        *fan_out(18),
    ]
    request = ProviderRequest(system=SYSTEM, stable_head="Orders ship daily.", messages=messages, replay_end=1)
    body = build_request(
        request,
        model=MODEL,
        max_tokens=1024,
        cache_ttl="5m",
        thinking=None,
        lookback_blocks=LOOKBACK,
        max_breakpoints=4,
    ).body
    system_marks = [b for b in body["system"] if "cache_control" in b]
    assert len(system_marks) + len(marked(body)) == 4
    assert marked(body) == [(2, 0), (4, 17)]  # the question after the replayed answer, and the last result


async def test_a_request_after_18_parallel_calls_reads_the_earlier_prefix_from_the_cache() -> None:
    """End to end on the twin: the first request writes tools, system and question; the request after the 18
    calls and their 18 results reads all of it (cache_read covers the earlier prefix) and writes only what is
    new. The same request with only the last result's breakpoint (main's placement) reads tools and system only
    and writes the question again."""
    planned = tuple(PlannedCall(name="lookup_order", arguments={"order": i}) for i in range(1, 19))
    twin = Twin(policy=ScriptedPolicy([AssistantTurn(tool_calls=planned), "All 18 have shipped."]))
    store = RunStore("sqlite:///:memory:")
    agent = Agent(AnthropicProvider(MODEL, client=twin.anthropic_client()), SYSTEM, [lookup_order], store)
    result = await agent.run(QUESTION)
    assert result.status == "success" and result.iterations == 2
    run = store.get_run(result.run_id)
    assert run is not None
    first, second = (c.usage for c in run.llm_interactions)
    assert first.cache_read_tokens == 0 and first.cache_write_tokens == first.input_tokens
    assert second.cache_read_tokens == first.input_tokens  # the whole earlier prefix
    assert second.cache_read_tokens + (second.cache_write_tokens or 0) == second.input_tokens

    bodies = [c.provider_request for c in run.llm_interactions]
    assert marked(bodies[1]) == [(0, 0), (2, 17)]
    single = {**bodies[1], "messages": [dict(m) for m in bodies[1]["messages"]]}
    single["messages"][0]["content"] = [
        {k: v for k, v in b.items() if k != "cache_control"} for b in single["messages"][0]["content"]
    ]
    again = Twin(policy=ScriptedPolicy(["ok", "ok"])).anthropic_client()
    await again.messages.create(**bodies[0])
    alone = (await again.messages.create(**single)).usage
    assert 0 < alone.cache_read_input_tokens < first.input_tokens  # tools and system only: the question is gone


def test_a_path_with_fewer_breakpoints_never_gets_more_than_its_limit() -> None:
    """A catalog row allowing three (llm.cache_max_breakpoints) keeps system, stable head and the last message: the
    previous request's end gives way rather than make the vendor refuse the request."""
    request = ProviderRequest(system=SYSTEM, stable_head="Orders ship daily.", messages=fan_out(18))
    body = build_request(
        request,
        model=MODEL,
        max_tokens=1024,
        cache_ttl="5m",
        thinking=None,
        lookback_blocks=LOOKBACK,
        max_breakpoints=3,
    ).body
    assert len([b for b in body["system"] if "cache_control" in b]) == 2
    assert marked(body) == [(2, 17)]
