"""Client-side compaction (Compaction): a summary made once, by a run of its own whose request continues the
conversation's cached prefix, replayed in place of the runs it stands for; a new one only every S runs or past a
token trigger, so the replayed prefix moves in steps. Bad policies are refused before any row."""

from __future__ import annotations

from typing import Any

import pytest

from segue import Agent, Compaction, InputError, ReplayRunError, RunStore
from segue.demo import PROMPT, demo_tools, long_chat
from segue.providers import AnthropicProvider
from segue.replay.compaction import INSTRUCTION
from segue.wire.anthropic.request import PREWARM_TURN
from segue_twin import Twin


def twin_agent(store: RunStore, **kw: Any) -> Agent:
    provider = AnthropicProvider(
        "claude-sonnet-4-6",
        cache_ttl="1h",
        thinking={"type": "enabled", "budget_tokens": 1024},
        client=Twin().anthropic_client(),
    )
    return Agent(provider, PROMPT, demo_tools(), store, max_iterations=8, **kw)


def first_body(store: RunStore, run_id: str) -> dict[str, Any]:
    detail = store.get_run(run_id)
    assert detail is not None
    body: dict[str, Any] = detail.llm_interactions[0].provider_request
    return body


def user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for m in body["messages"]:
        content = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        texts.extend(b["text"] for b in content if m["role"] == "user" and b["type"] == "text")
    return texts


def block_types(body: dict[str, Any]) -> list[str]:
    return [b["type"] for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]


