"""GPT-5.6 breakpoint caching on the twin: segue's requests as sent vs the same requests without breakpoints.

Run: python bench/gpt56.py

GPT-5.6 (catalog `llm.cache_kind: "breakpoint"`) reads a prompt only up to a breakpoint an earlier request wrote.
segue's OpenAI driver marks its boundaries (system prompt, stable head, last replayed message, newest message,
never the runtime-state fragment). Each scenario below runs a real Agent through OpenAIResponsesProvider on the twin
(gpt-5.6-sol@openai), then replays every request it sent with `prompt_cache_breakpoint` and `prompt_cache_options`
removed ("implicit only": OpenAI's one implicit breakpoint at the end of the latest message) on a fresh twin, at
the same clock times. Both columns are the same requests, measured in the same run:

(a) the first request of a customer's second conversation, ten minutes after the first one (the agent has the
    demo's prompt and tools and the customer's profile as stable context);
(b) a 10-iteration tool loop with a trailing runtime-state fragment, under trailing_state_layout auto, appendOnly
    and replace, for a small (~100 tokens) and a large (~1,500 tokens) state;
(c) the demo's 5-turn database chat (`segue.demo.chat`), every turn replaying all earlier runs.

Token counts use the twin's approximation (segue._core.tokens); costs the catalog's prices for gpt-5.6-sol.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from layout import ITERATIONS, loop_agent, script

from segue import Agent, ContextBlock, RunStore
from segue.cache.layout import LayoutMode
from segue.catalog import Catalog
from segue.demo.chat import PROMPT, QUESTIONS, demo_tools, run_chat
from segue.demo.sample_tools import FakeClock
from segue.demo.shop_db import run_query
from segue.generated import Usage
from segue.providers import OpenAIResponsesProvider
from segue.wire.breakpoints import CacheMode, implicit_only
from segue.wire.openai_responses.request import parse_usage
from segue_twin import ScriptedPolicy, Twin

MODEL, VENDOR = "gpt-5.6-sol", "openai"
CUSTOMER = "customer-7"


@attrs.frozen
class Measured:
    """Usage of a list of requests: as segue sent them, and the same requests with implicit caching only."""

    segue: list[Usage]
    implicit: list[Usage]


async def measure(scenario: Callable[[Twin, FakeClock], Awaitable[Any]], policy: Any = None) -> Measured:
    """Run `scenario` on a twin (`policy` plays the model; default: the database analyst), then its requests
    again without breakpoints and cache options on a fresh twin, each at the time it was first sent."""
    clock = FakeClock()
    twin = Twin(clock=clock, policy=policy)
    await scenario(twin, clock)
    sent = list(twin.exchanges)
    replay_clock = FakeClock()
    fresh = Twin(policy=ScriptedPolicy(["ok"] * len(sent)), clock=replay_clock)
    client = fresh.openai_client()
    for exchange in sent:
        assert exchange.path == "/v1/responses" and exchange.status == 200, exchange
        replay_clock.now = float(exchange.response["created_at"])
        await client.responses.create(**implicit_only(exchange.request))
    segue = [parse_usage(e.response["usage"]) for e in sent]
    # The replay's answers are placeholders: keep the original output so costs differ only by the cache.
    implicit = [
        attrs.evolve(
            parse_usage(e.response["usage"]), output_tokens=s.output_tokens, reasoning_tokens=s.reasoning_tokens
        )
        for e, s in zip(fresh.exchanges, segue, strict=True)
    ]
    return Measured(segue=segue, implicit=implicit)


def provider(twin: Twin, mode: CacheMode = "implicit") -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(
        MODEL, cache_key_prefix="shop", reasoning={"effort": "low"}, cache_mode=mode, client=twin.openai_client()
    )


def total(usages: list[Usage]) -> Usage:
    by_ttl: Counter[str] = Counter()
    for u in usages:
        by_ttl.update(u.cache_write_tokens_by_ttl or {})
    return Usage(
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
        cache_read_tokens=sum(u.cache_read_tokens or 0 for u in usages),
        cache_write_tokens=sum(u.cache_write_tokens or 0 for u in usages),
        cache_write_tokens_by_ttl=dict(by_ttl),
    )


def row(label: str, u: Usage, catalog: Catalog) -> str:
    read, write = u.cache_read_tokens or 0, u.cache_write_tokens or 0
    cost = catalog.cost(u, MODEL, VENDOR)
    share = read / u.input_tokens if u.input_tokens else 0.0
    return f"  {label:<32} {u.input_tokens:>8,} {read:>8,} {write:>8,} {share:>7.1%} {cost:>9.5f}"


HEADER = f"  {'':<32} {'input':>8} {'read':>8} {'write':>8} {'cached':>7} {'cost $':>9}"


def ratio(a: Usage, b: Usage, catalog: Catalog) -> str:
    cost_a, cost_b = catalog.cost(a, MODEL, VENDOR), catalog.cost(b, MODEL, VENDOR)
    return f"input {a.input_tokens / b.input_tokens:.2f}x, cost {cost_a / cost_b:.2f}x"


# --- (a) a customer's second conversation ---------------------------------------------------------------------------


def customer_profile() -> ContextBlock:
    """The customer's account as stable context: their record, their order lines and the price list."""

    def table(sql: str) -> str:
        rows = run_query(sql)
        return "\n".join([" | ".join(rows[0]), *(" | ".join(str(v) for v in r.values()) for r in rows)])

    account = table("SELECT * FROM customers WHERE id = 7")
    orders = table(
        "SELECT o.id, o.order_date, o.status, p.name, i.quantity, i.unit_price FROM orders o "
        "JOIN order_items i ON i.order_id = o.id JOIN products p ON p.id = i.product_id "
        "WHERE o.customer_id = 7 ORDER BY o.id, p.name"
    )
    prices = table("SELECT id, name, category, price FROM products ORDER BY id")
    text = f"Account:\n{account}\n\nTheir order lines:\n{orders}\n\nPrice list:\n{prices}"
    return ContextBlock(text=text, placement="stable", source="crm")


