"""Issue 38 item 4: what a conversation's runs repeat is stored once (segue.store.repeats). Each run's meta keeps
a reference to its replay summary's id lists (a list tree the previous run's list shares but its last nodes) and
to its price sources, tools' hashes and stable context (one content-addressed part), while every reader gets the
meta exactly as written; rows written before (the values themselves in the meta) read as they always did."""

from __future__ import annotations

import json
from typing import Any

import pytest

from segue import Agent, RunResult, RunStore
from segue._core.hashing import canonical_json
from segue.demo import long_chat
from segue.demo import shop_db as sample_db
from segue.errors import StoreError
from segue.generated import ReplayKnobs, ReplaySummary, RunMeta, get_converter
from segue.providers import AnthropicProvider
from segue.store.bodies import Bodies
from segue.store.repeats import LIST, PART, Metas
from segue_twin import Twin

TURNS = 8


def _agent(store: RunStore, twin: Twin | None = None, *, thinking: bool = True) -> Agent:
    return Agent(
        AnthropicProvider(
            "claude-sonnet-4-6",
            thinking={"type": "enabled", "budget_tokens": 1024} if thinking else None,
            client=(twin or Twin()).anthropic_client(),
        ),
        "You answer questions about the shop database.",
        [sample_db.list_tables, sample_db.describe_table, sample_db.run_query],
        store,
    )


async def _chat(agent: Agent, turns: int, ids: list[str] | None = None) -> list[RunResult]:
    ids = ids if ids is not None else []
    results = []
    for question in long_chat(len(ids) + turns)[len(ids) :]:
        result = await agent.run(question, runs=ids or None, replay_last="all")
        assert result.status == "success", result.error
        results.append(result)
        ids.append(result.run_id)
    return results


def _stored_meta(store: RunStore, run_id: str) -> str:
    runs = store.models.AgentRun
    return str(runs.select(runs.meta).where(runs.id == run_id).scalar())


def _reads(store: RunStore, ids: list[str]) -> dict[str, Any]:
    """Every way a run's meta is read back: get_run, list_runs, load_runs (replay, retry, resume)."""
    details = {i: store.get_run(i) for i in ids}
    summaries = {s.run_id: s for s in store.list_runs(limit=len(ids) + 5)}
    loaded = store.load_runs(ids)
    return {
        "meta": [details[i].meta for i in ids],  # type: ignore[union-attr]
        "replay": [details[i].replay for i in ids],  # type: ignore[union-attr]
        "cost": [details[i].meta.segue_cost for i in ids],  # type: ignore[union-attr]
        "summaries": [(summaries[i].replay, summaries[i].cost, summaries[i].replay_text) for i in ids],
        "loaded": [loaded[i].meta for i in ids],
    }


async def test_a_conversation_stores_its_replayed_ids_and_price_sources_once(store: RunStore) -> None:
    results = await _chat(_agent(store), TURNS)
    ids = [r.run_id for r in results]
    last = json.loads(_stored_meta(store, ids[-1]))
    # The stored meta names no earlier run (the lists are a reference) and holds no price source's notes.
    stored = _stored_meta(store, ids[-1])
    assert not any(i in stored for i in ids[:-2]), stored
    assert "read 2026-12-01" not in stored and "models.json" not in stored
    assert last["segue.replay"]["knobs"]["runs"] == last["segue.replay"]["runs_full"]
    assert set(last["segue.replay"]["runs_full"]) == {LIST} and set(last["segue.cost"]["prices"]) == {PART}
    # So the stored meta stays the same size as the conversation grows (the tree's height may gain a digit).
    sizes = [len(_stored_meta(store, i)) for i in ids]
    assert max(sizes[3:]) - min(sizes[3:]) <= 40, sizes
    # Read back, every reader gets what the run returned.
    reads = _reads(store, ids)
    assert reads["replay"] == [r.replay for r in results]
    assert reads["cost"] == [r.cost for r in results]
    assert reads["loaded"] == reads["meta"]
    assert reads["summaries"] == [(r.replay, r.cost, r.replay_text) for r in results]
    replay = reads["replay"][-1]
    assert replay.knobs.runs == ids[:-1] and replay.runs_full == ids[:-1] and replay.reasoning_kept == ids[:-1]
    assert reads["cost"][-1].prices[0].note and "read 2026-12-01" in reads["cost"][-1].prices[0].note


