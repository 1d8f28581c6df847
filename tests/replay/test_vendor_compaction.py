"""Compaction(vendor=True): the one policy object lets the serving path's vendor compact server-side. It turns on
the path's own compaction (ModelSettings.compaction, where the catalog row says llm.vendor_compaction), is refused
before any row where the path has none, and the compaction block a response carries is the artifact: later turns
replay from the run that carries it, and the replay summary, `runs show`, explain and the dashboard name the runs
it stands for.

Source of the replay rule: "The API automatically drops all message blocks prior to the compaction block"
(platform.claude.com/docs/en/build-with-claude/compaction), so the runs before it are not sent."""

from __future__ import annotations

from typing import Any

import pytest

from segue import Agent, Compaction, InputError, RunStore
from segue.demo import PROMPT, demo_tools, long_chat
from segue.generated import CompactionBlock
from segue.providers import AnthropicProvider
from segue_twin import Twin

#: Past the trigger after a few turns of the demo chat (its first turns send 1-3k tokens each).
TRIGGER = 4_000


def twin_agent(store: RunStore, model: str = "claude-sonnet-4-6", **kw: Any) -> Agent:
    provider = AnthropicProvider(
        model,
        cache_ttl="1h",
        thinking={"type": "enabled", "budget_tokens": 1024},
        client=Twin().anthropic_client(),
    )
    return Agent(provider, PROMPT, demo_tools(), store, max_iterations=8, **kw)


def carries_block(store: RunStore, run_id: str) -> bool:
    detail = store.get_run(run_id)
    assert detail is not None
    return any(isinstance(b, CompactionBlock) for t in detail.traces for b in t.message.content)


async def test_a_path_without_vendor_compaction_refuses_the_policy_before_any_row(store: RunStore) -> None:
    """claude-sonnet-4-5's catalog row does not say llm.vendor_compaction (Anthropic's compaction page lists Claude
    Mythos Preview, Opus 4.7, Opus 4.6 and Sonnet 4.6): the policy is refused, on the agent and on a run, naming
    the path, the value and what to do, and nothing is written."""
    policy = Compaction(vendor=True, trigger_tokens=50_000)
    with pytest.raises(InputError) as e:
        twin_agent(store, "claude-sonnet-4-5", compaction=policy)
    message = str(e.value)
    assert "Compaction(vendor=True, trigger_tokens=50000), given as Agent(compaction=...)," in message
    assert "claude-sonnet-4-5" in message and "llm.vendor_compaction" in message
    assert "drop vendor=True and pass every=S or trigger_tokens=T" in message
    agent = twin_agent(store, "claude-sonnet-4-5")
    first = await agent.run("Which tables are there?")
    before = len(store.list_runs())
    with pytest.raises(
        InputError, match=r"Compaction\(vendor=True.*given as compaction.*claude-sonnet-4-5.*llm.vendor_compaction"
    ):
        await agent.run("Top 3 products?", runs=[first.run_id], compaction=policy)
    with pytest.raises(InputError, match=r"llm\.vendor_compaction"):
        await agent.run("Top 3 products?", compaction={"vendor": True})
    assert len(store.list_runs()) == before


@pytest.mark.parametrize(
    ("policy", "named"),
    [
        ({"vendor": True, "every": 4}, "never every N runs"),
        ({"vendor": "yes"}, "vendor must be True or False, got 'yes'"),
    ],
)
async def test_a_vendor_policy_that_cannot_work_is_refused_before_any_row(
    store: RunStore, policy: Any, named: str
) -> None:
    agent = twin_agent(store)
    first = await agent.run("Which tables are there?")
    before = len(store.list_runs())
    with pytest.raises(InputError, match=named):
        await agent.run("Top 3 products?", runs=[first.run_id], compaction=policy)
    with pytest.raises(InputError, match=named):
        twin_agent(store, compaction=policy)
    assert len(store.list_runs()) == before


