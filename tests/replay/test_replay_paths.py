"""Replay paths that production apps use: mixed layouts, thinking off, idempotent repeats, streams, history,
runtime vendor overrides, and the small input rules (lowercase ULIDs, a float replay_last)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from segue import Agent, IdempotencyConflictError, InputError, ReplayRunError, RunStore
from segue._core.contracts import ProviderRequest
from segue.cache.layout import RuntimeState, is_fragment
from segue.generated import Message, ReasoningBlock, TextBlock
from segue.providers import AnthropicProvider, Failover
from segue.testing import ScriptedProvider, canonical_messages, text
from tests._support.anthropic_bodies import response as anthropic_body
from tests._support.helpers import LookupPolicy, converse, lookup, policy_provider, stored_meta
from tests._support.protocol_harness import stdio_server, twin_agent, write_config
from tests._support.vendor_http import Recorder, anthropic_client, json_response

MINI = "gpt-4.1-mini"  # catalog: prefix_prompt_cache=true on openai, so `auto` is appendOnly


def causes(result: Any) -> list[tuple[str, str]]:
    return [(w.run_id, w.cause) for w in result.replay.warnings]


def wire_hash(messages: list[dict[str, Any]]) -> str:
    """docs/replay.md's canonical hash, computed here independently of segue._core.hashing."""
    encoded = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return "sha256:" + hashlib.sha256(encoded.encode("utf-8")).hexdigest()


def state_text(state: RuntimeState) -> str:
    return f"iteration {state.iteration} of {state.max_iterations}"


# -- mixed layouts --------------------------------------------------------------------------------------------


class PastTheFragment(LookupPolicy):
    """LookupPolicy that reads past the trailing runtime-state fragment to the turn it answers."""

    def __call__(self, request: ProviderRequest) -> Message:
        return super().__call__(attrs.evolve(request, messages=[m for m in request.messages if not is_fragment(m)]))


async def test_a_replace_run_after_append_only_runs_records_the_prefix_it_really_sent(store: RunStore) -> None:
    provider = policy_provider(PastTheFragment(vendor="openai"), vendor="openai", model=MINI)
    appending = Agent(provider, "p", [lookup], store, trailing_state=state_text)
    replacing = Agent(provider, "p", [lookup], store, trailing_state=state_text, trailing_state_layout="replace")
    earlier = [r.run_id for r in await converse(appending, ["a", "b"], replay_last="all")]

    mixed = await replacing.run("c", runs=earlier, replay_last="all")
    first_request = next(r for r in provider.requests if r.messages and r.messages[-2].content == [TextBlock(text="c")])
    sent = canonical_messages(first_request)
    assert not any(is_fragment(m) for m in first_request.messages[:-1]), "replace leaves the earlier fragments out"
    # The earlier runs' own fragments preceded their reasoning: leaving them out changes that reasoning's prefix.
    assert causes(mixed) == [(earlier[0], "layout"), (earlier[1], "follows")]
    detail = store.get_run(mixed.run_id)
    assert detail is not None and detail.prefix is not None
    assert detail.prefix.seed == wire_hash(sent[:-2]), "the seed hashes exactly what preceded its user message"

    later = await appending.run("d", runs=[*earlier, mixed.run_id], replay_last="all")
    assert later.replay is not None and later.replay.reasoning_kept == earlier
    assert causes(later) == [(mixed.run_id, "seed")], "the mixed run's reasoning was produced without fragments"


# -- thinking off ---------------------------------------------------------------------------------------------


async def test_replaying_thinking_to_anthropic_with_thinking_off_drops_it_and_the_summary_says_so(
    sqlite_store: RunStore,
) -> None:
    thinking = {"type": "thinking", "thinking": "Count them.", "signature": "sig-1"}
    rec = Recorder(
        json_response(anthropic_body([thinking, {"type": "text", "text": "42."}])),
        json_response(anthropic_body([{"type": "text", "text": "Still 42."}])),
    )
    on = AnthropicProvider("claude-sonnet-4-6", thinking={"type": "adaptive"}, client=anthropic_client(rec))
    off = AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(rec))
    first = await Agent(on, "p", [], sqlite_store).run("How many?")
    second = await Agent(off, "p", [], sqlite_store).run("Sure?", runs=[first.run_id], replay_last="all")

    assert second.replay is not None and second.replay.reasoning_dropped == [first.run_id]
    assert causes(second) == [(first.run_id, "reasoning-off")]
    body = rec.body
    assert "thinking" not in body and all(b["type"] != "thinking" for m in body["messages"] for b in m["content"])
    assert second.notes is None, "the planner left it off; the wire had nothing more to leave off"


