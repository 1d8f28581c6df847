"""Run replay: knobs, validation, windows, budgets and the prefix rule for reasoning."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from segue import Agent, ContextBlock, IdempotencyConflictError, PIIGuardrail, ReplayRunError, RunStore, SingleCall
from segue.generated import Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from segue.testing import ScriptedProvider, canonical_messages, text
from tests._support.helpers import LookupPolicy, converse, lookup, policy_provider, stored_meta


def reasoning_in(messages: list[Message]) -> list[str]:
    return [b.text or "" for m in messages for b in m.content if isinstance(b, ReasoningBlock)]


def replayed(request: Any) -> list[Message]:
    return list(request.messages[: request.replay_end + 1]) if request.replay_end is not None else []


def causes(result: Any) -> list[tuple[str, str]]:
    return [(w.run_id, w.cause) for w in result.replay.warnings]


async def test_all_full_replay_is_byte_identical_run_by_run(store: RunStore) -> None:
    provider = policy_provider()
    agent = Agent(provider, "You answer from lookups.", [lookup], store)
    results = await converse(agent, [f"question {i}" for i in range(5)], replay_last="all")
    final = await agent.run("last one", runs=[r.run_id for r in results], replay_last="all")

    sent = canonical_messages(provider.requests[-1])
    # Each run's own messages: its first request's last message (the user message as sent) plus its replies.
    offset = 0
    for r in results:
        detail = store.get_run(r.run_id)
        assert detail is not None
        own = [{"role": t.message.role, "content": canonical_messages_of(t.message)} for t in detail.traces]
        assert sent[offset : offset + len(own)] == own
        offset += len(own)
    assert sent[offset]["content"][0]["text"] == "last one"
    assert final.replay is not None and final.replay.reasoning_kept == [r.run_id for r in results]
    assert final.replay.warnings == []
    # Reasoning kept means every run's descriptor matched: each request extended the previous one.
    for earlier, later in zip(provider.requests, provider.requests[1:], strict=False):
        assert canonical_messages(later)[: len(earlier.messages)] == canonical_messages(earlier)


def canonical_messages_of(m: Message) -> list[Any]:
    from segue.generated import get_converter

    return get_converter().unstructure(m.content, list[Any])  # type: ignore[no-any-return]


async def test_moved_window_drops_reasoning_from_the_first_full_run(store: RunStore) -> None:
    provider = policy_provider()
    agent = Agent(provider, "p", [lookup], store)
    results = await converse(agent, [f"q{i}" for i in range(6)], replay_last=3)
    ids = [r.run_id for r in results]
    final = await agent.run("q6", runs=ids, replay_last=3)
    summary = final.replay
    assert summary is not None
    assert summary.runs_text == ids[:3] and summary.runs_full == ids[3:]
    assert summary.reasoning_dropped == ids[3:]
    assert causes(final) == [(ids[3], "seed"), (ids[4], "follows"), (ids[5], "follows")]
    assert reasoning_in(replayed(provider.requests[-1])) == []


async def test_system_prompt_edit_drops_reasoning_from_then_on(store: RunStore, caplog: Any) -> None:
    provider = policy_provider()
    first = await converse(Agent(provider, "Prompt v1", [lookup], store), ["a", "b"], replay_last="all")
    edited = Agent(provider, "Prompt v2", [lookup], store)
    ids = [r.run_id for r in first]
    with caplog.at_level(logging.WARNING, logger="segue.replay"):
        result = await edited.run("c", runs=ids, replay_last="all")
    # Each run names its own cause: the prompt both ran under changed.
    assert causes(result) == [(ids[0], "system"), (ids[1], "system")]
    assert f"run {ids[0]}" in caplog.text and "system prompt" in caplog.text
    assert result.replay is not None and result.replay.reasoning_dropped == ids


async def test_tool_added_on_turn_three(store: RunStore) -> None:
    provider = policy_provider()
    two = await converse(Agent(provider, "p", [lookup], store), ["a", "b"], replay_last="all")

    def extra(x: str) -> str:
        return x

    wider = Agent(provider, "p", [lookup, extra], store)
    result = await wider.run("c", runs=[r.run_id for r in two], replay_last="all")
    assert causes(result)[0] == (two[0].run_id, "tools")


async def test_model_switch_drops_reasoning(store: RunStore) -> None:
    provider = policy_provider()
    agent = Agent(provider, "p", [lookup], store)
    (one,) = await converse(agent, ["a"], replay_last="all")
    result = await agent.run("b", runs=[one.run_id], replay_last="all", model="scripted-2")
    assert causes(result) == [(one.run_id, "model")]
    assert provider.requests[-1].model == "scripted-2"


async def test_cross_vendor_reasoning_is_never_sent(store: RunStore) -> None:
    first = await converse(Agent(policy_provider(), "p", [lookup], store), ["a"], replay_last="all")
    other = policy_provider(vendor="other-vendor")
    result = await Agent(other, "p", [lookup], store).run("b", runs=[first[0].run_id], replay_last="all")
    assert causes(result) == [(first[0].run_id, "cross-vendor")]
    assert reasoning_in(replayed(other.requests[0])) == []


async def test_run_without_descriptor_predates_metadata(sqlite_store: RunStore) -> None:
    agent = Agent(policy_provider(), "p", [lookup], sqlite_store)
    (old,) = await converse(agent, ["a"])
    sqlite_store.db.execute_sql("UPDATE agent_runs SET meta = '{}' WHERE id = ?", (old.run_id,))
    result = await agent.run("b", runs=[old.run_id], replay_last="all")
    assert causes(result) == [(old.run_id, "predates-metadata")]


async def test_replay_reasoning_false_strips_quietly(store: RunStore) -> None:
    provider = policy_provider()
    agent = Agent(provider, "p", [lookup], store)
    (one,) = await converse(agent, ["a"])
    result = await agent.run("b", runs=[one.run_id], replay_last="all", replay_reasoning=False)
    assert result.replay is not None and result.replay.reasoning_dropped == [one.run_id]
    assert result.replay.warnings == [] and reasoning_in(replayed(provider.requests[-1])) == []


async def test_guardrails_turn_reasoning_off_and_say_so(store: RunStore) -> None:
    provider = policy_provider()
    agent = Agent(provider, "p", [lookup], store, guardrails=[PIIGuardrail()])
    (one,) = await converse(agent, ["a"])
    result = await agent.run("b", runs=[one.run_id], replay_last="all")
    assert causes(result) == [(one.run_id, "guardrails")]


async def test_text_mode_and_answerless_runs_keep_alternation(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(text("first answer"), ToolCallOnly(), text("third"))
    agent = Agent(provider, "p", [lookup], sqlite_store, max_iterations=1)
    a = await agent.run("one")
    b = await agent.run("two")
    assert b.status == "max_iterations"
    await agent.run("three", runs=[a.run_id, b.run_id], replay_last=0)
    roles = [m.role for m in provider.requests[-1].messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    note = provider.requests[-1].messages[3].content[0]
    assert isinstance(note, TextBlock) and "ended without an answer: max_iterations" in note.text


class ToolCallOnly:
    def __call__(self, request: Any) -> Message:
        return Message(role="assistant", content=[ToolCallBlock(id="dangling", name="lookup", arguments={"q": "z"})])


async def test_full_run_cut_at_last_complete_iteration(sqlite_store: RunStore) -> None:
    """A run that died after asking for a tool never sends the call without its result."""
    provider = ScriptedProvider.of(ToolCallOnly(), text("fine"))
    agent = Agent(provider, "p", [lookup], sqlite_store)
    sqlite_store_run = await agent.run("one")
    # Simulate a crash: drop the tool result trace so the call is left unanswered.
    sqlite_store.db.execute_sql(
        "DELETE FROM react_traces WHERE run_id = ? AND role = 'tool'", (sqlite_store_run.run_id,)
    )
    sqlite_store.db.execute_sql("DELETE FROM react_traces WHERE run_id = ? AND idx = 3", (sqlite_store_run.run_id,))
    provider.replies.append(text("next"))
    await agent.run("two", runs=[sqlite_store_run.run_id], replay_last="all")
    sent = provider.requests[-1].messages
    assert not any(isinstance(b, ToolCallBlock) for m in sent for b in m.content)
    assert [m.role for m in sent] == ["user", "assistant", "user"]


async def test_budget_collapses_oldest_runs_first(store: RunStore) -> None:
    provider = policy_provider()
    agent = Agent(provider, "p", [lookup], store)
    results = await converse(agent, [f"question number {i}" for i in range(4)])
    ids = [r.run_id for r in results]
    result = await agent.run("next", runs=ids, replay_last="all", replay_budget_tokens=300)
    summary = result.replay
    assert summary is not None and summary.runs_text[:1] == ids[:1]
    assert summary.runs_full == ids[len(summary.runs_text) :]
    assert any(w.cause == "budget" for w in summary.warnings)
    sent = provider.requests[-1].messages
    calls = {b.id for m in sent for b in m.content if isinstance(b, ToolCallBlock)}
    results_ = {b.tool_call_id for m in sent for b in m.content if isinstance(b, ToolResultBlock)}
    assert calls == results_, "a tool call is never separated from its result"


async def test_tool_no_longer_offered_is_sent_verbatim_with_warning(store: RunStore) -> None:
    provider = policy_provider()
    (one,) = await converse(Agent(provider, "p", [lookup], store), ["a"])
    result = await Agent(provider, "p", [], store).run("b", runs=[one.run_id], replay_last="all")
    assert "tool-missing" in {w.cause for w in result.replay.warnings}  # type: ignore[union-attr]
    assert any(isinstance(b, ToolCallBlock) for m in provider.requests[-1].messages for b in m.content)


@pytest.mark.parametrize(
    ("runs", "knobs", "reason"),
    [
        (["01J00000000000000000000000"], {}, "not_found"),
        ("dup", {}, "duplicate"),
        ("other", {}, "not_found"),  # another tenant's run is no run at all to the caller (issue 35 R2)
        ("paused", {}, "not_terminal"),
        ("ok", {"replay_last": -1}, "invalid"),
        ("ok", {"replay_last": True}, "invalid"),
        ("ok", {"replay_reasoning": "yes"}, "invalid"),
        ("ok", {"replay_budget_tokens": 0}, "invalid"),
        ("ok", {"context": [ContextBlock(text="policy", placement="stable")]}, "invalid"),
    ],
)
async def test_validation_before_any_row(store: RunStore, runs: Any, knobs: dict[str, Any], reason: str) -> None:
    from segue import tool

    @tool(requires_approval=True)
    def risky() -> str:
        return "x"

    provider = ScriptedProvider.of(text("a"), text("b"), ToolCall("risky"), text("never"))
    agent = Agent(provider, "p", [risky], store)
    ok = await agent.run("mine", tenant_id="t1")
    other = await agent.run("theirs", tenant_id="t2")
    paused = await agent.run("paused", tenant_id="t1")
    assert paused.status == "waiting_approval"
    named = {"ok": [ok.run_id], "dup": [ok.run_id, ok.run_id], "other": [other.run_id], "paused": [paused.run_id]}
    before = store.counts()
    with pytest.raises(ReplayRunError) as info:
        await agent.run("new", runs=named[runs] if isinstance(runs, str) else runs, tenant_id="t1", **knobs)
    assert info.value.reason == reason
    assert store.counts() == before and len(provider.requests) == 3


class ToolCall:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, request: Any) -> Message:
        return Message(role="assistant", content=[ToolCallBlock(id="x1", name=self.name, arguments={})])


async def test_stream_with_unknown_run_is_one_error_event(sqlite_store: RunStore) -> None:
    agent = Agent(policy_provider(), "p", [lookup], sqlite_store)
    events = [e async for e in agent.stream("hi", runs=["01J99999999999999999999999"])]
    assert len(events) == 1
    (event,) = events
    assert event.type == "RUN_ERROR" and event.meta["error_type"] == "ReplayRunError"
    assert event.meta["reason"] == "not_found" and event.run_id == ""
    assert sqlite_store.counts()["agent_runs"] == 0


async def test_single_call_accepts_only_question_and_answer(sqlite_store: RunStore) -> None:
    agent = SingleCall(ScriptedProvider.of(text("a"), text("b")), "p", sqlite_store)
    first = await agent.run("one")
    with pytest.raises(ReplayRunError, match="replay_last=0") as info:
        await agent.run("two", runs=[first.run_id], replay_last=1)
    assert info.value.reason == "unsupported"
    result = await agent.run("two", runs=[first.run_id])
    assert result.replay is not None and result.replay.runs_text == [first.run_id]


async def test_runs_without_a_store_is_rejected() -> None:
    with pytest.raises(ReplayRunError, match="needs a store"):
        await Agent(policy_provider(), "p", [lookup]).run("x", runs=["01J00000000000000000000000"])


async def test_nothing_replayed_is_persisted_again_and_summary_is_stored(store: RunStore) -> None:
    agent = Agent(policy_provider(), "p", [lookup], store)
    results = await converse(agent, ["a", "b", "c"], replay_last="all")
    detail = store.get_run(results[-1].run_id)
    assert detail is not None
    assert len(detail.traces) == 4 and detail.traces[0].message.content[0] == TextBlock(text="c")
    assert detail.continued_from == results[1].run_id
    assert detail.replay == results[-1].replay
    assert stored_meta(detail)["segue.replay"]["knobs"]["replay_last"] == "all"
    listed = store.list_runs()[0]
    assert listed.continued_from == results[1].run_id and listed.replay == results[-1].replay


async def test_retry_reexpands_the_same_runs(store: RunStore) -> None:
    provider = policy_provider(LookupPolicy())
    agent = Agent(provider, "p", [lookup], store)
    results = await converse(agent, ["a", "b"], replay_last="all")
    ids = [r.run_id for r in results]
    third = await agent.run("c", runs=ids, replay_last=1)
    again = await agent.retry(third.run_id)
    assert again.replay is not None and third.replay is not None
    assert again.replay.knobs == third.replay.knobs
    assert again.replay.runs_text == [ids[0]] and again.replay.runs_full == [ids[1]]
    # Same planner, same prefix rules: the retry's first request is the original's first request.
    firsts = [r for r in provider.requests if r.messages[-1].content == [TextBlock(text="c")]]
    assert len(firsts) == 2
    assert canonical_messages(firsts[0]) == canonical_messages(firsts[1])
    assert firsts[0].replay_end == firsts[1].replay_end is not None


async def test_fingerprint_covers_the_knobs(store: RunStore) -> None:
    agent = Agent(policy_provider(), "p", [lookup], store)
    (one,) = await converse(agent, ["a"])
    await agent.run("b", runs=[one.run_id], replay_last="all", idempotency_key="k")
    with pytest.raises(IdempotencyConflictError):
        await agent.run("b", runs=[one.run_id], replay_last=0, idempotency_key="k")
    with pytest.raises(IdempotencyConflictError):
        await agent.run("b", runs=[one.run_id], replay_last="all", replay_reasoning=False, idempotency_key="k")


async def test_vendor_report_of_dropped_reasoning_reaches_the_replay_summary(store: RunStore) -> None:
    """When the vendor reports dropping a replayed run's reasoning, that run moves to reasoning_dropped with one
    vendor-dropped warning naming it, however many requests of the run reported it; nothing else is vendor-dropped."""
    import attrs

    from segue._core.contracts import REPLAYED_META_KEY, ProviderNote, ProviderRequest, ProviderResponse

    class Reporting(ScriptedProvider):
        async def complete(self, request: ProviderRequest) -> ProviderResponse:
            response = await super().complete(request)
            thinking = [
                i
                for i, m in enumerate(request.messages)
                if (m.meta or {}).get(REPLAYED_META_KEY) and any(isinstance(b, ReasoningBlock) for b in m.content)
            ]
            if not thinking:
                return response
            dropped = ProviderNote(
                kind="vendor-dropped", message="dropped messages.1.content.0", message_index=thinking[0]
            )
            unconfirmed = ProviderNote(kind="unconfirmed", message="no input_transformations")
            return attrs.evolve(response, notes=[dropped, unconfirmed])

    provider = Reporting(replies=[LookupPolicy()] * 20)
    agent = Agent(provider, "p", [lookup], store)
    (one,) = await converse(agent, ["a"])
    result = await agent.run("b", runs=[one.run_id], replay_last="all")
    assert result.replay is not None
    assert result.replay.reasoning_kept == [] and result.replay.reasoning_dropped == [one.run_id]
    assert causes(result) == [(one.run_id, "vendor-dropped")], "two requests reported it: one warning"
    assert "dropped messages.1.content.0" in result.replay.warnings[0].message
    assert result.notes is not None
    assert [(n.kind, n.count) for n in result.notes] == [("unconfirmed", 2)], "other notes are notes, deduplicated"
    detail = store.get_run(result.run_id)
    assert detail is not None and detail.replay == result.replay
    assert stored_meta(detail)["segue.notes"] == [
        {"kind": "unconfirmed", "message": "no input_transformations", "iteration": 1, "count": 2}
    ]
