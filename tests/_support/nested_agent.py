"""The agents of the killed-parent test (tests/subagents/test_killed_parent.py): a lead that delegates to a worker
agent offered as a tool. Run as `python nested_agent.py URL LOG_DIR`, the worker's tool SIGKILLs the process on its
first invocation, while the worker's sub-run is running inside the lead's tool call; the test's process recovers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from segue import Agent, RunStore, tool
from segue._core.contracts import ProviderRequest
from segue.generated import Message, TextBlock, ToolCallBlock, ToolResultBlock
from segue.testing import ScriptedProvider

LEASE_SECONDS = 0.5


def results(request: ProviderRequest) -> list[str]:
    return [b.content for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)]


def lead_reply(request: ProviderRequest) -> Message:
    seen = results(request)
    if not seen:
        return Message(role="assistant", content=[ToolCallBlock(id="lead_1", name="worker", arguments={"task": "do"})])
    return Message(role="assistant", content=[TextBlock(text="lead: " + seen[0])])


def worker_reply(request: ProviderRequest) -> Message:
    seen = results(request)
    if not seen:
        return Message(role="assistant", content=[ToolCallBlock(id="w_1", name="work", arguments={})])
    return Message(role="assistant", content=[TextBlock(text="worked: " + seen[0])])


def build(url: str, folder: Path, *, die: bool) -> Agent:
    @tool(retry_safe=True)
    def work() -> str:
        """Do the work (safe to repeat)."""
        with open(folder / "work.log", "a", encoding="utf-8") as f:
            f.write("work\n")
            f.flush()
            os.fsync(f.fileno())
        if die:
            os.kill(os.getpid(), signal.SIGKILL)
        return "ok"

    store = RunStore(url)
    worker = Agent(
        ScriptedProvider(replies=[worker_reply] * 5), "Work.", [work], store, name="worker", lease_seconds=LEASE_SECONDS
    )
    return Agent(
        ScriptedProvider(replies=[lead_reply] * 5),
        "Lead.",
        [worker.as_tool(description="Hand work over.")],
        store,
        name="lead",
        lease_seconds=LEASE_SECONDS,
    )


if __name__ == "__main__":
    asyncio.run(build(sys.argv[1], Path(sys.argv[2]), die=True).run("start"))