# -- idempotency before planning --------------------------------------------------------------------------------


async def test_a_repeated_keyed_request_returns_the_stored_result_without_planning(
    sqlite_store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = Agent(policy_provider(), "p", [lookup], sqlite_store)
    (one,) = await converse(agent, ["a"])
    first = await agent.run("b", runs=[one.run_id], replay_last="all", idempotency_key="k")
    sqlite_store.db.execute_sql("DELETE FROM react_traces WHERE run_id = ?", (one.run_id,))
    sqlite_store.db.execute_sql("DELETE FROM agent_runs WHERE id = ?", (one.run_id,))
    loads: list[Any] = []
    original = sqlite_store.load_runs
    monkeypatch.setattr(sqlite_store, "load_runs", lambda ids: loads.append(ids) or original(ids))

    again = await agent.run("b", runs=[one.run_id], replay_last="all", idempotency_key="k")
    assert again == first and loads == [], "the stored result, with no replay plan (its run is gone since)"


async def test_the_fingerprint_covers_which_runs_are_replayed(store: RunStore) -> None:
    agent = Agent(policy_provider(), "p", [lookup], store)
    one, two = await converse(agent, ["a", "b"])
    await agent.run("c", runs=[one.run_id], idempotency_key="k")
    with pytest.raises(IdempotencyConflictError):
        await agent.run("c", runs=[two.run_id], idempotency_key="k")
    with pytest.raises(IdempotencyConflictError):
        await agent.run("c", runs=[one.run_id, two.run_id], idempotency_key="k")


# -- streams, history, running runs ---------------------------------------------------------------------------


async def test_a_streamed_replay_succeeds_with_the_same_summary_as_a_run(store: RunStore) -> None:
    provider = policy_provider()
    agent = Agent(provider, "p", [lookup], store)
    (one,) = await converse(agent, ["a"])
    events = [e async for e in agent.stream("b", runs=[one.run_id], replay_last="all")]
    started, done = events[0], events[-1]
    assert started.type == "RUN_STARTED" and started.meta["replay"]["reasoning_kept"] == [one.run_id]
    assert done.type == "RUN_COMPLETED" and done.result is not None and done.result.status == "success"
    assert done.result.replay is not None and done.result.replay.reasoning_kept == [one.run_id]
    assert "".join(e.text or "" for e in events if e.type == "TEXT_DELTA") == done.result.answer
    replayed = provider.requests[-1].messages[: (provider.requests[-1].replay_end or 0) + 1]
    assert [b.text for m in replayed for b in m.content if isinstance(b, ReasoningBlock)] == ["think 1"]
    detail = store.get_run(done.result.run_id)
    assert detail is not None and detail.replay == done.result.replay and detail.continued_from == one.run_id


async def test_history_goes_between_the_replayed_runs_and_the_input(sqlite_store: RunStore) -> None:
    provider = policy_provider()
    agent = Agent(provider, "p", [lookup], sqlite_store)
    (one,) = await converse(agent, ["a"])
    history = [
        Message(role="user", content=[TextBlock(text="from the app")]),
        Message(role="assistant", content=[TextBlock(text="noted")]),
    ]
    result = await agent.run("b", runs=[one.run_id], replay_last="all", history=history)
    first = next(r for r in provider.requests if r.messages[-1].content == [TextBlock(text="b")])
    texts = [b.text for m in first.messages for b in m.content if isinstance(b, TextBlock)]
    assert texts[-3:] == ["from the app", "noted", "b"]
    assert first.replay_end == len(first.messages) - 4, "the last replayed message comes right before history"
    assert result.replay is not None and result.replay.reasoning_kept == [one.run_id]
    retried = await agent.retry(result.run_id)
    again = next(r for r in provider.requests[len(provider.requests) - 2 :] if r.messages[-1].role == "user")
    assert canonical_messages(again) == canonical_messages(first) and retried.replay == result.replay


async def test_a_run_still_running_is_not_replayed(sqlite_store: RunStore) -> None:
    agent = Agent(policy_provider(), "p", [lookup], sqlite_store)
    (one,) = await converse(agent, ["a"])
    sqlite_store.db.execute_sql("UPDATE agent_runs SET status = 'running' WHERE id = ?", (one.run_id,))
    before = sqlite_store.counts()
    with pytest.raises(ReplayRunError, match="still running") as refused:
        await agent.run("b", runs=[one.run_id])
    assert (refused.value.reason, refused.value.run_id) == ("not_terminal", one.run_id)
    assert sqlite_store.counts() == before


# -- input rules ----------------------------------------------------------------------------------------------


async def test_lowercase_run_ids_name_the_same_runs(sqlite_store: RunStore) -> None:
    agent = Agent(policy_provider(), "p", [lookup], sqlite_store)
    (one,) = await converse(agent, ["a"])
    result = await agent.run("b", runs=[one.run_id.lower()], replay_last="all")
    assert result.replay is not None and result.replay.knobs is not None
    assert result.replay.knobs.runs == [one.run_id] and result.replay.reasoning_kept == [one.run_id]
    with pytest.raises(ReplayRunError, match="appears twice"):
        await agent.run("c", runs=[one.run_id, one.run_id.lower()])
    retried = await agent.retry(result.run_id.lower())
    assert retried.status == "success"


async def test_a_float_replay_last_says_what_is_expected(sqlite_store: RunStore) -> None:
    agent = Agent(policy_provider(), "p", [lookup], sqlite_store)
    (one,) = await converse(agent, ["a"])
    with pytest.raises(ReplayRunError, match=r"whole number >= 0 or 'all' \(.*\), got 1.0 \(float\); pass 1"):
        await agent.run("b", runs=[one.run_id], replay_last=1.0)  # type: ignore[arg-type]
    with pytest.raises(ReplayRunError, match=r"got 1.5 \(float\)$"):
        await agent.run("b", runs=[one.run_id], replay_last=1.5)  # type: ignore[arg-type]


def test_a_json_number_with_no_fraction_is_an_integer_over_json_rpc(tmp_path: Path) -> None:
    """JSON Schema: `integer` accepts 1.0, so the protocol's classes do too, and 1.5 fails the schema clearly."""
    config = write_config(tmp_path / "agents.json", [twin_agent([])])
    with stdio_server(config) as client:
        first = client.call("run", {"agent": "analyst", "input": "Hello?"})["result"]["result"]
        params = {"agent": "analyst", "input": "Again?", "runs": [first["run_id"]], "replay_last": 1.0}
        again = client.call("run", params)
        assert again["result"]["result"]["replay"]["knobs"]["replay_last"] == 1, again
        bad = client.call("run", {**params, "replay_last": 1.5})
        assert bad["error"]["code"] == -32602 and bad["error"]["data"]["errors"][0]["pointer"] == "/replay_last"
        assert client.close() == 0


# -- a runtime vendor ----------------------------------------------------------------------------------------


async def test_an_override_naming_its_vendor_decides_the_layout_before_the_first_call(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(text("ok"), text("ok"), vendor="openai", model="gpt-5")
    agent = Agent(provider, "p", [], sqlite_store, trailing_state=state_text)
    named = await agent.run("go", model=MINI, vendor="openai")
    layout = stored_meta(sqlite_store.get_run(named.run_id))["segue.layout"]
    assert (layout["basis"], layout["iteration"], layout["mode"]) == ("override", 0, "appendOnly")
    assert f"{MINI}@openai" in layout["reason"]
    assert provider.requests[0].vendor == "openai" and provider.requests[0].model == MINI
    with pytest.raises(InputError, match=r"vendor must name one of this agent's provider vendors \(openai\)"):
        await agent.run("go", model=MINI, vendor="anthropic")
    await agent.run("go", model=MINI, vendor="openai", idempotency_key="v")
    with pytest.raises(IdempotencyConflictError):
        await agent.run("go", model=MINI, idempotency_key="v")  # the vendor is part of the request


async def test_a_runtime_vendor_sends_the_override_to_that_failover_member_first(sqlite_store: RunStore) -> None:
    anthropic = ScriptedProvider.of(text("from anthropic"), vendor="anthropic", model="claude-sonnet-4-6")
    openai = ScriptedProvider(replies=[LookupPolicy(vendor="openai")] * 4, vendor="openai", model="gpt-5")
    agent = Agent(Failover([anthropic, openai]), "p", [lookup], sqlite_store)
    first = await agent.run("a", vendor="openai", model="gpt-5.6-terra")
    assert anthropic.requests == [] and {r.model for r in openai.requests} == {"gpt-5.6-terra"}
    detail = sqlite_store.get_run(first.run_id)
    assert detail is not None and detail.prefix is not None
    assert (detail.prefix.vendor, detail.prefix.model) == ("openai", "gpt-5.6-terra")
    # The next turn, aimed at openai with the same model, keeps that reasoning.
    second = await agent.run("b", runs=[first.run_id], replay_last="all", vendor="openai", model="gpt-5.6-terra")
    assert second.replay is not None and second.replay.reasoning_kept == [first.run_id]
