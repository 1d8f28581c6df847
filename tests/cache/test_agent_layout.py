"""The trailing runtime-state fragment in the agent loop: placement, freezing, storage and replay."""

from __future__ import annotations

from typing import Any

import pytest

from segue import Agent, RunStore
from segue.cache.layout import is_fragment
from segue.generated import TextBlock
from segue.testing import ScriptedProvider, call, canonical_messages, text
from tests._support.helpers import lookup, script, state_text, stored_meta


def fragment_iterations(messages: list[Any]) -> list[int]:
    return [m.meta["segue.iteration"] for m in messages if is_fragment(m)]


async def test_prefix_cache_host_is_append_only(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(*script(), vendor="openai", model="gpt-4.1-mini")
    agent = Agent(provider, "p", [lookup], sqlite_store, trailing_state=state_text)
    result = await agent.run("go")
    first, second, third = provider.requests
    assert fragment_iterations(first.messages) == [1]
    assert fragment_iterations(second.messages) == [1, 2], "iteration 1's fragment is restored at its boundary"
    assert fragment_iterations(third.messages) == [1, 2, 3]
    assert is_fragment(first.messages[1]) and is_fragment(second.messages[1])
    # Every request is a byte-prefix extension of the previous one.
    for earlier, later in ((first, second), (second, third)):
        assert canonical_messages(later)[: len(earlier.messages)] == canonical_messages(earlier)
    detail = sqlite_store.get_run(result.run_id)
    assert detail is not None
    assert stored_meta(detail)["segue.layout"]["mode"] == "appendOnly"
    assert "gpt-4.1-mini@openai prefix_prompt_cache=true" in stored_meta(detail)["segue.layout"]["reason"]
    assert stored_meta(detail)["segue.layout"]["restored_iteration"] == 1
    stored = [t.message for t in detail.traces]
    assert fragment_iterations(stored) == [1, 2, 3]
    assert [t.index for t in detail.traces] == list(range(len(stored)))
    assert [m.role for m in stored] == [
        "user",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]


async def test_block_cache_host_replaces(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(*script(), vendor="anthropic", model="claude-sonnet-4-6")
    agent = Agent(provider, "p", [], sqlite_store, trailing_state=state_text)
    result = await agent.run("go")
    for i, request in enumerate(provider.requests, start=1):
        assert fragment_iterations(request.messages) == [i]
        assert is_fragment(request.messages[-1])
    detail = sqlite_store.get_run(result.run_id)
    assert detail is not None and stored_meta(detail)["segue.layout"]["mode"] == "replace"
    assert not any(is_fragment(t.message) for t in detail.traces), "stored traces never hold a replace fragment"


async def test_stable_reasoning_driver_with_tools_is_append_only(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(
        *script(), vendor="anthropic", model="claude-sonnet-4-6", requires_stable_reasoning_prefix=True
    )
    result = await Agent(provider, "p", [lookup], sqlite_store, trailing_state=state_text).run("go")
    detail = sqlite_store.get_run(result.run_id)
    assert detail is not None and stored_meta(detail)["segue.layout"]["mode"] == "appendOnly"
    assert "stable reasoning prefix" in stored_meta(detail)["segue.layout"]["reason"]


async def test_explicit_mode_wins(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(*script(), vendor="openai", model="gpt-4.1-mini")
    agent = Agent(provider, "p", [lookup], sqlite_store, trailing_state=state_text, trailing_state_layout="replace")
    await agent.run("go")
    assert fragment_iterations(provider.requests[-1].messages) == [3]


async def test_replaying_an_append_only_run_keeps_its_fragments(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(*script(), text("again"), vendor="openai", model="gpt-4.1-mini")
    agent = Agent(provider, "p", [lookup], sqlite_store, trailing_state=state_text)
    first = await agent.run("go")
    await agent.run("more", runs=[first.run_id], replay_last="all")
    last, first_runs_last_request = provider.requests[-1], provider.requests[2]
    replayed = last.messages[: (last.replay_end or 0) + 1]
    assert fragment_iterations(replayed) == [1, 2, 3]
    # The replayed run is byte-identical to what it last sent, plus its answer: the cache prefix survives.
    n = len(first_runs_last_request.messages)
    assert canonical_messages(last)[:n] == canonical_messages(first_runs_last_request)
    assert replayed[n].content == [TextBlock(text="done")]


async def test_no_callback_no_fragment(sqlite_store: RunStore) -> None:
    provider = ScriptedProvider.of(text("hi"), vendor="openai", model="gpt-4.1-mini")
    result = await Agent(provider, "p", [], sqlite_store).run("go")
    assert not any(is_fragment(m) for m in provider.requests[0].messages)
    assert "segue.layout" not in stored_meta(sqlite_store.get_run(result.run_id))


async def test_bad_layout_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="trailing_state_layout must be"):
        Agent(ScriptedProvider.of(), "p", trailing_state=state_text, trailing_state_layout="sometimes")  # type: ignore[arg-type]


def test_fragment_text_is_wrapped() -> None:
    from segue.cache.layout import build_fragment

    block = build_fragment("x", 1).content[0]
    assert isinstance(block, TextBlock) and block.text == "<segue-runtime-state>\nx\n</segue-runtime-state>"


async def test_a_resumed_run_keeps_the_layout_decided_before_its_pause(sqlite_store: RunStore) -> None:
    """Issue 27 (b): the layout is decided once per run. A run decided appendOnly (iteration 1 served on a prefix
    cache host) that pauses for approval and is served after the resume by a Failover backup on a block cache host
    (which alone would decide replace) stays appendOnly: its iteration-1 fragment stays on the wire."""
    from segue import tool
    from segue.errors import ProviderError
    from segue.providers import Failover

    @tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order.

        Args:
            order: the order id
        """
        return f"refunded {order}"

    overloaded = ProviderError("overloaded", vendor="openai", kind="server")
    primary = ScriptedProvider.of(
        call("refund", {"order": "o1"}, id="c1"), overloaded, vendor="openai", model="gpt-4.1-mini"
    )
    backup = ScriptedProvider.of(text("done"), vendor="anthropic", model="claude-sonnet-4-6")
    agent = Agent(Failover([primary, backup]), "p", [refund], sqlite_store, trailing_state=state_text)
    paused = await agent.run("refund o1")
    assert paused.status == "waiting_approval"
    assert stored_meta(sqlite_store.get_run(paused.run_id))["segue.layout"]["mode"] == "appendOnly"
    done = await agent.resume(paused.run_id, approved=True)
    assert done.status == "success" and len(backup.requests) == 1
    detail = sqlite_store.get_run(done.run_id)
    assert detail is not None and stored_meta(detail)["segue.layout"]["mode"] == "appendOnly"
    assert fragment_iterations(backup.requests[0].messages) == [1, 2], "iteration 1's fragment is still sent"
