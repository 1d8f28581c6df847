"""Replay through Failover, in both directions, on the twin: everything that describes a run names the member that
really served it, and every replayed run's reasoning is kept exactly where the serving path can take it back.

The twin signs Anthropic thinking against the prefix and model it was produced under and verifies OpenAI's
encrypted reasoning, so a replay that kept reasoning under the wrong prefix would be rejected or reported by the
vendor emulation itself (`input_transformations`), independently of segue's own bookkeeping.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2

from segue import Agent, RunResult, RunStore
from segue._core.contracts import Provider
from segue.cache.layout import RuntimeState
from segue.demo.chat import PROMPT, QUESTIONS, demo_tools
from segue.generated import RunDetail
from segue.providers import AnthropicProvider, Failover, OpenAIResponsesProvider
from segue_twin import Twin
from tests._support.helpers import stored_meta

SONNET, HAIKU, TERRA = "claude-sonnet-4-6", "claude-haiku-4-5", "gpt-5.6-terra"
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


class Switch(httpx2.AsyncBaseTransport):
    """The twin's transport, or Anthropic's 529 overloaded while `down` (or after `up_for` more requests)."""

    def __init__(self, twin: Twin) -> None:
        self.inner = twin.transport()
        self.down = False
        self.up_for: int | None = None
        self.refused = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.up_for is not None:
            self.down, self.up_for = self.up_for <= 0, self.up_for - 1
        if self.down:
            await request.aread()
            self.refused += 1
            return httpx2.Response(529, json=OVERLOADED, request=request)
        return await self.inner.handle_async_request(request)


def anthropic(twin: Twin, switch: Switch | None = None, model: str = SONNET) -> AnthropicProvider:
    transport = switch if switch is not None else twin.transport()
    client = twin.anthropic_client(http_client=httpx2.AsyncClient(transport=transport))
    return AnthropicProvider(model, thinking={"type": "enabled", "budget_tokens": 1024}, client=client)


def openai(twin: Twin) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(TERRA, reasoning={"effort": "low"}, client=twin.openai_client())


def agent(store: RunStore, provider: Provider, **kwargs: Any) -> Agent:
    return Agent(provider, PROMPT, demo_tools(), store, **kwargs)


def pair(store: RunStore, **kwargs: Any) -> tuple[Agent, Switch]:
    twin = Twin()
    switch = Switch(twin)
    return agent(store, Failover([anthropic(twin, switch), openai(twin)]), **kwargs), switch


def detail(store: RunStore, result: RunResult) -> RunDetail:
    assert result.status == "success", result
    found = store.get_run(result.run_id)
    assert found is not None
    return found


def causes(result: RunResult) -> list[tuple[str, str]]:
    assert result.replay is not None
    return [(w.run_id, w.cause) for w in result.replay.warnings]


def sent_reasoning(run: RunDetail) -> list[str]:
    """The reasoning each request of the run put on its vendor's wire: thinking signatures, reasoning item ids."""
    found = []
    for i in run.llm_interactions:
        body = i.provider_request
        for m in body.get("messages", []):
            found += [b["signature"] for b in m["content"] if isinstance(b, dict) and b.get("type") == "thinking"]
        found += [item["id"] for item in body.get("input", []) if item.get("type") == "reasoning"]
    return found


def vendor_drops(run: RunDetail) -> list[Any]:
    return [t for i in run.llm_interactions for t in (i.provider_response or {}).get("input_transformations", [])]


def state_line(state: RuntimeState) -> str:
    return f"iteration {state.iteration} of {state.max_iterations}"


