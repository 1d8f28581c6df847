"""Issue 41, item 4: a handoff. A conversation continues with another agent: `other.run(text, runs=run_ids)` replays
the earlier agent's runs into the new agent's requests. Where the prompt or tools differ, their reasoning is
dropped with its cause (the prefix rule: the signed thinking was produced under another system prompt); their tool
calls and results are replayed verbatim, even when the new agent does not offer that tool. On the twin, with
Anthropic's wire and signed thinking."""

from __future__ import annotations

from pathlib import Path

from segue import Agent, RunStore, tool
from segue.providers import AnthropicProvider
from segue_twin import Twin
from segue_twin.view import AssistantTurn, ConversationView, PlannedCall

THINKING = {"type": "enabled", "budget_tokens": 1024}


@tool
def track(parcel: str) -> str:
    """Track a parcel."""
    return f"parcel {parcel}: in the depot since Monday"


class Desk:
    """Triage tracks the parcel; billing (another prompt, no tools) answers from what it replays."""

    def respond(self, view: ConversationView) -> AssistantTurn:
        last = view.turns[-1]
        if "track" in view.tools and not last.tool_results:
            return AssistantTurn(
                reasoning="find the parcel", tool_calls=(PlannedCall(name="track", arguments={"parcel": "P9"}),)
            )
        if last.tool_results:
            return AssistantTurn(reasoning="report", text="It is in the depot.")
        seen = [r.content for r in view.tool_results()]
        return AssistantTurn(reasoning="refund", text=f"Refund issued; I saw: {seen[0]}")


async def test_the_new_agent_replays_the_earlier_agents_runs(tmp_path: Path) -> None:
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    twin = Twin(policy=Desk())
    client = twin.anthropic_client()
    triage = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=client, thinking=THINKING),
        "You triage parcel questions.",
        [track],
        store,
        name="triage",
    )
    billing = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=client, thinking=THINKING),
        "You handle refunds.",
        (),
        store,
        name="billing",
    )
    first = await triage.run("Where is parcel P9?")
    assert first.status == "success"
    second = await billing.run("Then refund me.", runs=[first.run_id])
    assert second.status == "success", second.error
    assert second.answer == "Refund issued; I saw: parcel P9: in the depot since Monday"
    replay = second.replay
    assert replay is not None and replay.runs_full == [first.run_id]
    # The reasoning was produced under triage's prompt: dropped, and the cause says so.
    assert replay.reasoning_dropped == [first.run_id] and replay.reasoning_kept == []
    causes = {w.cause for w in replay.warnings}
    assert "system" in causes
    # The tool call and its result went to billing's request as triage made them, though billing offers no tools.
    detail = store.get_run(second.run_id)
    assert detail is not None
    body = detail.llm_interactions[0].provider_request
    blocks = [b for m in body["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])]
    uses = [b for b in blocks if b.get("type") == "tool_use"]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    assert [(u["name"], u["input"]) for u in uses] == [("track", {"parcel": "P9"})]
    assert results[0]["content"] in (
        "parcel P9: in the depot since Monday",
        [{"type": "text", "text": "parcel P9: in the depot since Monday"}],
    )
    assert not [b for b in blocks if b.get("type") == "thinking"]
