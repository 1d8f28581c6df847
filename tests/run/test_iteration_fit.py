"""Every iteration of a run is fitted to the context window, not only its first request: the results of the run's
earlier tool calls are clipped in later requests (oldest first, the latest never), with a `context-clipped` note;
a request that cannot fit even so ends the run with `context_overflow` before it is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from segue import Agent, RunStore
from segue._core.contracts import ProviderRequest
from segue.generated import Message, TextBlock, ToolCallBlock, ToolResultBlock
from segue.testing import ScriptedProvider
from tests._support.helpers import catalog_layer

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


def fetch_sized(q: str) -> str:
    """Fetch a document.

    Args:
        q: which document
    """
    return "fact " * (1_600 if q == "long" else 800)


class OneFetch:
    """One `fetch` call (of the long document when the question says so), then an answer."""

    def __call__(self, request: ProviderRequest) -> Message:
        asked = max(i for i, m in enumerate(request.messages) if m.role == "user")
        if any(m.role == "tool" for m in request.messages[asked:]):
            return Message(role="assistant", content=[TextBlock(text="done")])
        question = "".join(b.text for b in request.messages[asked].content if isinstance(b, TextBlock))
        q = "long" if "long" in question else "short"
        return Message(
            role="assistant", content=[ToolCallBlock(id=f"c{asked}", name="fetch_sized", arguments={"q": q})]
        )


async def test_when_the_runs_own_results_are_not_enough_the_replayed_ones_are_clipped(
    tmp_path: Path, sqlite_store: Any
) -> None:
    """The plan keeps the replayed run in full, with room for a run like it; the new run's result is twice as
    long, and its own earlier results are none: the replayed run's result is clipped, and stays clipped."""
    provider = ScriptedProvider(replies=[OneFetch()] * 10, vendor="anthropic", model="claude-sonnet-4-6")
    catalog = catalog_layer(tmp_path, {"context_window": WINDOW})
    agent = Agent(provider, "p", [fetch_sized], sqlite_store, catalog=catalog, max_iterations=8)
    first = await agent.run("read the short document")
    result = await agent.run("read the long document", runs=[first.run_id])
    assert result.status == "success", result.error
    assert result.replay is not None and result.replay.runs_full == [first.run_id]  # the plan kept it in full
    sent = [results(r) for r in provider.requests[2:]]
    assert sent[0] == ["fact " * 800]  # the first request as planned
    assert sent[1][0].startswith("(result of fetch_sized clipped to fit the context window: 1,000 tokens left out")
    assert sent[1][1] == "fact " * 1_600  # the latest result, never
    notes = [n for n in result.notes or [] if n.kind == "context-clipped"]
    assert notes and "fetch_sized (replayed)" in notes[0].message


#: Room for the prompt, the tool, the replayed run in full and as much again (the plan's reserve), not for a
#: result twice as long beside it.
WINDOW = 2_900