async def test_the_backup_that_served_is_named_by_the_descriptor_row_interactions_layout_and_notes(
    sqlite_store: RunStore,
) -> None:
    chain, switch = pair(sqlite_store, trailing_state=state_line)
    switch.down = True
    result = await chain.run(QUESTIONS[0])
    run = detail(sqlite_store, result)

    assert run.prefix is not None and (run.prefix.vendor, run.prefix.model) == ("openai", TERRA)
    assert "also_served" not in stored_meta(run)["segue.prefix"]
    assert (run.vendor, run.model) == ("openai", TERRA)
    assert {(i.vendor, i.model) for i in run.llm_interactions} == {("openai", TERRA)}
    layout = stored_meta(run)["segue.layout"]
    assert layout["basis"] == "served" and f"{TERRA}@openai" in layout["reason"], layout
    # One failover note for the whole run, however many requests failed over; nothing is a replay warning. (The
    # test's prompt is short, so the run also says why nothing was cached, once.)
    assert result.notes is not None
    assert [(n.kind, n.count) for n in result.notes] == [
        ("failover", switch.refused),
        ("cache-below-minimum", result.iterations),
    ]
    assert "anthropic/claude-sonnet-4-6 failed (server: Overloaded)" in result.notes[0].message
    assert stored_meta(run)["segue.notes"][0]["count"] == switch.refused == result.iterations


async def test_a_run_the_backup_served_replays_to_the_primary_without_its_reasoning(sqlite_store: RunStore) -> None:
    chain, switch = pair(sqlite_store)
    switch.down = True
    first = await chain.run(QUESTIONS[0])
    switch.down = False
    second = await chain.run(QUESTIONS[1], runs=[first.run_id], replay_last="all")

    run = detail(sqlite_store, second)
    assert {i.vendor for i in run.llm_interactions} == {"anthropic"}
    assert second.replay is not None and second.replay.reasoning_kept == []
    assert second.replay.reasoning_dropped == [first.run_id]
    assert causes(second) == [(first.run_id, "cross-vendor")]
    assert "it came from openai" in second.replay.warnings[0].message
    first_request = run.llm_interactions[0].provider_request
    assert not any(b.get("type") == "thinking" for m in first_request["messages"] for b in m["content"])


async def test_the_primary_serving_replays_its_thinking_and_the_vendor_accepts_it(sqlite_store: RunStore) -> None:
    chain, _ = pair(sqlite_store)
    first = await chain.run(QUESTIONS[0])
    second = await chain.run(QUESTIONS[1], runs=[first.run_id], replay_last="all")

    run = detail(sqlite_store, second)
    assert second.replay is not None and second.replay.reasoning_kept == [first.run_id]
    assert second.replay.warnings == [] and second.notes is None
    replayed = [b for m in run.llm_interactions[0].provider_request["messages"] for b in m["content"]]
    assert any(b["type"] == "thinking" for b in replayed)
    assert run.llm_interactions[0].request_headers == {
        "anthropic-beta": "thinking-binding-controls-2026-08-01,cache-diagnosis-2026-04-07"
    }
    assert vendor_drops(run) == [], "the twin verified every replayed signature against its prefix"


async def test_a_vendor_change_mid_conversation_keeps_each_vendors_reasoning_where_it_belongs(
    sqlite_store: RunStore,
) -> None:
    chain, switch = pair(sqlite_store)
    ids: list[str] = []

    async def turn(i: int, down: bool) -> tuple[RunResult, RunDetail]:
        switch.down = down
        result = await chain.run(QUESTIONS[i], runs=ids or None, replay_last="all")
        ids.append(result.run_id)
        return result, detail(sqlite_store, result)

    await turn(0, down=False)
    second, run2 = await turn(1, down=True)  # Anthropic overloaded: OpenAI serves turn 2
    assert (run2.vendor, run2.prefix and run2.prefix.vendor) == ("openai", "openai")
    assert causes(second) == [(ids[0], "cross-vendor")]
    assert "this request goes to openai" in second.replay.warnings[0].message  # type: ignore[union-attr]

    third, run3 = await turn(2, down=False)  # back on Anthropic: turn 1's thinking fits again, turn 2's never did
    assert third.replay is not None and third.replay.reasoning_kept == [ids[0]]
    assert causes(third) == [(ids[1], "cross-vendor")]
    assert vendor_drops(run3) == [], "turn 1's thinking was signed under exactly this prefix"

    fourth, run4 = await turn(3, down=True)  # OpenAI again: turn 2's reasoning fits, the Anthropic turns do not
    assert fourth.replay is not None and fourth.replay.reasoning_kept == [ids[1]]
    assert causes(fourth) == [(ids[0], "cross-vendor"), (ids[2], "cross-vendor")]
    stored2 = [b.id for t in run2.traces for b in t.message.content if getattr(b, "vendor", None) == "openai"]
    assert stored2 and set(stored2) <= set(sent_reasoning(run4)), "turn 2's reasoning items went back to OpenAI"


