"""Trailing runtime-state layouts on the OpenAI twin (a byte-prefix cache): appendOnly vs replace, side by side.

Run: python bench/layout.py

A real Agent runs a 10-iteration tool loop through segue's OpenAI Chat Completions driver against the twin:
a ~3k-token system prompt, a question, nine tool calls whose results are a few hundred tokens each, then an
answer. Every iteration carries a runtime-state fragment (`trailing_state`) that changes each time. The same
loop runs with `trailing_state_layout="appendOnly"`, `"replace"`, `"auto"` and `"byCost"` (the last two printed
with what they decided), on gpt-4.1-mini@openai (cached from 1024 tokens in 128-token steps, per the catalog), as
the first turn of a conversation and as its second turn (a run that replays the first: where `byCost` weighs
the layouts by cost, once for the conversation; `auto` is seed 004's append-only on a byte-prefix cache).
Printed per layout: the cached share of input tokens, input tokens, and cost from the catalog's prices under
both cache models below, for a small state (~100 tokens) and a large one (~1,500 tokens), because share is not
cost.

The feature's authors measured ~93% (appendOnly) vs ~22% (replace) on OpenAI. The twin follows OpenAI's
documented rule (any earlier prompt's exact prefix is reusable, in 128-token steps), under which replace loses
only the tail after the previous fragment; the authors' probe suggests OpenAI in practice reuses a prompt only
up to where an earlier request ended, so a replaced last message costs the whole conversation. Both are printed:
the twin's accounting, and the same requests under the "request ends only" rule.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
from typing import Any

from segue import Agent, RunStore, tool
from segue._core.tokens import complete_tokens
from segue.cache.layout import LayoutMode, RuntimeState
from segue.catalog import Catalog
from segue.providers import OpenAIChatProvider, Provider
from segue_twin import ScriptedPolicy, Twin
from segue_twin.view import AssistantTurn, PlannedCall

MODEL, VENDOR = "gpt-4.1-mini", "openai"
ITERATIONS = 10
WORDS = (
    "table column index query join filter revenue region customer order invoice status shipped pending quarter "
    "total average count distinct schema partition warehouse ledger account balance currency rate forecast"
).split()


def prose(seed: int, n_tokens: int) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    while len(" ".join(out)) < n_tokens * 4:
        out.append(rng.choice(WORDS))
    return " ".join(out)


@tool
def fetch_report(section: int) -> str:
    """Fetch one section of the quarterly report.

    Args:
        section: section number
    """
    return prose(1000 + section, 300)


def script() -> ScriptedPolicy:
    turns = [
        AssistantTurn(tool_calls=(PlannedCall(name="fetch_report", arguments={"section": i}),))
        for i in range(1, ITERATIONS)
    ]
    return ScriptedPolicy([*turns, AssistantTurn(text="The report's ten sections agree: revenue grew.")])


def state_fn(state_tokens: int) -> Any:
    def trailing_state(state: RuntimeState) -> str:
        return f"iteration {state.iteration} of {state.max_iterations}\n" + prose(state.iteration, state_tokens)

    return trailing_state


def request_ends_rule(bodies: list[dict[str, Any]], min_tokens: int = 1024, step: int = 128) -> list[int]:
    """Cached tokens per request if a prompt is reusable only up to where an earlier request ended."""
    # Each message on its own line, so "request N is a prefix of request N+1" is a byte-prefix test.
    rendered = [b"\n".join(json.dumps(m, sort_keys=True).encode() for m in b["messages"]) for b in bodies]
    cached = []
    for i, body in enumerate(rendered):
        best = 0
        for earlier in rendered[:i]:
            if body.startswith(earlier):
                best = max(best, complete_tokens(len(earlier)))
        system = json.dumps(bodies[i]["messages"][0], sort_keys=True).encode()
        if i and rendered[0].startswith(system) and body.startswith(system):
            best = max(best, complete_tokens(len(system)))  # the system prompt's own entry
        cached.append(0 if best < min_tokens else best - (best - min_tokens) % step)
    return cached


def loop_agent(provider: Provider, layout: LayoutMode, state_tokens: int) -> Agent:
    """The benchmark's agent: a ~3k-token system prompt, the report tool, a fragment of `state_tokens` tokens."""
    return Agent(
        provider,
        prose(7, 3000),
        [fetch_report],
        RunStore("sqlite:///:memory:"),
        max_iterations=ITERATIONS,
        trailing_state=state_fn(state_tokens),
        trailing_state_layout=layout,
    )


