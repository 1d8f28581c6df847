"""Request bodies stored once (segue.store.bodies): every stored request reads back as the exact body the vendor
received, storage per turn stays flat as a replayed conversation grows, and migration 6 converts old stores."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Mapping
from typing import Any

import pytest

from segue import Agent, RunStore
from segue._core.hashing import canonical_json
from segue.demo import long_chat, run_chat
from segue.demo import shop_db as sample_db
from segue.generated import RunMeta, Usage, get_converter
from segue.providers import AnthropicProvider, OpenAIResponsesProvider
from segue.store import migrations
from segue.store.bodies import Splitter, join_all
from segue.wire.common import WireRequest
from segue_twin import Twin
from segue_twin.transport import TwinAsyncTransport
from tests._support import warm_cli


class Capture:
    """A twin handler that keeps every request body the official client put on the wire."""

    def __init__(self, twin: Twin) -> None:
        self.twin = twin
        self.bodies: list[bytes] = []

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes, **options: Any) -> Any:
        if method == "POST":
            self.bodies.append(body)
        return self.twin.handle(method, path, headers, body, **options)


def body_bytes(store: RunStore) -> int:
    """What the store holds for request bodies: the skeletons and the parts."""
    (skeletons,) = store.db.execute_sql(
        "SELECT COALESCE(SUM(LENGTH(provider_request)), 0) FROM llm_interactions"
    ).fetchone()
    (parts,) = store.db.execute_sql("SELECT COALESCE(SUM(LENGTH(body)), 0) FROM request_parts").fetchone()
    return int(skeletons) + int(parts)


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_every_stored_request_is_the_body_the_vendor_received(store: RunStore, vendor: str) -> None:
    import httpx2

    capture = Capture(Twin())
    http = httpx2.AsyncClient(transport=TwinAsyncTransport(capture))
    if vendor == "anthropic":
        provider: Any = AnthropicProvider("claude-sonnet-4-6", client=capture.twin.anthropic_client(http_client=http))
    else:
        provider = OpenAIResponsesProvider("gpt-5.6-terra", client=capture.twin.openai_client(http_client=http))
    agent = Agent(
        provider,
        "You answer questions about the shop database.",
        [sample_db.list_tables, sample_db.describe_table, sample_db.run_query],
        store,
    )
    thread: list[str] = []
    for question in long_chat(6):
        result = await agent.run(question, runs=thread, replay_last="all")
        thread.append(result.run_id)
    warm = await agent.prewarm(runs=thread, replay_last="all")
    stored = [c.provider_request for rid in thread for c in store.get_run(rid).llm_interactions]  # type: ignore[union-attr]
    record = store.prewarms.get(warm.prewarm_id)
    assert record is not None
    stored.append(record.interaction.provider_request)
    assert len(stored) == len(capture.bodies) > 6
    # Re-encoded the way it was sent (the drivers post WireRequest.encoded's bytes): byte for byte.
    for i, (sent, body) in enumerate(zip(capture.bodies, stored, strict=True)):
        assert WireRequest(body=body).encoded() == sent, f"stored request {i} re-encodes to other bytes than were sent"
    # And through the official client's typed create() once more (the path of a client with its own spans):
    # the same JSON, in the SDK's key order.
    again = Capture(Twin())
    client = again.twin.anthropic_client if vendor == "anthropic" else again.twin.openai_client
    sdk = client(http_client=httpx2.AsyncClient(transport=TwinAsyncTransport(again)))
    create = sdk.messages.create if vendor == "anthropic" else sdk.responses.create
    typed = set(inspect.signature(create).parameters)
    for body in stored:
        extra = {k: v for k, v in body.items() if k not in typed}
        await create(**{k: v for k, v in body.items() if k in typed}, extra_body=extra or None)
    for i, (sent, resent) in enumerate(zip(capture.bodies, again.bodies, strict=True)):
        assert json.loads(resent) == json.loads(sent), f"stored request {i} differs from what the vendor received"
    # Stored once: the bodies hold far more bytes than the store keeps for them.
    assert body_bytes(store) < sum(map(len, capture.bodies)) / 3


async def test_stored_bytes_per_turn_stay_flat_as_the_chat_grows() -> None:
    """Issue 27's acceptance: per turn, at turn 60 at most 1.5x what turn 10 stored (on main: 6x)."""
    store = RunStore("sqlite:///:memory:")
    totals: list[int] = []
    await run_chat("all", store=store, questions=long_chat(60), on_turn=lambda r: totals.append(body_bytes(store)))
    per_turn = [b - a for a, b in zip([0, *totals], totals, strict=False)]
    assert per_turn[59] <= 1.5 * per_turn[9], per_turn
    store.close()


def test_a_list_that_loses_its_first_items_shares_the_rest() -> None:
    """The list tree's nodes end where the content says, not at fixed positions: dropping the oldest messages
    (a context fit) or changing one in the middle (a window that moved) stores a few nodes, not the list again."""
    messages = [{"role": "user", "content": f"message {i} " * 20} for i in range(400)]
    splitter = Splitter()
    _, first = splitter.split({"model": "m", "messages": messages})
    splitter.written(first)
    for changed in (messages[6:], [*messages[:200], {"role": "user", "content": "x"}, *messages[201:]]):
        _, new = splitter.split({"model": "m", "messages": changed})
        assert 1 <= len(new) <= 12, len(new)
        splitter.written(new)