async def test_a_failover_in_the_middle_of_a_run_binds_its_reasoning_to_both_paths(sqlite_store: RunStore) -> None:
    chain, switch = pair(sqlite_store)
    switch.up_for = 1  # Anthropic answers iteration 1, then is overloaded
    first = await chain.run(QUESTIONS[0])
    run = detail(sqlite_store, first)
    assert [i.vendor for i in run.llm_interactions][:2] == ["anthropic", "openai"]
    assert run.prefix is not None and (run.prefix.vendor, run.prefix.model) == ("anthropic", SONNET)
    assert stored_meta(run)["segue.prefix"]["also_served"] == [{"vendor": "openai", "model": TERRA}]
    assert (run.vendor, run.model) == ("openai", TERRA), "the run row names the member that finished it"

    switch.up_for, switch.down = None, False
    second = await chain.run(QUESTIONS[1], runs=[first.run_id], replay_last="all")
    assert causes(second) == [(first.run_id, "cross-vendor")]
    assert "openai/gpt-5.6-terra serve part of it" in second.replay.warnings[0].message  # type: ignore[union-attr]
    assert vendor_drops(detail(sqlite_store, second)) == []


async def test_a_same_vendor_backup_on_another_model_gets_no_thinking_and_the_summary_says_model(
    sqlite_store: RunStore,
) -> None:
    twin = Twin()
    switch = Switch(twin)
    chain = agent(sqlite_store, Failover([anthropic(twin, switch), anthropic(twin, model=HAIKU)]))
    first = await chain.run(QUESTIONS[0])
    switch.down = True
    second = await chain.run(QUESTIONS[1], runs=[first.run_id], replay_last="all")

    run = detail(sqlite_store, second)
    assert {(i.vendor, i.model) for i in run.llm_interactions} == {("anthropic", HAIKU)}
    assert run.prefix is not None and run.prefix.model == HAIKU
    assert causes(second) == [(first.run_id, "model")]
    first_request = run.llm_interactions[0].provider_request
    assert not any(b.get("type") == "thinking" for m in first_request["messages"] for b in m["content"])
    assert vendor_drops(run) == [], "segue left sonnet's thinking off instead of letting the vendor drop it"


async def test_notes_repeated_on_every_request_are_one_note_and_never_a_replay_warning(sqlite_store: RunStore) -> None:
    """Anthropic answering without `input_transformations` although binding was asked: one `unconfirmed` note with
    a count, no `vendor-dropped` warning (the vendor reported no drop)."""
    from tests._support.anthropic_bodies import response as anthropic_body
    from tests._support.vendor_http import Recorder, anthropic_client, json_response

    thinking = {"type": "thinking", "thinking": "Count them.", "signature": "sig-1"}

    def call(n: int) -> Any:
        block = {"type": "tool_use", "id": f"toolu_{n}", "name": "list_tables", "input": {}}
        return json_response(anthropic_body([thinking, block], stop="tool_use"))

    answer = json_response(anthropic_body([{"type": "text", "text": "Done."}]))
    rec = Recorder(call(0), answer, *(call(n) for n in range(1, 9)), answer)
    provider = AnthropicProvider(SONNET, thinking={"type": "adaptive"}, client=anthropic_client(rec))
    chain = agent(sqlite_store, provider, max_iterations=12)
    first = await chain.run("one")
    second = await chain.run("two", runs=[first.run_id], replay_last="all")

    assert second.iterations == 9
    assert all(json.loads(r.content)["thinking"].get("block_binding") for r in rec.requests[2:])
    assert second.replay is not None and second.replay.warnings == []
    assert second.replay.reasoning_kept == [first.run_id]
    assert second.notes is not None and [(n.kind, n.count, n.iteration) for n in second.notes] == [
        ("unconfirmed", 9, 1)
    ]
