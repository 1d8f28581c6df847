"""`trailing_state_layout="byCost"`: weighing by cost, not share, an explicit mode (docs/layout.md, "byCost").

On a prefix cache the catalog's flag says appendOnly (seed 004), and `auto` keeps that. Where the path's catalog
prices and the sizes say replace is cheaper, byCost picks replace: keeping each fragment costs its F tokens at
the read price on every later request; replacing it costs a step of the conversation (D tokens) sent again at
input less read price (gpt-4.1-mini@openai: $0.40 input, $0.10 read, so replace once F > 3 D), plus the
reasoning each step would lose (a replace run's reasoning is dropped from every replay, cause `layout`) at the
output price. Elsewhere the seed's decision stands: a first turn (no step measured), a self-hosted path (no
price), a block cache (replace already), a decision frozen before a pause.
"""

from __future__ import annotations

from typing import Any

from segue import Agent, RunStore, RuntimeState, tool
from segue.cache.layout import LayoutPlan, LayoutPolicy
from segue.catalog import Catalog
from segue.generated import Message, TextBlock, ToolCallBlock, ToolResultBlock, Usage
from segue.providers import OpenAIChatProvider
from segue_twin import Twin

PREFIX_HOST = ("openai", "gpt-4.1-mini")  # catalog: prefix_prompt_cache true, $0.40 input, $0.10 cache read
BLOCK_HOST = ("anthropic", "claude-sonnet-4-6")
SELF_HOSTED = ("vllm", "gpt-4.1-mini")  # vendors.json: vllm, prefix cache, pricing.self_hosted


def words(tokens: int) -> str:
    return "abcd" * tokens  # segue's estimate: one token per 4 bytes


def conversation(step_tokens: int) -> list[Message]:
    """One earlier turn whose tool step is about `step_tokens` tokens, then the new question."""
    return [
        Message(role="user", content=[TextBlock(text="q1")]),
        Message(role="assistant", content=[ToolCallBlock(id="c1", name="fetch", arguments={"n": 1})]),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="c1", content=words(step_tokens))]),
        Message(role="assistant", content=[TextBlock(text="a1")]),
        Message(role="user", content=[TextBlock(text="q2")]),
    ]


def decide(
    catalog: Catalog, fragment_tokens: int, history: list[Message], served: tuple[str, str], mode: Any = "byCost"
) -> Any:
    policy = LayoutPolicy(LayoutPlan.make(mode=mode, catalog=catalog, trailing_state=lambda s: words(fragment_tokens)))
    state = RuntimeState(
        run_id="r", iteration=1, max_iterations=10, usage_so_far=Usage(input_tokens=0, output_tokens=0)
    )
    policy.lay_out(history, policy.fragment_for(1, state), 1, boundary=len(history) - 1)
    return policy, policy.observe_served(1, *served)


def test_a_large_fragment_against_small_steps_is_replaced(catalog: Catalog) -> None:
    """A 2,000-token state, steps of ~45 tokens: 0.10 x 2,019 = 201.9 > 0.30 x 45 = 13.5, replace is cheaper."""
    _, d = decide(catalog, 2000, conversation(50), PREFIX_HOST)
    assert (d.mode, d.basis, d.frozen) == ("replace", "weighed", True)
    assert d.reason.startswith("catalog: gpt-4.1-mini@openai prefix_prompt_cache=true")
    assert d.reason.endswith(
        "by cost: keeping a 2019-token fragment costs 0.1 x 2019 = 201.9 $/M on each later request, replacing it "
        "re-sends a 45-token step at 0.4 - 0.1: 13.5, so replace"
    )


def test_a_small_fragment_against_large_steps_stays_append_only(catalog: Catalog) -> None:
    """A 100-token state, steps of ~300 tokens: 0.10 x 100 = 10 < 0.30 x 300 = 90, the seed's appendOnly."""
    _, d = decide(catalog, 100, conversation(300), PREFIX_HOST)
    assert d.mode == "appendOnly" and d.reason.endswith("so appendOnly") and d.basis == "weighed"


def test_auto_keeps_the_seed_meaning_and_is_not_weighed(catalog: Catalog) -> None:
    """Seed 004: `auto` is append-only on a byte-prefix cache, whatever the sizes (weighing is byCost's)."""
    _, d = decide(catalog, 2000, conversation(50), PREFIX_HOST, mode="auto")
    assert (d.mode, d.basis) == ("appendOnly", "served") and "by cost" not in d.reason


def test_where_nothing_says_replace_is_cheaper_the_seed_decides(catalog: Catalog) -> None:
    first_turn = [Message(role="user", content=[TextBlock(text="q1")])]  # no earlier step to measure
    _, d = decide(catalog, 2000, first_turn, PREFIX_HOST)
    assert d.mode == "appendOnly" and "not weighed, no earlier step" in d.reason
    assert d.basis == "served"  # not the conversation's decision yet: the first turn that can weigh decides
    _, d = decide(catalog, 2000, conversation(50), SELF_HOSTED)  # no per-token price: nothing to weigh
    assert d.mode == "appendOnly" and "by cost" not in d.reason
    _, d = decide(catalog, 10, conversation(5000), BLOCK_HOST)  # a block cache: replace, as before
    assert d.mode == "replace" and "by cost" not in d.reason


def test_a_cost_decision_stays_frozen_across_failover_and_a_pause(catalog: Catalog) -> None:
    policy, d = decide(catalog, 2000, conversation(50), PREFIX_HOST)
    assert policy.observe_served(2, *PREFIX_HOST).mode == "replace"  # later reports change nothing
    stored = policy.meta()
    assert (stored.configured, stored.mode, stored.reason, stored.basis) == ("byCost", "replace", d.reason, "weighed")
    # Resumed after a pause, on a path and with sizes that would weigh appendOnly: the stored decision holds.
    resumed = LayoutPolicy(
        LayoutPlan.make(mode="byCost", catalog=catalog, trailing_state=lambda s: "x", resumed=stored)
    )
    assert resumed.observe_served(3, *PREFIX_HOST).mode == "replace"
    assert resumed.meta().reason == d.reason


@tool
def fetch(n: int) -> str:
    """Fetch a short record.

    Args:
        n: record number
    """
    return f"record {n}: ok"


async def test_the_agent_replaces_a_large_state_on_a_prefix_cache_and_it_costs_less() -> None:
    """On the OpenAI twin (a byte-prefix cache), the second turn of a chat whose state is ~1,500 tokens and whose
    steps are a few dozen: byCost decides replace, and the turn costs less than under appendOnly."""
    catalog = Catalog.load(env=False)
    costs: dict[str, float] = {}
    decided: dict[str, Any] = {}
    for layout in ("byCost", "appendOnly"):
        store = RunStore("sqlite:///:memory:")
        twin = Twin()
        agent = Agent(
            OpenAIChatProvider("gpt-4.1-mini", client=twin.openai_client()),
            "You look records up. " * 300,
            [fetch],
            store,
            trailing_state=lambda s: f"iteration {s.iteration}\n" + words(1500),
            trailing_state_layout=layout,  # type: ignore[arg-type]
        )
        first = await agent.run("Fetch record 1.")
        second = await agent.run("Fetch record 2.", runs=[first.run_id])
        assert second.status == "success" and second.iterations >= 2
        costs[layout] = catalog.cost(second.usage, "gpt-4.1-mini", "openai")
        detail = store.get_run(second.run_id)
        assert detail is not None and detail.meta is not None
        decided[layout] = detail.meta.segue_layout
    assert decided["byCost"].mode == "replace" and "by cost" in decided["byCost"].reason
    assert costs["byCost"] < costs["appendOnly"]