def test_split_and_join_keep_every_value_in_order() -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "system": [{"type": "text", "text": "s" * 300, "cache_control": {"type": "ephemeral"}}],
        "instructions": "i" * 400,
        "empty": [],
        "nested": {"a": 1},
        "messages": [{"role": "user", "content": "\ud800 lone surrogate \x00 nul"}, 1.5, None, [1, [2]]],
    }
    parts: dict[str, str] = {}
    splitter = Splitter()
    skeleton, new = splitter.split(body)
    parts.update(new)
    (back,) = join_all([(skeleton, "here")], lambda keys: {k: parts[k] for k in keys})
    assert json.dumps(back) == json.dumps(body)


async def test_migration_6_turns_stored_bodies_into_skeletons(store: RunStore) -> None:
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()),
        "You answer questions about the shop database.",
        [sample_db.list_tables, sample_db.describe_table, sample_db.run_query],
        store,
    )
    first = await agent.run(long_chat(1)[0])
    second = await agent.run(long_chat(2)[1], runs=[first.run_id], replay_last="all")
    before = [c.provider_request for r in (first, second) for c in store.get_run(r.run_id).llm_interactions]  # type: ignore[union-attr]
    # Make it a version-5 store: whole bodies in provider_request, each run's meta whole (no references into
    # request_parts: segue.store.repeats), no request_parts table.
    rows = store.models.LlmInteractionRow
    for (row_id,), body in zip(rows.select(rows.id).order_by(rows.id).tuples(), before, strict=True):
        rows.update(provider_request=json.dumps(body, ensure_ascii=False)).where(rows.id == row_id).execute()
    for run in (first, second):
        whole = canonical_json(get_converter().unstructure(store.get_run(run.run_id).meta, RunMeta))  # type: ignore[union-attr]
        store.models.AgentRun.update(meta=whole).where(store.models.AgentRun.id == run.run_id).execute()
    store.db.drop_tables([store.models.RequestPart])
    store.db.execute_sql("DELETE FROM segue_schema_version WHERE version > 5")
    url = store.url
    store.close()
    reopened = RunStore(url)
    assert reopened.migrated_from == 5 and migrations.current_version(reopened.db, reopened.models) == migrations.LATEST
    after = [c.provider_request for r in (first, second) for c in reopened.get_run(r.run_id).llm_interactions]  # type: ignore[union-attr]
    assert after == before and [json.dumps(b) for b in after] == [json.dumps(b) for b in before]
    rows = reopened.models.LlmInteractionRow
    skeleton = rows.select(rows.provider_request).order_by(rows.id.desc()).scalar()
    assert json.loads(skeleton)["segue.body"] == 1
    reopened.close()


async def test_rows_an_older_writer_adds_after_the_migration_are_read(store: RunStore) -> None:
    """Issue 35 R6, a rolling upgrade: a process of store schema 4 or 5 kept writing after this segue migrated the
    store to 6. Its provider calls hold the whole body in `provider_request` (interaction_columns before migration
    6: `json.dumps(call.provider_request, ensure_ascii=False)`), no `served_by`, no request_parts. On main
    get_run, `runs show` and `runs explain` failed on them ("not a segue.body v1 skeleton; the row was modified
    outside segue") while replaying them worked."""
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()),
        "You answer questions about the shop database.",
        [sample_db.list_tables, sample_db.describe_table, sample_db.run_query],
        store,
    )
    first = await agent.run(long_chat(2)[0])
    second = await agent.run(long_chat(2)[1], runs=[first.run_id], replay_last="all")
    sent = store.get_run(second.run_id)
    assert sent is not None and len(sent.llm_interactions) >= 2
    # The older writer's rows for the second run: the columns its code wrote, and only those.
    rows = store.models.LlmInteractionRow
    rows.delete().where(rows.run_id == second.run_id).execute()
    for call in sent.llm_interactions:
        rows.insert(
            run_id=second.run_id,
            iteration=call.iteration,
            error=call.error,
            vendor=call.vendor,
            model=call.model,
            provider_request=json.dumps(call.provider_request, ensure_ascii=False),
            request_headers=json.dumps(call.request_headers) if call.request_headers else None,
            provider_response=json.dumps(call.provider_response, ensure_ascii=False),
            usage=json.dumps(get_converter().unstructure(call.usage, Usage)),
            latency_ms=call.latency_ms,
        ).execute()
    read = store.get_run(second.run_id)
    assert read is not None
    assert [c.provider_request for c in read.llm_interactions] == [c.provider_request for c in sent.llm_interactions]
    assert [c.served_by for c in read.llm_interactions] == [None] * len(sent.llm_interactions)  # not recorded then
    # The next turn replays both runs and is recorded the current way; both read back.
    third = await agent.run(long_chat(3)[2], runs=[first.run_id, second.run_id], replay_last="all")
    assert third.status == "success" and store.get_run(third.run_id) is not None
    if store.url.startswith("sqlite:"):
        for command in ("show", "explain"):
            done = warm_cli.run(
                [sys.executable, "-m", "segue", "runs", command, second.run_id, "--db", store.url, "--admin"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode in (0, 1) and done.stderr == "", (command, done.stderr)
            assert second.run_id in done.stdout