async def run(layout: LayoutMode, state_tokens: int, catalog: Catalog, turns: int = 1) -> dict[str, Any]:
    """The loop as `turns` runs of one conversation (each replays the earlier ones); the numbers are the last
    run's, its "request ends" share counted against every earlier request of the conversation."""
    twin = Twin(policy=script())
    agent = loop_agent(OpenAIChatProvider(MODEL, client=twin.openai_client()), layout, state_tokens)
    runs: list[str] = []
    earlier: list[dict[str, Any]] = []
    for turn in range(turns):
        if turn:
            twin.state.policy = script()
        result = await agent.run("Summarise the quarterly report, section by section.", runs=runs or None)
        assert result.status == "success", result
        runs.append(result.run_id)
        detail = agent.store.get_run(result.run_id)  # type: ignore[union-attr]
        assert detail is not None and len(detail.llm_interactions) == ITERATIONS
        bodies = [i.provider_request for i in detail.llm_interactions]
        if turn < turns - 1:
            earlier += bodies
    inputs = [i.usage.input_tokens for i in detail.llm_interactions]
    twin_cached = [i.usage.cache_read_tokens or 0 for i in detail.llm_interactions]
    ends_cached = request_ends_rule([*earlier, *bodies])[len(earlier) :]
    prices = catalog.resolve(MODEL, VENDOR).pricing
    assert prices is not None and prices.cache_read is not None
    output = result.usage.output_tokens * prices.output
    ends_cost = (sum(inputs) - sum(ends_cached)) * prices.input + sum(ends_cached) * prices.cache_read + output
    digest = hashlib.sha256(json.dumps(bodies).encode()).hexdigest()
    layout_meta = detail.meta.segue_layout if detail.meta is not None else None
    return {
        "decided": layout_meta.mode if layout_meta is not None else None,
        "input": sum(inputs),
        "twin_share": sum(twin_cached) / sum(inputs),
        "ends_share": sum(ends_cached) / sum(inputs),
        "cost": catalog.cost(result.usage, MODEL, VENDOR),
        "ends_cost": ends_cost / 1_000_000,
        "digest": int(digest[:8], 16),
    }


def main() -> None:
    logging.getLogger("segue").setLevel(logging.ERROR)
    catalog = Catalog.load()
    print(f"10-iteration tool loop on the OpenAI twin, {MODEL}@{VENDOR} (cache from 1024 tokens, 128-token steps)")
    for turns in (1, 2):
        print(f"\nturn {turns} of the conversation" + (" (replays turn 1)" if turns > 1 else ""))
        print(
            f"{'state':>7} {'layout':<17} {'cached (twin)':>13} {'cached (request ends)':>22} {'input tokens':>13} "
            f"{'cost $':>9} {'cost $ (request ends)':>22}"
        )
        for state_tokens in (100, 1500):
            layouts: tuple[LayoutMode, ...] = ("appendOnly", "replace", "auto", "byCost")
            rows = {layout: asyncio.run(run(layout, state_tokens, catalog, turns)) for layout in layouts}
            for layout, r in rows.items():
                shown = f"{layout}={r['decided']}" if layout in ("auto", "byCost") else layout
                print(
                    f"{state_tokens:>7} {shown:<17} {r['twin_share']:>13.1%} {r['ends_share']:>22.1%} "
                    f"{int(r['input']):>13,} {r['cost']:>9.5f} {r['ends_cost']:>22.5f}"
                )
    print("\nreference (the feature's authors, on OpenAI): ~93% appendOnly vs ~22% replace")


if __name__ == "__main__":
    main()