async def test_runs_written_before_read_as_they_did_and_replay(store: RunStore) -> None:
    """A store written by a segue before this change holds each meta whole: every reader reads it as before, and
    a new turn replays those runs (its own meta stored by reference)."""
    twin = Twin()
    results = await _chat(_agent(store, twin), 5)
    ids = [r.run_id for r in results]
    expected = _reads(store, ids)
    for run_id, meta in zip(ids, expected["meta"], strict=True):
        whole = canonical_json(get_converter().unstructure(meta, RunMeta))  # what segue wrote before
        assert ids[0] in whole or run_id == ids[0]
        store.models.AgentRun.update(meta=whole).where(store.models.AgentRun.id == run_id).execute()
    assert LIST not in _stored_meta(store, ids[-1]) and PART not in _stored_meta(store, ids[-1])
    reopened = RunStore(store.url)  # no cache of the references' values
    try:
        assert _reads(reopened, ids) == expected
        [sixth] = await _chat(_agent(reopened, twin), 1, list(ids))
        assert sixth.replay is not None and sixth.replay.runs_full == ids
        assert LIST in _stored_meta(reopened, sixth.run_id)
        assert reopened.get_run(sixth.run_id).replay == sixth.replay  # type: ignore[union-attr]
    finally:
        reopened.close()


async def test_a_missing_part_is_a_store_error_naming_it(store: RunStore) -> None:
    [result] = await _chat(_agent(store), 1)
    key = json.loads(_stored_meta(store, result.run_id))["segue.cost"]["prices"][PART]
    parts = store.models.RequestPart
    parts.delete().where(parts.key == key).execute()
    reopened = RunStore(store.url)
    try:
        with pytest.raises(StoreError, match=f"missing from request_parts \\(e.g. {key}\\); they were deleted"):
            reopened.get_run(result.run_id)
    finally:
        reopened.close()


def test_equal_lists_are_one_tree_and_the_next_run_shares_the_previous_runs_nodes() -> None:
    """The write side alone: a run's lists that are equal are one tree, and the next run, whose lists are the
    previous run's plus one id, writes that id and the tree's last nodes, not the list again."""
    metas = Metas(Bodies(parts=None))
    splitter = metas._bodies.splitter

    def meta(n: int) -> RunMeta:
        ids = [f"01J{k:023d}" for k in range(n)]
        knobs = ReplayKnobs(runs=ids, replay_last="all", replay_reasoning=True)
        return RunMeta(
            segue_replay=ReplaySummary(
                schema_version=1,
                knobs=knobs,
                runs_full=ids,
                runs_text=[],
                reasoning_kept=ids,
                reasoning_dropped=[],
                warnings=[],
            )
        )

    before = metas.store(meta(200))
    splitter.written(before.parts)
    refs = before.value["segue.replay"]
    assert refs["knobs"]["runs"] == refs["runs_full"] == refs["reasoning_kept"] and refs["runs_text"] == []
    after = metas.store(meta(201))
    new_bytes = sum(len(t) for t in after.parts.values())
    whole = len(json.dumps(meta(201).segue_replay.knobs.runs))  # type: ignore[union-attr]
    assert f'"01J{200:023d}"' in after.parts.values() and new_bytes < whole / 10, (new_bytes, whole)


async def test_a_prewarm_names_its_runs_by_reference_and_reads_them_back(store: RunStore) -> None:
    """A conversation warmed before each turn names one more run each time (prewarms.runs): stored as a list
    tree like the meta's lists, read back as the ids; a row written before (the ids themselves) reads as it is."""
    agent = _agent(store, thinking=False)  # Anthropic cannot prewarm a prefix with thinking
    results = await _chat(agent, 3)
    ids = [r.run_id for r in results]
    warm = await agent.prewarm(runs=ids, replay_last="all")
    rows = store.models.PrewarmRow
    stored = json.loads(rows.select(rows.runs).where(rows.id == warm.prewarm_id).scalar())
    assert set(stored) == {LIST} and not any(i in json.dumps(stored) for i in ids)
    record = store.prewarms.get(warm.prewarm_id)
    assert record is not None and record.runs == ids == warm.runs and store.prewarms.list() == [record]
    rows.update(runs=json.dumps(ids)).where(rows.id == warm.prewarm_id).execute()  # what segue wrote before
    reopened = RunStore(store.url)
    try:
        assert reopened.prewarms.get(warm.prewarm_id) == record
    finally:
        reopened.close()
