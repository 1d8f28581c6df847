"""The agent of the kill-and-recover tests (tests/run/test_recovery.py), run to its end or SIGKILLed at a chosen
point in a child process (`python durable_agent.py URL LOG_DIR POINT`), and recovered by the test's process.

Every request the provider serves is appended to LOG_DIR/served.jsonl (its exact body) once the answer exists, and
every tool invocation to LOG_DIR/tools.jsonl as it starts: the counts the tests check survive the kill.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from segue import Agent, RunStore, tool
from segue._core.contracts import ProviderRequest, ProviderResponse
from segue.generated import Message, TextBlock, ToolCallBlock, ToolResultBlock
from segue.testing import ScriptedProvider

LEASE_SECONDS = 0.5


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def log(folder: Path, name: str, entry: Any) -> None:
    with open(folder / name, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def reply(request: ProviderRequest) -> Message:
    """lookup first, then charge, then the answer quoting every tool result the model saw."""
    results = [b for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]
    if not results:
        return Message(role="assistant", content=[ToolCallBlock(id="c1", name="lookup", arguments={"q": "order 7"})])
    if len(results) == 1:
        return Message(role="assistant", content=[ToolCallBlock(id="c2", name="charge", arguments={"cents": 500})])
    return Message(role="assistant", content=[TextBlock(text="done: " + " | ".join(r.content for r in results))])


class Logged(ScriptedProvider):
    """Answers by `reply`, logs each served request; `die_on` (a call number) is killed mid-call."""

    def __init__(self, folder: Path, die_on: int | None = None) -> None:
        super().__init__(replies=[reply] * 10, vendor="anthropic", model="claude-sonnet-4-6")
        self.folder = folder
        self.die_on = die_on
        self.calls = 0

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        self.calls += 1
        if self.calls == self.die_on:
            die()  # the request was sent, its answer never came
        response = await super().complete(request)
        log(self.folder, "served.jsonl", response.request_body)
        return response


def build(url: str, folder: Path, point: str | None = None) -> Agent:
    @tool(retry_safe=True)
    def lookup(q: str) -> str:
        """Look an order up (read-only: safe to repeat)."""
        log(folder, "tools.jsonl", {"tool": "lookup", "q": q})
        if point == "tool_safe" and _count(folder, "lookup") == 1:
            die()
        return f"{q}: shipped"

    @tool
    def charge(cents: int) -> str:
        """Charge the customer (not safe to repeat)."""
        log(folder, "tools.jsonl", {"tool": "charge", "cents": cents})
        if point == "tool":
            die()
        return f"charged {cents}"

    provider = Logged(folder, die_on=2 if point == "model" else None)
    store = RunStore(url)
    agent = Agent(provider, "You settle orders.", [lookup, charge], store, lease_seconds=LEASE_SECONDS)
    recorder = agent._pipeline.recorder
    if point == "between":  # the second response is stored; its tool never starts
        record_response = recorder.record_response

        async def then_die(state: Any, interaction: Any, served: Any) -> None:
            await record_response(state, interaction, served)
            if interaction.iteration == 2:
                die()

        recorder.record_response = then_die  # type: ignore[method-assign]
    if point == "final":  # inside the transaction that records the run's end, before it commits
        update_run = store._update_run

        def update_then_die(run_id: str, update: dict[Any, Any], *args: Any, **kw: Any) -> int:
            changed = update_run(run_id, update, *args, **kw)
            if store.models.AgentRun.status in update:
                die()
            return changed

        store._update_run = update_then_die  # type: ignore[method-assign]
    return agent


def _count(folder: Path, name: str) -> int:
    path = folder / "tools.jsonl"
    if not path.exists():
        return 0
    return sum(json.loads(line)["tool"] == name for line in path.read_text().splitlines())


if __name__ == "__main__":
    url, folder, point = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    asyncio.run(build(url, folder, point).run("settle order 7"))
