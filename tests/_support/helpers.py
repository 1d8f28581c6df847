"""Shared scripted conversations and test catalog layers for runtime and replay tests."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from segue import Agent, RunDetail, RunResult
from segue._core.contracts import ProviderRequest
from segue.cache.layout import RuntimeState
from segue.catalog import Catalog
from segue.generated import Message, ReasoningBlock, RunMeta, TextBlock, ToolCallBlock, get_converter
from segue.testing import ScriptedProvider, call, text


def stored_meta(run: RunDetail | None) -> dict[str, Any]:
    """A run's meta as stored in agent_runs.meta: the JSON its RunMeta writes."""
    assert run is not None
    value: dict[str, Any] = get_converter().unstructure(run.meta or RunMeta(), RunMeta)
    return value


class LookupPolicy:
    """A scripted model: each new question -> (reasoning +) a `lookup` call; a tool result -> an answer."""

    def __init__(self, *, reasoning: bool = True, vendor: str = "scripted", tool: str = "lookup") -> None:
        self.reasoning = reasoning
        self.vendor = vendor
        self.tool = tool
        self.ids = itertools.count(1)

    def __call__(self, request: ProviderRequest) -> Message:
        last = request.messages[-1]
        n = next(self.ids)
        if last.role == "user":
            question = "".join(b.text for b in last.content if isinstance(b, TextBlock))
            content: list[Any] = []
            if self.reasoning:
                content.append(
                    ReasoningBlock(
                        vendor=self.vendor,
                        model=request.model or "scripted-1",
                        format="scripted.reasoning",
                        text=f"think {n}",
                        signature=f"sig{n}",
                    )
                )
            content.append(ToolCallBlock(id=f"call_{n}", name=self.tool, arguments={"q": question[-40:]}))
            return Message(role="assistant", content=content)
        return Message(role="assistant", content=[TextBlock(text=f"answer {n}")])


def policy_provider(policy: Callable[[ProviderRequest], Message] | None = None, **kw: Any) -> ScriptedProvider:
    p = policy or LookupPolicy()
    return ScriptedProvider(replies=[p] * 1000, **kw)


def lookup(q: str) -> str:
    """Look something up.

    Args:
        q: what to look up
    """
    return f"facts about {q}"


async def converse(
    agent: Agent, questions: Sequence[str], *, runs: list[str] | None = None, **knobs: Any
) -> list[RunResult]:
    """Run each question replaying all earlier runs of the conversation (oldest first)."""
    ids = list(runs or [])
    results = []
    for q in questions:
        result = await agent.run(q, runs=ids or None, **knobs)
        assert result.status == "success", result
        results.append(result)
        ids.append(result.run_id)
    return results


def unmarked_twin_client(twin: Any) -> Any:
    """An anthropic client of `twin` whose answers lose the twin's header (segue._core.contracts.TWIN_HEADER): the bytes
    a vendor would send, so a test of how a vendor's run is priced and shown can run offline."""
    import anthropic
    import httpx2

    from segue._core.contracts import TWIN_HEADER

    def answer(request: httpx2.Request) -> httpx2.Response:
        got = twin.handle(request.method, request.url.path, dict(request.headers), request.content)
        return httpx2.Response(got.status, headers=[h for h in got.headers if h[0] != TWIN_HEADER], content=got.body)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    return anthropic.AsyncAnthropic(api_key="sk-ant-test", http_client=http, max_retries=0)


def catalog_layer(
    folder: Path, llm: dict[str, Any], *, file: str = "layer.json", model: str = "claude-sonnet-4-6"
) -> Catalog:
    """The packaged catalog with a test layer in `folder/file` on top: `llm` keys on `model`'s Anthropic row."""
    row = {
        "model": model,
        "vendor": "anthropic",
        "role": "inference_provider",
        "priority": 100,
        "api_name": model,
        "configuration": {"llm": llm},
    }
    doc = {"$schema": "../schemas/catalog.schema.json", "version": 2, "model_vendors": [row]}
    (folder / file).write_text(json.dumps(doc))
    return Catalog.load(extra_dirs=[folder], env=False)


def state_text(state: RuntimeState) -> str:
    return f"iteration {state.iteration} of {state.max_iterations}; tokens so far {state.usage_so_far.input_tokens}"


def script() -> list[Any]:
    return [call("lookup", {"q": "a"}, id="c1"), call("lookup", {"q": "b"}, id="c2"), text("done")]
