"""Issue 41, item 3: forks read the parent's cache. A fork (segue.fork_tool) starts from its caller's prefix: the
same system and tools, the caller's replayed runs and messages so far, then the sub-task; so its first request
reads what the caller's last request cached, and forks called together read the same entry. On the twin
(Anthropic's wire, cache markers and all). A fork onto a path the caller's prefix was not sent on is refused."""

from __future__ import annotations

from segue import Agent, RunStore, fork_tool, tool
from segue.providers import AnthropicProvider
from segue_twin import Twin
from segue_twin.view import AssistantTurn, ConversationView, PlannedCall

#: Long enough to pass Claude Sonnet 4.6's minimum cacheable prompt (1,024 tokens).
PROMPT = "You are the operations lead of a parcel company. " + " ".join(
    f"Rule {i}: answer with the facts the tools return, cite the tool, and keep the customer's tone."
    for i in range(120)
)


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: two parcels, one late"


class Lead:
    """Plays the model for the lead and its forks: the lead looks the order up, forks two sub-tasks at once, then
    answers from their results; a fork (its last user text is a sub-task) answers it."""

    def respond(self, view: ConversationView) -> AssistantTurn:
        last = view.turns[-1]
        if last.role == "user" and last.text.startswith("SUB "):
            return AssistantTurn(text=f"done: {last.text[4:]}")
        results = [r for r in last.tool_results] if last.role == "user" else []
        if not results:
            return AssistantTurn(tool_calls=(PlannedCall(name="lookup", arguments={"order": "7"}),))
        if results[0].name == "lookup":
            return AssistantTurn(
                tool_calls=(
                    PlannedCall(name="fork", arguments={"task": "SUB refund the late parcel"}),
                    PlannedCall(name="fork", arguments={"task": "SUB apologise to the customer"}),
                )
            )
        return AssistantTurn(text="all handled: " + "; ".join(r.content for r in results))


async def test_parallel_forks_read_the_parents_cached_prefix(sqlite_store: RunStore) -> None:
    twin = Twin(policy=Lead())
    provider = AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client())
    lead = Agent(provider, PROMPT, [lookup, fork_tool()], sqlite_store, name="lead")
    result = await lead.run("Order 7 is late: sort it out.")
    assert result.status == "success", result.error
    assert result.answer == "all handled: done: refund the late parcel; done: apologise to the customer"
    forks = result.children or []
    assert [c.fork for c in forks] == [True, True] and {c.agent_name for c in forks} == {"lead"}
    parent = sqlite_store.get_run(result.run_id)
    assert parent is not None
    cached_by_parent = parent.llm_interactions[1].usage  # the request whose response called the forks
    for child in forks:
        detail = sqlite_store.get_run(child.run_id)
        assert detail is not None and detail.parent_run_id == result.run_id
        first = detail.llm_interactions[0]
        # Its first request is the parent's second one plus the sub-task: it reads all of what that one cached.
        sent = first.provider_request
        parent_sent = parent.llm_interactions[1].provider_request
        assert sent["system"] == parent_sent["system"] and sent["tools"] == parent_sent["tools"]
        cached = (cached_by_parent.cache_read_tokens or 0) + (cached_by_parent.cache_write_tokens or 0)
        assert cached > 0
        assert (first.usage.cache_read_tokens or 0) >= cached
        assert child.cached_share is not None and child.cached_share > 0.9


async def test_a_fork_onto_another_path_is_refused_before_any_row(sqlite_store: RunStore) -> None:
    twin = Twin(policy=Lead())
    provider = AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client())
    lead = Agent(provider, PROMPT, [lookup, fork_tool(model="claude-haiku-4-5")], sqlite_store, name="lead")
    result = await lead.run("Order 7 is late: sort it out.")
    detail = sqlite_store.get_run(result.run_id)
    assert detail is not None
    refusals = [c for c in detail.tool_calls if c.name == "fork"]
    assert len(refusals) == 2
    for refused in refusals:
        assert refused.is_error and "cannot start from the parent's prefix" in (refused.result or "")
        assert "anthropic/claude-haiku-4-5" in (refused.result or "")
    assert sqlite_store.lineage.children([result.run_id]) == []


