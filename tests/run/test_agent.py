"""The agent loop: runs, streams, tools, approvals, context, skills, guardrails, idempotency, failures."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from segue import (
    Agent,
    ContextBlock,
    IdempotencyConflictError,
    InputError,
    PIIGuardrail,
    ProviderError,
    RunStore,
    SingleCall,
    Skill,
    tool,
)
from segue.generated import Message, TextBlock
from segue.testing import ScriptedProvider, call, text
from tests._support.helpers import lookup, policy_provider, stored_meta


def rows(store: RunStore) -> dict[str, int]:
    return store.counts()


async def test_tool_loop_is_recorded(store: RunStore) -> None:
    provider = ScriptedProvider.of(call("lookup", {"q": "x"}, id="c1"), text("done"))
    agent = Agent(provider, "You look things up.", [lookup], store)
    result = await agent.run("find x", tenant_id="t1", metadata={"ticket": 7})
    assert (result.status, result.answer, result.iterations) == ("success", "done", 2)
    detail = store.get_run(result.run_id, tenant_id="t1")
    assert detail is not None
    assert [t.message.role for t in detail.traces] == ["user", "assistant", "tool", "assistant"]
    assert [i.iteration for i in detail.llm_interactions] == [1, 2]
    assert detail.tool_calls[0].result == "facts about x" and detail.tool_calls[0].is_error is False
    assert detail.usage.input_tokens == sum(i.usage.input_tokens for i in detail.llm_interactions) > 0
    assert detail.metadata == {"ticket": 7}
    assert "ticket" not in json.dumps(stored_meta(detail)), "app metadata stays apart from segue.* meta"
    assert detail.llm_interactions[1].provider_request["messages"][2]["role"] == "tool"


async def test_stream_events_in_order(sqlite_store: RunStore) -> None:
    agent = Agent(ScriptedProvider.of(call("lookup", {"q": "x"}), text("all done now")), "p", [lookup], sqlite_store)
    events = [e async for e in agent.stream("find x")]
    types = [e.type for e in events]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_COMPLETED"
    assert types.index("TOOL_CALL") < types.index("TOOL_RESULT") < types.index("TEXT_DELTA")
    assert "".join(e.text or "" for e in events if e.type == "TEXT_DELTA") == "all done now"
    assert all(e.run_id == events[0].run_id for e in events)
    assert events[-1].result is not None and events[-1].result.answer == "all done now"


async def test_tool_schema_from_signature_and_docstring() -> None:
    @tool
    def search(query: str, limit: int = 5, exact: bool | None = None, tags: list[str] | None = None) -> list[str]:
        """Search the catalogue.

        Args:
            query: words to look for
            limit: at most this many results,
                counted after ranking
        """
        return []

    assert search.description == "Search the catalogue."
    props = search.parameters["properties"]
    assert props["query"] == {"type": "string", "description": "words to look for"}
    assert props["limit"] == {
        "type": "integer",
        "default": 5,
        "description": "at most this many results, counted after ranking",
    }
    assert props["exact"] == {"anyOf": [{"type": "boolean"}, {"type": "null"}], "default": None}
    assert props["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    assert search.parameters["required"] == ["query"]

    @tool(requires_approval=True, name="delete", timeout=2)
    async def remove(path: str) -> str:
        return path

    assert remove.name == "delete" and remove.requires_approval and remove.timeout == 2


async def test_tool_failures_become_error_results() -> None:
    @tool
    def boom() -> str:
        raise RuntimeError("disk on fire")

    @tool(timeout=0.05)
    async def slow() -> str:
        await asyncio.sleep(5)
        return "late"

    @tool
    def opaque() -> Any:
        return object()

    @tool(max_result_chars=10)
    def huge() -> str:
        return "x" * 1000

    @tool
    def surrogate() -> str:
        return "bad \ud800 char"

    assert (await boom.invoke("1", {})).result.content == "tool boom raised RuntimeError: disk on fire"
    timed_out = (await slow.invoke("2", {})).result
    assert timed_out.is_error and "did not finish within 0.05 s" in timed_out.content
    assert "not JSON" in (await opaque.invoke("3", {})).result.content
    cut = (await huge.invoke("4", {})).result
    assert cut.content.startswith("x" * 10) and "truncated from 1000 to 10 characters" in cut.content
    assert not cut.is_error
    assert (await surrogate.invoke("5", {})).result.content == "bad ? char"
    invalid = (await huge.invoke("6", {"nope": 1})).result
    assert invalid.is_error and "invalid arguments for huge" in invalid.content


async def test_unknown_tool_and_bad_arguments_reach_the_model(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(call("nonexistent", {}, id="a"), call("lookup", {"q": 5}, id="b"), text("sorry"))
    agent = Agent(provider, "p", [lookup], sqlite_store)
    result = await agent.run("go")
    assert result.status == "success"
    tool_msgs = [m for m in provider.requests[-1].messages if m.role == "tool"]
    first, second = (m.content[0] for m in tool_msgs)
    assert first.is_error and "unknown tool 'nonexistent'; the tools available are: lookup" in first.content  # type: ignore[union-attr]
    assert second.is_error and "q: 5 is not of type 'string'" in second.content  # type: ignore[union-attr]


async def test_approval_pauses_and_resume_continues(store: RunStore) -> None:
    calls: list[str] = []

    @tool(requires_approval=True)
    def refund(order: str) -> str:
        calls.append(order)
        return f"refunded {order}"

    provider = ScriptedProvider.of(call("refund", {"order": "A1"}, id="r1"), text("refund done"))
    agent = Agent(provider, "p", [refund], store)
    paused = await agent.run("refund A1", tenant_id="t1")
    assert paused.status == "waiting_approval" and calls == []
    with pytest.raises(InputError, match=r"no run .* for tenant 'other'"):
        await agent.resume(paused.run_id, tenant_id="other")
    done = await agent.resume(paused.run_id, approved=True, tenant_id="t1")
    assert (done.status, done.answer, calls) == ("success", "refund done", ["A1"])
    with pytest.raises(InputError, match="not waiting_approval"):
        await agent.resume(paused.run_id, tenant_id="t1")
    detail = store.get_run(paused.run_id, tenant_id="t1")
    assert detail is not None
    assert [t.message.role for t in detail.traces] == ["user", "assistant", "tool", "assistant"]
    assert [t.index for t in detail.traces] == [0, 1, 2, 3]


async def test_denied_approval_tells_the_model(sqlite_store: RunStore) -> None:
    @tool(requires_approval=True)
    def refund(order: str) -> str:
        raise AssertionError("must not run")

    provider = ScriptedProvider.of(call("refund", {"order": "A1"}, id="r1"), text("ok, not refunded"))
    agent = Agent(provider, "p", [refund], sqlite_store)
    events = [e async for e in agent.stream("refund A1")]
    assert events[-1].type == "RUN_PAUSED" and events[-1].meta["pending"] == ["r1"]
    result = await agent.resume(events[-1].run_id, approved=False)
    denied = provider.requests[-1].messages[-1].content[0]
    assert result.status == "success" and "did not approve" in denied.content  # type: ignore[union-attr]


async def test_context_and_skills_layout(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(text("hi"))
    agent = Agent(
        provider, "Base prompt.", [], sqlite_store, skills=[Skill("sql", "Write SQL."), Skill("charts", "Draw charts.")]
    )
    await agent.run(
        "question",
        context=[
            ContextBlock(text="today is monday", source="clock"),
            ContextBlock(text="company handbook", placement="stable"),
        ],
    )
    request = provider.requests[0]
    assert request.system == "Base prompt.\n\n## Skill: charts\nDraw charts.\n\n## Skill: sql\nWrite SQL."
    assert request.stable_head == "<context>\ncompany handbook\n</context>"
    sent = request.messages[-1].content[0]
    assert isinstance(sent, TextBlock)
    assert sent.text == '<context source="clock">\ntoday is monday\n</context>\n\nquestion'


async def test_pii_guardrail(sqlite_store: RunStore) -> None:
    seen_by_tool: list[str] = []

    @tool
    def email_customer(to: str) -> str:
        seen_by_tool.append(to)
        return f"sent to {to}; they replied from +1 415 555 0100"

    provider = ScriptedProvider.of(
        lambda r: call("email_customer", {"to": "[EMAIL_1]"}, id="e1"), text("Emailed [EMAIL_1] and [PHONE_1].")
    )
    agent = Agent(provider, "p", [email_customer], sqlite_store, guardrails=[PIIGuardrail()])
    result = await agent.run("email ann@example.com, card 4111 1111 1111 1111")
    assert seen_by_tool == ["ann@example.com"]
    assert result.answer == "Emailed ann@example.com and +1 415 555 0100."
    detail = sqlite_store.get_run(result.run_id)
    assert detail is not None
    sent = json.dumps([i.provider_request for i in detail.llm_interactions])
    for secret in ("ann@example.com", "4111 1111 1111 1111", "415 555 0100"):
        assert secret not in sent
    assert "[CARD_1]" in sent
    assert "ann@example.com" not in json.dumps(stored_meta(sqlite_store.get_run(result.run_id)))


async def test_idempotency(store: RunStore) -> None:
    agent = Agent(ScriptedProvider.of(text("one"), text("two")), "p", [], store)
    first = await agent.run("hi", idempotency_key="k1", tenant_id="t1")
    again = await agent.run("hi", idempotency_key="k1", tenant_id="t1")
    assert again.run_id == first.run_id and again.answer == "one"
    with pytest.raises(IdempotencyConflictError) as conflict:
        await agent.run("something else", idempotency_key="k1", tenant_id="t1")
    assert first.run_id not in str(conflict.value)
    other = await agent.run("hi", idempotency_key="k1", tenant_id="t2")
    assert other.run_id != first.run_id and other.answer == "two"
    assert len(store.list_runs(tenant_id="t1")) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"user_input": "   "}, "user_input must be a non-empty string"),
        ({"user_input": "x" * 2001}, "over the limit of 2,000"),
        (
            {"history": [{"role": "assistant", "content": [{"type": "text", "text": "hi"}]}]},
            "history\\[0\\] is a assistant",
        ),
        (
            {
                "history": [
                    {"role": "user", "content": [{"type": "text", "text": "a"}]},
                    {"role": "user", "content": [{"type": "text", "text": "b"}]},
                ]
            },
            "history\\[1\\] is a user",
        ),
        ({"history": [{"text": "nope"}]}, "history\\[0\\] is not a message"),
        ({"history": [{"role": "user", "content": "a question and no answer"}]}, "must end with an assistant"),
        ({"tenant_id": ""}, "tenant_id must be a non-empty string"),
        ({"metadata": {"when": object()}}, "metadata must be plain JSON"),
    ],
)
async def test_bad_input_writes_nothing(sqlite_store: RunStore, kwargs: dict[str, Any], message: str) -> None:
    provider = ScriptedProvider.of(text("never"))
    agent = Agent(provider, "p", [], sqlite_store, max_input_chars=2000)
    args = {"user_input": "hello", **kwargs}
    with pytest.raises(InputError, match=message):
        await agent.run(args.pop("user_input"), **args)
    assert rows(sqlite_store)["agent_runs"] == 0 and provider.requests == []


async def test_max_iterations_is_a_terminal_status(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(*(call("lookup", {"q": str(i)}, id=f"c{i}") for i in range(3)))
    agent = Agent(provider, "p", [lookup], sqlite_store, max_iterations=3)
    result = await agent.run("loop forever")
    assert result.status == "max_iterations" and "max_iterations=3" in (result.error or "")
    assert sqlite_store.get_run(result.run_id).status == "max_iterations"  # type: ignore[union-attr]


async def test_provider_failure_mid_loop_keeps_traces_and_retry_works(store: RunStore) -> None:
    provider = ScriptedProvider.of(
        call("lookup", {"q": "a"}, id="c1"),
        call("lookup", {"q": "b"}, id="c2"),
        ProviderError("upstream exploded", vendor="scripted", kind="server", status_code=500),
        call("lookup", {"q": "a"}, id="c3"),
        text("recovered"),
    )
    agent = Agent(provider, "p", [lookup], store)
    failed = await agent.run("dig", tenant_id="t1")
    assert failed.status == "error" and "upstream exploded" in (failed.error or "")
    detail = store.get_run(failed.run_id, tenant_id="t1")
    assert detail is not None and detail.status == "error" and detail.error
    assert len(detail.llm_interactions) == 2 and len(detail.traces) == 5
    retried = await agent.retry(failed.run_id, tenant_id="t1")
    assert retried.status == "success" and retried.answer == "recovered"
    assert store.get_run(retried.run_id, tenant_id="t1").retry_of == failed.run_id  # type: ignore[union-attr]
    with pytest.raises(InputError, match="no run"):
        await agent.retry(failed.run_id, tenant_id="t2")


async def test_single_call_makes_one_call_without_tools(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(text("short answer"))
    agent = SingleCall(provider, "Be brief.", sqlite_store)
    result = await agent.run("why?")
    assert result.answer == "short answer" and provider.requests[0].tools == []


async def test_agent_without_store_still_runs() -> None:
    agent = Agent(policy_provider(), "p", [lookup])
    result = await agent.run("what?")
    assert result.status == "success" and result.answer and result.answer.startswith("answer")


async def test_history_goes_before_the_new_input(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(text("ok"))
    history = [
        Message(role="user", content=[TextBlock(text="earlier")]),
        Message(role="assistant", content=[TextBlock(text="noted")]),
    ]
    await Agent(provider, "p", [], sqlite_store).run("now", history=history)
    assert [m.role for m in provider.requests[0].messages] == ["user", "assistant", "user"]
    assert provider.requests[0].messages[0].content[0] == TextBlock(text="earlier")


async def test_streamed_text_restores_placeholders_split_across_deltas(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(text("Emailed [EMAIL_1] and [PHONE_1] today, [sic]."))  # streams 8 chars a delta
    agent = Agent(provider, "p", [], sqlite_store, guardrails=[PIIGuardrail()])
    events = [e async for e in agent.stream("write to ann@example.com or +1 415 555 0100")]
    deltas = [e.text or "" for e in events if e.type == "TEXT_DELTA"]
    assert len(deltas) > 3
    assert "".join(deltas) == "Emailed ann@example.com and +1 415 555 0100 today, [sic]."
    assert not any("EMAIL_" in d or "PHONE_" in d for d in deltas)
    assert events[-1].result is not None and events[-1].result.answer == "".join(deltas)
