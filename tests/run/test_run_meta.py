"""agent_runs.meta is one schema type, RunMeta, read and written through the generated converter; rows an older
segue wrote still read, retry and replay."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from segue import Agent, RunStore, StoreError
from segue.generated import ContextBlock, LayoutMeta, RunMeta, StoredRequest
from segue.testing import ScriptedProvider, call, text
from tests._support.helpers import lookup, stored_meta

OLD_SEED = "sha256:" + "7" * 64


def old_meta(tools: dict[str, str]) -> dict[str, object]:
    """What segue wrote before RunMeta: explicit nulls for unset optional values, a request without `vendor` (the
    first versions had no runtime vendor) and the `segue.vendor_warnings` list that later became segue.notes."""
    return {
        "segue.tools": tools,
        "segue.request": {
            "history": [
                {"role": "user", "content": [{"type": "text", "text": "Which table holds orders?"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "The orders table."}]},
            ],
            "context": [{"text": "Today is Monday.", "placement": "dynamic", "source": None}],
            "model": None,
            "replay_last": 0,
            "replay_reasoning": True,
            "replay_budget_tokens": None,
        },
        "segue.prefix": {
            "schema_version": 1,
            "vendor": "scripted",
            "model": "scripted-1",
            "system_hash": "sha256:" + "1" * 64,
            "tools_hash": "sha256:" + "2" * 64,
            "seed": OLD_SEED,
        },
        "segue.vendor_warnings": ["the vendor dropped more reasoning than segue predicted"],
        "segue.layout": {"configured": "auto", "restored_iteration": None},
    }


@pytest.fixture
def old_run(tmp_path: Path) -> tuple[str, str]:
    """(store url, run id) of a finished run whose meta column holds what an older segue wrote."""
    url = f"sqlite:///{tmp_path / 'old.db'}"
    store = RunStore(url)
    agent = Agent(ScriptedProvider.of(call("lookup", {"q": "x"}), text("done")), "p", [lookup], store)
    try:
        import asyncio

        result = asyncio.run(agent.run("find x"))
        detail = store.get_run(result.run_id)
        assert detail is not None and detail.meta is not None and detail.meta.segue_tools
        tools = dict(detail.meta.segue_tools)
    finally:
        store.close()
    with sqlite3.connect(tmp_path / "old.db") as db:
        db.execute("UPDATE agent_runs SET meta = ? WHERE id = ?", (json.dumps(old_meta(tools)), result.run_id))
    return url, result.run_id


def test_an_older_rows_meta_reads_as_run_meta(old_run: tuple[str, str]) -> None:
    url, run_id = old_run
    store = RunStore(url, read_only=True)
    try:
        detail = store.get_run(run_id)
        summary = store.list_runs()[0]
        stored = store.load_runs([run_id])[run_id]
    finally:
        store.close()
    assert detail is not None and detail.meta is not None and summary.run_id == run_id
    meta = detail.meta
    assert meta.segue_request == StoredRequest(
        history=meta.segue_request.history if meta.segue_request else None,
        context=[ContextBlock(text="Today is Monday.", placement="dynamic")],
        replay_last=0,
        replay_reasoning=True,
    )
    assert meta.segue_prefix is not None and meta.segue_prefix.seed == OLD_SEED == detail.prefix.seed  # type: ignore[union-attr]
    assert meta.segue_layout == LayoutMeta(configured="auto", restored_iteration=None)
    # A key RunMeta does not name is kept as it was, not dropped.
    assert meta.extra == {"segue.vendor_warnings": ["the vendor dropped more reasoning than segue predicted"]}
    assert stored.meta == meta


async def test_an_older_run_retries_from_its_typed_meta(old_run: tuple[str, str]) -> None:
    url, run_id = old_run
    store = RunStore(url)
    provider = ScriptedProvider.of(text("done again"))
    agent = Agent(provider, "p", [lookup], store)
    try:
        result = await agent.retry(run_id)
        retried = store.get_run(result.run_id)
    finally:
        store.close()
    assert result.status == "success" and result.answer == "done again"
    sent = provider.requests[0]
    # The old row's history and context were rebuilt: history first, then the input with the context folded in.
    assert [m.role for m in sent.messages] == ["user", "assistant", "user"]
    assert "Today is Monday." in sent.messages[-1].content[0].text  # type: ignore[union-attr]
    assert retried is not None and retried.retry_of == run_id
    assert retried.meta is not None and retried.meta.segue_request is not None
    assert retried.meta.segue_request.context == [ContextBlock(text="Today is Monday.", placement="dynamic")]


def test_segue_keeps_keys_it_does_not_name_when_it_updates_the_meta(old_run: tuple[str, str]) -> None:
    url, run_id = old_run
    store = RunStore(url)
    try:
        detail = store.get_run(run_id)
        assert detail is not None
        layout = LayoutMeta(configured="replace", mode="replace", reason="configured", iteration=0, basis="configured")
        # An old row's run still going: only a running run's end is written (a compare-and-set, issue 35 R5).
        store.db.execute_sql("UPDATE agent_runs SET status = 'running' WHERE id = ?", (run_id,))
        store.finish_run(
            run_id, status="success", answer=detail.answer, error=None, usage=detail.usage, iterations=2,
            meta_updates=RunMeta(segue_layout=layout),
        )  # fmt: skip
        after = store.get_run(run_id)
    finally:
        store.close()
    meta = stored_meta(after)
    assert meta["segue.layout"]["mode"] == "replace"
    assert meta["segue.vendor_warnings"] == ["the vendor dropped more reasoning than segue predicted"]
    assert meta["segue.prefix"]["seed"] == OLD_SEED


def test_a_meta_segue_cannot_read_is_a_store_error_naming_the_run(old_run: tuple[str, str], tmp_path: Path) -> None:
    url, run_id = old_run
    with sqlite3.connect(tmp_path / "old.db") as db:
        db.execute(
            "UPDATE agent_runs SET meta = ? WHERE id = ?", (json.dumps({"segue.pending": {"iteration": 1}}), run_id)
        )
    store = RunStore(url, read_only=True)
    try:
        with pytest.raises(StoreError, match=f"agent_runs.meta of run {run_id}"):
            store.get_run(run_id)
    finally:
        store.close()