def without_marks(messages: list[dict[str, Any]]) -> list[Any]:
    """Messages without their cache breakpoints (which move from request to request)."""
    return [
        {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
        if isinstance(m["content"], list)
        else m
        for m in messages
    ]


async def test_a_compaction_is_a_run_of_its_own_read_from_the_cache_and_replayed_in_place_of_its_runs(
    store: RunStore,
) -> None:
    agent = twin_agent(store, compaction=Compaction(every=3))
    ids: list[str] = []
    results = []
    for question in long_chat(7):
        result = await agent.run(question, runs=ids or None)
        assert result.status == "success", result.error
        results.append(result)
        ids.append(result.run_id)
    # Turns 1-3: nothing compacted; turn 4 (3 earlier runs) makes the first compaction, turn 7 the second.
    assert all(r.replay is None or r.replay.compaction is None for r in results[:3])
    made = [r.replay.compaction for r in results[3:] if r.replay is not None]
    assert [c.runs if c else None for c in made] == [3, 3, 3, 6]
    first, second = made[0], made[3]
    assert first is not None and second is not None
    assert (first.first, first.last) == (ids[0], ids[2]) and (second.first, second.last) == (ids[0], ids[5])
    for ref in (first, second):
        detail = store.get_run(ref.run_id)
        assert detail is not None and detail.status == "success" and detail.input == INSTRUCTION
        assert detail.meta is not None and detail.meta.segue_compaction == ref  # marked, naming what it stands for
        assert len(detail.llm_interactions) == 1  # one call, recorded and priced as the run's own
        usage = detail.llm_interactions[0].usage
        assert (usage.cache_read_tokens or 0) >= 0.8 * usage.input_tokens, usage  # the span read from the cache
        assert detail.meta.segue_cost is not None
    # The summary request continues what the last turn sent: turn 3's last request, its answer, the instruction.
    last = store.get_run(ids[2])
    assert last is not None
    sent = last.llm_interactions[-1].provider_request["messages"]
    summary_request = first_body(store, first.run_id)
    assert without_marks(summary_request["messages"][: len(sent)]) == without_marks(sent)
    assert user_texts(summary_request)[-1] == INSTRUCTION
    # Turn 4 replays the summary alone (no tool call or result of the compacted runs), then the new question.
    turn4 = first_body(store, ids[3])
    assert user_texts(turn4) == [INSTRUCTION, long_chat(7)[3]]
    assert "tool_use" not in block_types(turn4) and "tool_result" not in block_types(turn4)
    # Between compactions the prefix holds: turn 5's first request extends turn 4's last request.
    turn4_last = store.get_run(ids[3])
    assert turn4_last is not None
    before = without_marks(turn4_last.llm_interactions[-1].provider_request["messages"])
    assert without_marks(first_body(store, ids[4])["messages"])[: len(before)] == before
    # The runs after the compaction replay in full, reasoning kept; the compacted runs' reasoning is dropped with
    # its own cause, named on the compaction.
    turn6 = results[5].replay
    assert turn6 is not None and turn6.runs_full == ids[3:5] and turn6.runs_text == []
    assert set(turn6.reasoning_kept) == set(ids[3:5])
    compacted = [w for w in turn6.warnings if w.cause == "compacted"]
    assert [w.run_id for w in compacted] == [first.run_id]
    assert "reasoning" in compacted[0].message and ids[0] in compacted[0].message


async def test_a_trigger_compacts_once_the_replayed_region_passes_it(store: RunStore) -> None:
    agent = twin_agent(store)
    ids: list[str] = []
    compactions = []
    for question in long_chat(8):
        result = await agent.run(question, runs=ids or None, compaction={"trigger_tokens": 2_500})
        assert result.status == "success", result.error
        compactions.append(result.replay.compaction if result.replay else None)
        ids.append(result.run_id)
    made = {c.run_id for c in compactions if c is not None}
    assert made, "the replayed region passed 2,500 tokens within 8 turns, so a compaction was made"
    # Not every turn: a compaction is replayed by the turns after it until the region passes the trigger again.
    assert len(made) < sum(c is not None for c in compactions)


async def test_a_failed_summary_leaves_the_conversation_as_it_was_with_a_warning(store: RunStore) -> None:
    """The summarizer answering with a tool call (one call allowed, no tool run for it) makes no compaction: the
    turn replays its runs as before, with a `compacted` warning naming the failed run, and succeeds."""
    agent = twin_agent(store)
    ids: list[str] = []
    for question in ["Which tables are there?", "How many customers are in each country?"]:
        ids.append((await agent.run(question, runs=ids or None)).run_id)
    # An instruction the twin's analyst answers with tool calls (a schema question needs describe_table).
    agent = twin_agent(store, compaction=Compaction(every=2, instruction="Which tables and columns are in the schema?"))
    result = await agent.run("What are the top 3 products by revenue?", runs=ids)
    assert result.status == "success"
    assert result.replay is not None and result.replay.compaction is None
    failed = [w for w in result.replay.warnings if w.cause == "compacted"]
    assert len(failed) == 1 and "failed" in failed[0].message
    detail = store.get_run(failed[0].run_id)
    assert detail is not None and detail.status == "max_iterations"
    assert result.replay.runs_full == ids


@pytest.mark.parametrize(
    ("policy", "named"),
    [
        ({"every": 0}, "every must be a whole number >= 1"),
        ({"every": -2}, "got -2"),
        ({"trigger_tokens": 0}, "trigger_tokens must be a whole number >= 1"),
        ({"every": True}, "got True"),
        ({}, "needs every=S"),
        ({"every": 4, "keep": 2}, "no field 'keep'"),
        ({"every": 4, "instruction": "  "}, "instruction must be a non-empty string .*not blank"),
    ],
)
async def test_a_policy_that_cannot_work_is_refused_before_any_row(store: RunStore, policy: Any, named: str) -> None:
    agent = twin_agent(store)
    first = await agent.run("Which tables are there?")
    before = len(store.list_runs())
    with pytest.raises(InputError, match=named):
        await agent.run("How many customers are in each country?", runs=[first.run_id], compaction=policy)
    with pytest.raises(InputError, match=named):
        twin_agent(store, compaction=policy)
    assert len(store.list_runs()) == before


async def test_a_trigger_below_the_models_cache_minimum_is_refused_before_any_row(store: RunStore) -> None:
    """claude-sonnet-4-6's minimum cacheable prompt is 1,024 tokens (catalog llm.cache_min_tokens, from
    Anthropic's prompt-caching page: "The minimum cacheable prompt length is: 1024 tokens for ... Claude Sonnet
    4.6"): a trigger below it would compact a region the vendor cannot cache."""
    agent = twin_agent(store)
    first = await agent.run("Which tables are there?")
    before = len(store.list_runs())
    with pytest.raises(ReplayRunError, match=r"trigger_tokens=1,000 is below anthropic/claude-sonnet-4-6's") as e:
        await agent.run("How many customers per country?", runs=[first.run_id], compaction={"trigger_tokens": 1000})
    assert e.value.reason == "invalid" and "1,024" in str(e.value)
    assert len(store.list_runs()) == before


async def test_compaction_with_another_window_is_refused(store: RunStore) -> None:
    agent = twin_agent(store)
    first = await agent.run("Which tables are there?")
    with pytest.raises(ReplayRunError, match="does not combine with") as e:
        await agent.run("Top 3 products?", runs=[first.run_id], replay_keep=4, compaction=Compaction(every=2))
    assert e.value.reason == "invalid"
    # The agent's policy gives way to a run that bounds its replay another way.
    agent = twin_agent(store, compaction=Compaction(every=1))
    result = await agent.run("Top 3 products?", runs=[first.run_id], replay_keep=4)
    assert result.status == "success" and result.replay is not None and result.replay.compaction is None


async def test_runs_show_explain_and_the_dashboard_say_which_runs_a_compaction_stands_for(store: RunStore) -> None:
    from segue._core.run_text import replay_text
    from segue.apps.cli.render import show_text
    from segue.apps.dashboard.views import run_view
    from segue.cache.explain import explain_run

    agent = twin_agent(store, compaction=Compaction(every=2))
    ids: list[str] = []
    for question in long_chat(3):
        ids.append((await agent.run(question, runs=ids or None)).run_id)
    turn3 = store.get_run(ids[2])
    assert turn3 is not None and turn3.replay is not None and turn3.replay.compaction is not None
    made = turn3.replay.compaction
    stands = f"the first 2 runs ({ids[0]} to {ids[1]})"
    assert replay_text(turn3.replay).startswith(
        f"replayed compaction {made.run_id} (the summary of the first 2 runs, {ids[0]} to {ids[1]}), "
        "then 0 runs after it"
    )
    shown = show_text(turn3)
    assert f"compaction: {made.run_id}, the summary of {stands}; its call: segue runs show {made.run_id}" in shown
    compaction_run = store.get_run(made.run_id)
    assert compaction_run is not None
    assert f"compaction: this run's answer summarizes {stands}" in show_text(compaction_run)
    view = run_view(turn3, store.get_run(ids[1]), lambda usage, model, vendor: None)
    assert view.replay_runs[0].run_id == made.run_id
    assert view.replay_runs[0].mode == f"summary of {stands}"
    explained = explain_run(turn3, store.get_run(ids[1]))
    assert f"compaction {made.run_id} now stands for {stands}" in explained.iterations[0].reason


async def test_a_prewarm_before_a_turn_that_compacts_warms_the_summary_requests_prefix(store: RunStore) -> None:
    """The turn after `every` runs first sends the compaction's summary request, and its own request carries a
    summary that does not exist before it: a prewarm then sends the summary request's prefix byte for byte (not the
    turn's, whose history= the summary request leaves out), and the summary request reads all of it from the
    cache."""
    twin = Twin()
    provider = AnthropicProvider("claude-sonnet-4-6", cache_ttl="1h", client=twin.anthropic_client())
    agent = Agent(provider, PROMPT, demo_tools(), store, max_iterations=8, compaction=Compaction(every=2))
    history = [
        {"role": "user", "content": "Earlier, off the record: I run the shop's Lisbon branch."},
        {"role": "assistant", "content": "Noted."},
    ]
    ids: list[str] = []
    for question in long_chat(2):
        ids.append((await agent.run(question, runs=ids or None, history=history)).run_id)
    warm = await agent.prewarm(runs=ids, history=history)
    record = store.prewarms.get(warm.prewarm_id)
    assert record is not None
    warmed = record.interaction.provider_request
    turn = await agent.run("Top 3 products by revenue?", runs=ids, history=history)
    assert turn.status == "success" and turn.replay is not None and turn.replay.compaction is not None
    made = store.get_run(turn.replay.compaction.run_id)
    assert made is not None
    summary_call = made.llm_interactions[0]
    sent = summary_call.provider_request
    # Byte for byte the summary request up to its instruction: the history= of the turn is not in it.
    # (Anthropic's prewarm closes the prefix with a user turn of its own: PREWARM_TURN, answered with max_tokens 0.)
    assert warmed["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": PREWARM_TURN}]}
    assert without_marks(warmed["messages"][:-1]) == without_marks(sent["messages"][:-1])
    assert user_texts(sent)[-1] == INSTRUCTION and history[0]["content"] not in user_texts(warmed)
    assert (warmed["system"], warmed["tools"]) == (sent["system"], sent["tools"])
    # ...so the summary request reads from the cache all the prewarm cached (read or written), where the turn's own
    # prefix (with its history=) would have left the summary request its last replayed message to write.
    cached = (warm.usage.cache_read_tokens or 0) + (warm.usage.cache_write_tokens or 0)
    assert cached > 0 and summary_call.usage.cache_read_tokens == cached
