"""The layout is decided once per conversation (docs/layout.md, "Once per conversation"; issue #42 item 3).

Before, `auto` weighed every run of a conversation anew by cost. On a byte-prefix cache (gpt-4.1-mini@openai on
the OpenAI twin) with a ~600-token runtime state, a conversation whose first two turns fetch short records and
whose third fetches a long one was laid out appendOnly (turn 1: no step to measure), replace (turn 2: the steps
are short, keeping the fragment costs more), replace (turn 3), appendOnly (turn 4: the long record made a step
worth more than the fragment): main at 368b0c4 recorded exactly that for `four_turns("auto")`, with
unstored_fragments [1, 2] on turns 2 and 3. Each replace turn left its fragments unstored, so on a path that
takes reasoning back every later replay dropped that turn's reasoning with cause `layout`, a loss the weighing
never counted.

Now `auto` is seed 004's rule (append-only on a byte-prefix cache) and is never weighed; weighing is the explicit
`byCost` mode, decided at the first turn that can weigh and read back by every later turn (basis
`conversation`), whatever the later turns' sizes would say.
"""

from __future__ import annotations

from typing import Any

import pytest

from segue import Agent, RunStore, tool
from segue.cache.layout import build_fragment
from segue.cache.layout_decision import ConversationSizes, LayoutRule, weigh
from segue.catalog import Catalog
from segue.generated import LayoutMeta, Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from segue.providers import OpenAIChatProvider
from segue_twin import Twin

MODEL, VENDOR = "gpt-4.1-mini", "openai"  # catalog: prefix_prompt_cache true, $0.40 input, $0.10 cache read
#: Record sizes (tokens) per turn: short, short, long, short.
RECORD_TOKENS = {1: 40, 2: 40, 3: 6000, 4: 40}


def words(tokens: int) -> str:
    return "abcd" * tokens  # segue's estimate: one token per 4 bytes


def state_text(iteration: int) -> str:
    return f"iteration {iteration}\n" + words(600)


@tool
def fetch(n: int) -> str:
    """Fetch a record.

    Args:
        n: record number
    """
    return f"record {n}: " + words(RECORD_TOKENS[n])


async def four_turns(layout: Any) -> tuple[RunStore, list[str]]:
    store = RunStore("sqlite:///:memory:")
    agent = Agent(
        OpenAIChatProvider(MODEL, client=Twin().openai_client()),
        "You look records up. " * 300,
        [fetch],
        store,
        trailing_state=lambda s: state_text(s.iteration),
        trailing_state_layout=layout,
    )
    ids: list[str] = []
    for turn in range(1, 5):
        result = await agent.run(f"Fetch record {turn}.", runs=ids or None)
        assert result.status == "success" and result.iterations == 2, result.error
        ids.append(result.run_id)
    return store, ids


def layouts(store: RunStore, ids: list[str]) -> list[LayoutMeta]:
    out = []
    for run_id in ids:
        detail = store.get_run(run_id)
        assert detail is not None and detail.meta is not None and detail.meta.segue_layout is not None
        out.append(detail.meta.segue_layout)
    return out


def weighed_anew(catalog: Catalog, store: RunStore, ids: list[str]) -> list[str]:
    """What the old `auto` decided for each turn: the cost rule applied to that turn's own sizes (its first
    fragment against the steps of the turns it replays), with nothing read back."""
    rule = LayoutRule(configured="byCost", catalog=catalog)
    decided = []
    for turn, _ in enumerate(ids):
        earlier: list[Message] = []
        for run_id in ids[:turn]:
            detail = store.get_run(run_id)
            assert detail is not None
            earlier += [t.message for t in detail.traces]
        sizes = ConversationSizes.measure(build_fragment(state_text(1), 1), earlier)
        decided.append(rule.on_served(MODEL, VENDOR, 1, sizes, None).mode)
    return decided