class ThinkingLead(Lead):
    def respond(self, view: ConversationView) -> AssistantTurn:
        turn = super().respond(view)
        return AssistantTurn(text=turn.text, tool_calls=turn.tool_calls, reasoning="weigh the order first")


async def test_a_fork_on_the_callers_path_carries_its_signed_reasoning(sqlite_store: RunStore) -> None:
    """Same system, tools and path: the prefix rule keeps the caller's signed thinking, so the fork's request
    repeats the caller's messages byte for byte (thinking included) and reads them from the cache."""
    twin = Twin(policy=ThinkingLead())
    thinking = {"type": "enabled", "budget_tokens": 1024}
    provider = AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client(), thinking=thinking)
    lead = Agent(provider, PROMPT, [lookup, fork_tool()], sqlite_store, name="lead")
    result = await lead.run("Order 7 is late: sort it out.")
    assert result.status == "success", result.error
    parent = sqlite_store.get_run(result.run_id)
    assert parent is not None
    sent_by_parent = parent.llm_interactions[1].provider_request["messages"]
    assert [b["type"] for b in sent_by_parent[1]["content"]] == ["thinking", "tool_use"]
    for child in result.children or []:
        detail = sqlite_store.get_run(child.run_id)
        assert detail is not None
        sent = detail.llm_interactions[0].provider_request["messages"]
        assert sent[:2] == sent_by_parent[:2]  # the signed thinking went as the caller sent it
        # The tool results too; only the cache breakpoint moved on, to the sub-task after them.
        unmarked = [{k: v for k, v in b.items() if k != "cache_control"} for b in sent[2]["content"]]
        parents = [{k: v for k, v in b.items() if k != "cache_control"} for b in sent_by_parent[2]["content"]]
        assert unmarked[: len(parents)] == parents and unmarked[-1]["type"] == "text"
        assert child.cached_share is not None and child.cached_share > 0.99


async def test_history_may_end_with_tool_results_which_the_new_input_follows(sqlite_store: RunStore) -> None:
    """What a fork's request is made of (and what its retry, resume or recovery rebuilds): history that ends with
    the tool results of its last assistant message; the new input follows them in the same user turn."""
    from segue.generated import Message, TextBlock, ToolCallBlock, ToolResultBlock
    from segue.testing import ScriptedProvider, canonical_messages, text

    history = [
        Message(role="user", content=[TextBlock(text="Where is order 7?")]),
        Message(role="assistant", content=[ToolCallBlock(id="c1", name="lookup", arguments={"order": "7"})]),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="c1", content="in the depot")]),
    ]
    provider = ScriptedProvider.of(text("It is in the depot."), text("again"))
    agent = Agent(provider, "P.", [lookup], sqlite_store, name="lead")
    result = await agent.run("Summarise.", history=history)
    assert result.status == "success"
    assert [m["role"] for m in canonical_messages(provider.requests[0])] == ["user", "assistant", "tool", "user"]
    again = await agent.retry(result.run_id)  # rebuilt from the stored request, history and all
    assert again.status == "success" and again.retry_of == result.run_id


async def test_a_fork_from_the_callers_first_response_follows_its_question(sqlite_store: RunStore) -> None:
    """The caller forks at once: the fork's request is the caller's first request (its question) then the
    sub-task, so it reads what that request cached."""
    from segue_twin.scripted import ScriptedPolicy

    twin = Twin(
        policy=ScriptedPolicy(
            [
                AssistantTurn(tool_calls=(PlannedCall(name="fork", arguments={"task": "SUB draft a note"}),)),
                "note drafted",
                "done",
            ]
        )
    )
    lead = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()),
        PROMPT,
        [fork_tool()],
        sqlite_store,
        name="lead",
    )
    result = await lead.run("Order 7 is late.")
    assert result.status == "success" and result.answer == "done"
    [fork] = result.children or []
    detail = sqlite_store.get_run(fork.run_id)
    assert detail is not None
    sent = detail.llm_interactions[0].provider_request["messages"]
    texts = [b["text"] for m in sent for b in m["content"] if b.get("type") == "text"]
    assert texts == ["Order 7 is late.", "SUB draft a note"]
    assert fork.cached_share is not None and fork.cached_share > 0.9
