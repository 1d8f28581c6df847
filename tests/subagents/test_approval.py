"""Issue 41, item 1 (approval pauses pass through): a sub-agent whose tool waits for approval pauses its sub-run,
and the caller pauses with it, on the call that made the sub-run; resuming the caller with the app's decision
resumes the sub-run with it, and the caller goes on with the sub-agent's answer. A call that ran beside it in the
same round is not run again: its journaled result joins the round's tool message."""

from __future__ import annotations

from segue import Agent, RunStore, tool
from segue.testing import ScriptedProvider, call, canonical_messages, text

ran: list[str] = []


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order (needs the operator's approval)."""
    ran.append(f"refund {order}")
    return f"order {order} refunded"


@tool
def note(text: str) -> str:
    """Write a note in the customer's file."""
    ran.append(f"note {text}")
    return "noted"


def desk(sqlite_store: RunStore, child_replies: list[object]) -> tuple[Agent, ScriptedProvider]:
    billing = Agent(ScriptedProvider.of(*child_replies), "Billing.", [refund], sqlite_store, name="billing")  # type: ignore[arg-type]
    both = call("billing", {"task": "refund order 7"}, id="p1")
    both.content.append(call("note", {"text": "asked for a refund"}, id="p2").content[0])
    provider = ScriptedProvider.of(both, text("The refund is done."))
    return Agent(provider, "Desk.", [billing.as_tool(), note], sqlite_store, name="desk"), provider


async def test_the_caller_pauses_with_its_sub_run_and_resuming_it_approves_the_sub_runs_call(
    sqlite_store: RunStore,
) -> None:
    ran.clear()
    parent, provider = desk(sqlite_store, [call("refund", {"order": "7"}, id="b1"), text("refunded order 7")])
    paused = await parent.run("Refund order 7, please.")
    assert paused.status == "waiting_approval"
    assert [(p.call_id, p.name) for p in paused.pending_approvals or []] == [("p1", "billing")]
    [sub] = sqlite_store.lineage.children([paused.run_id])
    assert (sub.agent_name, sub.status, sub.parent_call_id) == ("billing", "waiting_approval", "p1")
    assert ran == ["note asked for a refund"]  # the sibling call ran; the refund waits

    resumed = await parent.resume(paused.run_id, approved=True)
    assert resumed.status == "success" and resumed.answer == "The refund is done."
    assert ran == ["note asked for a refund", "refund 7"]  # nothing ran twice
    assert [c.run_id for c in resumed.children or []] == [sub.run_id]
    detail = sqlite_store.get_run(sub.run_id)
    assert detail is not None and detail.status == "success" and detail.answer == "refunded order 7"
    # The caller's next request answers both calls: the sub-agent's answer and the journaled note.
    tool_message = canonical_messages(provider.requests[1])[-1]
    assert [(b["tool_call_id"], b["content"]) for b in tool_message["content"]] == [
        ("p1", "refunded order 7"),
        ("p2", "noted"),
    ]


async def test_denying_the_caller_denies_the_sub_runs_call(sqlite_store: RunStore) -> None:
    ran.clear()
    parent, _ = desk(sqlite_store, [call("refund", {"order": "7"}, id="b1"), text("could not refund")])
    paused = await parent.run("Refund order 7, please.")
    resumed = await parent.resume(paused.run_id, approved=False)
    assert resumed.status == "success"
    assert ran == ["note asked for a refund"]  # the refund never ran
    [sub] = sqlite_store.lineage.children([paused.run_id])
    detail = sqlite_store.get_run(sub.run_id)
    assert detail is not None and detail.answer == "could not refund"
    [refused] = [c for c in detail.tool_calls if c.name == "refund"]
    assert refused.is_error and "did not approve" in (refused.result or "")