async def test_auto_no_longer_flips_between_the_turns_of_a_conversation(catalog: Catalog) -> None:
    store, ids = await four_turns("auto")
    # The old rule, weighing each turn anew on this very conversation: the flip the seed audit found.
    assert weighed_anew(catalog, store, ids) == ["appendOnly", "replace", "replace", "appendOnly"]
    # Now: the first turn decides by the catalog (seed 004), every later turn reads that decision back.
    got = layouts(store, ids)
    assert [m.mode for m in got] == ["appendOnly"] * 4
    assert [m.basis for m in got] == ["served", "conversation", "conversation", "conversation"]
    assert all("by cost" not in (m.reason or "") for m in got)
    assert got[1].reason is not None and got[1].reason.startswith(f"the conversation's, as run {ids[0]} decided it")
    assert not any(m.unstored_fragments for m in got)  # every fragment stored: no reasoning lost to the layout


async def test_by_cost_is_weighed_once_for_the_conversation_and_held(catalog: Catalog) -> None:
    store, ids = await four_turns("byCost")
    got = layouts(store, ids)
    # Turn 1 cannot weigh (no step yet) and is not the conversation's decision; turn 2 weighs: replace. Turns 3
    # and 4 read it back, although turn 4's own sizes (after the long record) would weigh appendOnly.
    assert [m.mode for m in got] == ["appendOnly", "replace", "replace", "replace"]
    assert [m.basis for m in got] == ["served", "weighed", "conversation", "conversation"]
    assert "not weighed, no earlier step" in (got[0].reason or "")
    assert got[3].reason == f"the conversation's, as run {ids[1]} decided it: {got[1].reason}"
    assert weighed_anew(catalog, store, ids)[3] == "appendOnly"


async def test_explicit_modes_and_another_mode_are_not_read_back(catalog: Catalog) -> None:
    """A run configured otherwise than the conversation's runs decides for itself."""
    store, ids = await four_turns("byCost")
    rule = LayoutRule(configured="auto", catalog=catalog)
    conversation = [(r, m) for r, m in zip(ids, layouts(store, ids), strict=True)]
    assert rule.before_first_call(conversation=conversation) is None  # byCost's decisions are not auto's
    explicit = LayoutRule(configured="appendOnly", catalog=catalog).before_first_call(conversation=conversation)
    assert explicit is not None and (explicit.mode, explicit.basis) == ("appendOnly", "configured")


def step(reasoning_tokens: int, result_tokens: int) -> list[Message]:
    content: list[Any] = [ToolCallBlock(id="c", name="fetch", arguments={"n": 1})]
    if reasoning_tokens:
        content.insert(0, ReasoningBlock(vendor="openai", format="openai.reasoning_item", text=words(reasoning_tokens)))
    return [
        Message(role="user", content=[TextBlock(text="q")]),
        Message(role="assistant", content=content),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="c", content=words(result_tokens))]),
    ]


def test_by_cost_counts_the_reasoning_a_replace_layout_would_drop(catalog: Catalog) -> None:
    """Without reasoning, a 1,000-token fragment against ~100-token steps weighs replace (read x F > (input -
    read) x D). With ~150 reasoning tokens per step, which a replace run's replay drops (cause `layout`), replace
    also costs output x R and appendOnly is cheaper (gpt-4.1-mini@openai's catalog prices)."""
    prices = catalog.resolve(MODEL, VENDOR).pricing
    assert prices is not None and prices.cache_read is not None
    read, rest, out = prices.cache_read, prices.input - prices.cache_read, prices.output
    fragment = build_fragment(words(1000), 1)
    plain = ConversationSizes.measure(fragment, step(0, 80))
    assert plain.reasoning == 0 and plain.step < 300
    assert weigh(prices, plain)[0] == "replace"
    thinking = ConversationSizes.measure(fragment, step(150, 80))
    assert thinking.reasoning >= 150 and thinking.step == pytest.approx(plain.step + thinking.reasoning, abs=2)
    mode, why = weigh(prices, thinking)
    assert mode == "appendOnly"
    assert f"+ the step's {thinking.reasoning} reasoning tokens it drops at {out:g}: " in why
    keep = read * thinking.fragment
    assert keep > rest * thinking.step  # the weighing without the reasoning would have said replace
    assert keep < rest * thinking.step + out * thinking.reasoning