async def test_the_policy_and_a_different_model_setting_are_refused_together(store: RunStore) -> None:
    agent = twin_agent(store)
    with pytest.raises(InputError, match="sets it too, differently; pass one of them"):
        await agent.run(
            "Which tables are there?",
            compaction=Compaction(vendor=True, trigger_tokens=TRIGGER),
            model_settings={"compaction": {"trigger_tokens": 9_000}},
        )
    assert store.list_runs() == []


async def test_the_vendor_compacts_and_later_turns_replay_from_the_run_that_carries_its_block(
    store: RunStore,
) -> None:
    agent = twin_agent(store, compaction=Compaction(vendor=True, trigger_tokens=TRIGGER))
    ids: list[str] = []
    results = []
    for question in long_chat(8):
        result = await agent.run(question, runs=ids or None)
        assert result.status == "success", result.error
        results.append(result)
        ids.append(result.run_id)
    # Every request turns the vendor's compaction on, with the policy's trigger.
    body = store.get_run(ids[0]).llm_interactions[0].provider_request  # type: ignore[union-attr]
    assert body["context_management"] == {
        "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": TRIGGER}}]
    }
    carrying = [i for i, run_id in enumerate(ids) if carries_block(store, run_id)]
    assert carrying and carrying[0] >= 1, "the chat passes the trigger after its first turn"
    k = carrying[0]
    # The turns after it replay from that run: the runs before it are not sent, and the summary names them.
    after = results[k + 1]
    assert after.replay is not None and after.replay.compaction is not None
    ref = after.replay.compaction
    assert (ref.vendor, ref.run_id, ref.runs, ref.first, ref.last) == ("anthropic", ids[k], k, ids[0], ids[k - 1])
    assert after.replay.runs_full == ids[k : k + 1]
    assert after.replay.knobs is not None and after.replay.knobs.runs == ids[: k + 1]  # as the run asked
    assert after.replay.warnings[0].cause == "compacted"
    sent = store.get_run(after.run_id).llm_interactions[0].provider_request  # type: ignore[union-attr]
    first_asked = store.get_run(ids[0]).input  # type: ignore[union-attr]
    texts = [b.get("text") for m in sent["messages"] for b in m["content"] if isinstance(b, dict)]
    assert first_asked not in texts  # the first run is not sent
    assert any(b.get("type") == "compaction" for m in sent["messages"] for b in m["content"])
    # Its cost is whole: the summary's sampling (usage.iterations) is priced in the run that carries the block.
    made = store.get_run(ids[k])
    assert made is not None and any(c.usage.compaction_iterations for c in made.llm_interactions)


async def test_runs_show_explain_and_the_dashboard_name_the_vendors_block_and_its_runs(store: RunStore) -> None:
    from segue._core.run_text import replay_text
    from segue.apps.cli.render import show_text
    from segue.apps.dashboard.views import run_view
    from segue.cache.explain import explain_run

    agent = twin_agent(store, compaction=Compaction(vendor=True, trigger_tokens=TRIGGER))
    ids: list[str] = []
    for question in long_chat(8):
        ids.append((await agent.run(question, runs=ids or None)).run_id)
    k = next(i for i, run_id in enumerate(ids) if carries_block(store, run_id))
    turn = store.get_run(ids[k + 1])
    assert turn is not None and turn.replay is not None and turn.replay.compaction is not None
    stands = f"the first {k} runs ({ids[0]} to {ids[k - 1]})"
    assert replay_text(turn.replay).startswith(
        f"replayed anthropic's compaction block in run {ids[k]} (standing for the first {k} runs, {ids[0]} to "
        f"{ids[k - 1]}), then 1 run after it"
    )
    assert (
        f"compaction: anthropic's block in run {ids[k]}'s response, standing for {stands}; its call: segue runs "
        f"show {ids[k]}"
    ) in show_text(turn)
    view = run_view(turn, store.get_run(ids[k]), lambda usage, model, vendor: None)
    assert view.replay_runs[0].mode == f"anthropic's compaction block, standing for {stands}"
    explained = explain_run(turn, store.get_run(ids[k]))
    assert f"anthropic's compaction block in run {ids[k]}'s response now stands for {stands}" in (
        explained.iterations[0].reason
    )