async def second_conversation(twin: Twin, clock: FakeClock) -> int:
    agent = Agent(provider(twin), PROMPT, demo_tools(), RunStore("sqlite:///:memory:"), max_iterations=8)
    profile = customer_profile()
    await agent.run(QUESTIONS[0], context=[profile], tenant_id=CUSTOMER)
    first_of_second = len(twin.exchanges)
    clock.advance(600)  # ten minutes later: inside the 30-minute TTL
    await agent.run(QUESTIONS[1], context=[profile], tenant_id=CUSTOMER)
    return first_of_second


async def scenario_a(catalog: Catalog) -> None:
    index: list[int] = []

    async def run(twin: Twin, clock: FakeClock) -> None:
        index.append(await second_conversation(twin, clock))

    m = await measure(run)
    i = index[0]
    print("(a) the first request of the customer's second conversation, 10 minutes after the first")
    print(HEADER)
    print(row("segue (breakpoints)", m.segue[i], catalog))
    print(row("implicit only", m.implicit[i], catalog))
    print(f"  segue / implicit only: {ratio(m.segue[i], m.implicit[i], catalog)}")


# --- (b) a tool loop with a trailing runtime-state fragment ---------------------------------------------------------

#: (label, trailing_state_layout, cache_mode). auto decides replace on a breakpoint cache.
LOOP_SETTINGS: tuple[tuple[str, LayoutMode, CacheMode], ...] = (
    ("auto", "auto", "implicit"),
    ("appendOnly", "appendOnly", "implicit"),
    ("replace", "replace", "implicit"),
    ("replace explicit", "replace", "explicit"),
)


async def scenario_b(catalog: Catalog) -> None:
    print(f"\n(b) a {ITERATIONS}-iteration tool loop with a trailing runtime-state fragment (totals of its requests)")
    print("  state: fragment tokens; layout (cache_mode implicit unless 'explicit')")
    print(HEADER)
    for state_tokens in (100, 1500):
        results: dict[str, Measured] = {}
        for label, layout, mode in LOOP_SETTINGS:

            async def run(
                twin: Twin,
                clock: FakeClock,
                layout: LayoutMode = layout,
                mode: CacheMode = mode,
                state_tokens: int = state_tokens,
            ) -> None:
                agent = loop_agent(provider(twin, mode), layout, state_tokens)
                result = await agent.run("Summarise the quarterly report, section by section.", tenant_id=CUSTOMER)
                assert result.status == "success" and result.iterations == ITERATIONS, result

            results[label] = m = await measure(run, policy=script())
            print(row(f"{state_tokens:>5} {label:<16} segue", total(m.segue), catalog))
            print(row(f"{'':>5} {'':<16} implicit", total(m.implicit), catalog))
        append, replace = total(results["appendOnly"].segue), total(results["replace"].segue)
        explicit, implicit_replace = total(results["replace explicit"].segue), total(results["replace"].implicit)
        print(f"  state {state_tokens}: replace / appendOnly (segue): {ratio(replace, append, catalog)}")
        print(f"  state {state_tokens}: replace, segue / implicit only: {ratio(replace, implicit_replace, catalog)}")
        print(f"  state {state_tokens}: replace, explicit / implicit mode (segue): {ratio(explicit, replace, catalog)}")


# --- (c) the demo's replayed database chat --------------------------------------------------------------------------


async def scenario_c(catalog: Catalog) -> None:
    async def run(twin: Twin, clock: FakeClock) -> None:
        await run_chat("all", vendor="openai", model=MODEL, twin=twin, catalog=catalog, tenant_id=CUSTOMER)

    m = await measure(run)
    print('\n(c) the demo\'s 5-turn database chat, runs=<earlier runs>, replay_last="all" (totals of its requests)')
    print(HEADER)
    print(row("segue (breakpoints)", total(m.segue), catalog))
    print(row("implicit only", total(m.implicit), catalog))
    print(f"  segue / implicit only: {ratio(total(m.segue), total(m.implicit), catalog)}")


def main() -> None:
    logging.getLogger("segue").setLevel(logging.ERROR)
    catalog = Catalog.load()
    print(f"GPT-5.6 breakpoint caching on the twin, {MODEL}@{VENDOR}, OpenAI Responses\n")
    asyncio.run(scenario_a(catalog))
    asyncio.run(scenario_b(catalog))
    asyncio.run(scenario_c(catalog))


if __name__ == "__main__":
    main()
