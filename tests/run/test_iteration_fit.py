"""Every iteration of a run is fitted to the context window, not only its first request: the results of the run's
earlier tool calls are clipped in later requests (oldest first, the latest never), with a `context-clipped` note;
a request that cannot fit even so ends the run with `context_overflow` before it is sent."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from helpers import catalog_layer

from segue import Agent, RunStore
from segue._core.contracts import ProviderRequest
from segue.generated import Message, TextBlock, ToolCallBlock, ToolResultBlock
from segue.testing import ScriptedProvider

#: 1,000 tokens in segue's approximation (segue._core.tokens), the one the plan and the twin count with.
BIG = "fact " * 800


def fetch(q: str) -> str:
    """Fetch a document.

    Args:
        q: which document
    """
    return BIG


class FourFetches:
    """Calls `fetch` four times, one call per iteration, then answers (replayed runs' calls do not count)."""

    def __call__(self, request: ProviderRequest) -> Message:
        asked = max(i for i, m in enumerate(request.messages) if m.role == "user")
        done = sum(1 for m in request.messages[asked:] if m.role == "tool")
        if done < 4:
            return Message(role="assistant", content=[ToolCallBlock(id=f"c{done}", name="fetch", arguments={"q": "d"})])
        return Message(role="assistant", content=[TextBlock(text="done")])


def agent_on(tmp_path: Path, store: RunStore, window: int) -> tuple[Agent, ScriptedProvider]:
    provider = ScriptedProvider(replies=[FourFetches()] * 10, vendor="anthropic", model="claude-sonnet-4-6")
    catalog = catalog_layer(tmp_path, {"context_window": window})
    return Agent(provider, "p", [fetch], store, catalog=catalog, max_iterations=8), provider


def results(request: ProviderRequest) -> list[str]:
    return [b.content for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]


async def test_later_iterations_clip_earlier_tool_results_to_fit_and_say_so(tmp_path: Path, sqlite_store: Any) -> None:
    # Room for about two and a half results beside the prompt, the tool and the question.
    agent, provider = agent_on(tmp_path, sqlite_store, 2_700)
    result = await agent.run("read the documents")
    assert result.status == "success", result.error
    sent = [results(r) for r in provider.requests]
    assert [len(r) for r in sent] == [0, 1, 2, 3, 4]
    assert sent[2] == [BIG, BIG]  # it still fit
    # From then on the oldest results are clipped, as few as fit, the latest never; a clipped result stays
    # clipped, the same text on every later request.
    clipped = "(result of fetch clipped to fit the context window: 1,000 tokens left out; call it again if you need it)"
    assert sent[3] == [clipped, BIG, BIG]
    assert sent[4] == [clipped, clipped, BIG, BIG]
    notes = [n for n in result.notes or [] if n.kind == "context-clipped"]
    assert notes and "fetch" in notes[0].message and "2,700 tokens" in notes[0].message
    # The stored traces keep every result whole.
    detail = sqlite_store.get_run(result.run_id)
    stored = [b.content for t in detail.traces for b in t.message.content if isinstance(b, ToolResultBlock)]
    assert stored == [BIG] * 4


async def test_a_request_that_cannot_fit_ends_the_run_with_context_overflow_unsent(
    tmp_path: Path, sqlite_store: Any
) -> None:
    # Room for the question and one result, not for the latest result beside another clipped one's note.
    agent, provider = agent_on(tmp_path, sqlite_store, 1_050)
    result = await agent.run("read the documents")
    assert result.status == "error"
    assert result.error is not None and result.error.startswith("context_overflow error from anthropic")
    assert "iteration 2" in result.error and "Compaction" in result.error and "1,050 tokens" in result.error
    assert len(provider.requests) == 1  # the request that could not fit was never sent


async def test_when_the_runs_own_results_are_not_enough_the_replayed_ones_are_clipped(
    tmp_path: Path, sqlite_store: Any
) -> None:
    """A replayed run fitted to the first request leaves no room for the new run's results: its tool results are
    clipped, oldest first, as few as fit, and stay clipped on the run's later requests."""
    (tmp_path / "wide").mkdir()
    (tmp_path / "narrow").mkdir()
    wide, _ = agent_on(tmp_path / "wide", sqlite_store, 1_000_000)
    first = await wide.run("read the documents")
    agent, provider = agent_on(tmp_path / "narrow", sqlite_store, 5_400)
    result = await agent.run("read them again", runs=[first.run_id])
    assert result.status == "success", result.error
    assert result.replay is not None and result.replay.runs_full == [first.run_id]  # the plan kept it in full
    sent = [results(r) for r in provider.requests]
    assert [len(r) for r in sent] == [4, 5, 6, 7, 8]
    assert sent[0] == [BIG] * 4 and sent[1] == [BIG] * 5  # as planned, then one result more still fits
    # The oldest replayed result, once the run's own were not enough.
    assert "clipped to fit the context window" in sent[2][0]
    assert all(r[-1] == BIG for r in sent)  # the latest result, never
    for before, after in itertools.pairwise(sent):  # clipped once, clipped on every later request
        assert all(after[i] == b for i, b in enumerate(before) if "clipped" in b)
    notes = [n for n in result.notes or [] if n.kind == "context-clipped"]
    assert notes and "fetch (replayed)" in notes[0].message
