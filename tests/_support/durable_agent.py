"""The agent of the kill-and-recover tests (tests/run/test_recovery.py, test_recovery_dbos.py), run to its end or
SIGKILLed at a chosen point in a child process, and recovered by another process.

`python durable_agent.py URL LOG_DIR TWIN_URL POINT [DBOS_URL DBOS_SCHEMA]` (or `main([URL, ...])` in a child
forked from a parent that imported this module: tests._support.recovery.child): the agent talks to segue's twin over
loopback HTTP (the twin runs in the test's process, so what it served survives the kill: its `exchanges`), and
every tool invocation is appended to LOG_DIR/tools.jsonl as it starts (the tool's own invocation log). With
DBOS_URL the run is a DBOS workflow (segue.durable.dbos); POINT `recover` then launches DBOS in a new process,
which recovers the pending workflow, and prints the run's result and DBOS's steps as JSON. The RESUME_POINTS
resume the store's paused run (its charge approved) as a DBOS workflow and die in the resumed part; `recover_resume`
recovers that workflow. POINT `image` runs the Shelf conversation (a tool that returns an image) and dies once that
tool's result is journaled, its round's other call still running; `approval_image` the same with a charge that
requires approval beside the snapshot (paused for it, resumed with it approved, killed during the charge).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic

from segue import Agent, RunStore, tool
from segue._core.contracts import ProviderRequest, ProviderResponse, StreamDone, StreamEvent
from segue.generated import Base64ImageSource, ImageBlock
from segue.providers.anthropic import AnthropicProvider
from segue.tools import ToolOutput
from segue_twin import TWIN_API_KEY, AssistantTurn, ConversationView, PlannedCall, Twin
from segue_twin.server import TwinServer, serve

LEASE_SECONDS = 0.5
MODEL = "claude-sonnet-4-6"
POINTS = ["model", "between", "tool", "tool_safe", "final"]
#: Where a resume through DBOS dies: its first model call served (its answer lost), or its end being written.
RESUME_POINTS = ["resume_model", "resume_final"]
METADATA = {"desk": "north"}


class Settle:
    """The twin's model: lookup first, then charge, then the answer quoting every tool result it saw."""

    def respond(self, view: ConversationView) -> AssistantTurn:
        results = view.tool_results()
        if not results:
            return AssistantTurn(tool_calls=(PlannedCall(name="lookup", arguments={"q": "order 7"}),))
        if len(results) == 1:
            return AssistantTurn(tool_calls=(PlannedCall(name="charge", arguments={"cents": 500}),))
        return AssistantTurn(text="done: " + " | ".join(r.content for r in results))


class Shelf:
    """The twin's model for the image round: a snapshot of the shelf and a lookup (or, `charging`, a charge) in one
    round, then the answer."""

    def __init__(self, *, charging: bool = False) -> None:
        self.beside = PlannedCall(name="charge", arguments={"cents": 500}) if charging else None

    def respond(self, view: ConversationView) -> AssistantTurn:
        results = view.tool_results()
        if not results:
            snapshot = PlannedCall(name="snapshot", arguments={"shelf": "B2"})
            beside = self.beside or PlannedCall(name="lookup", arguments={"q": "order 7"})
            return AssistantTurn(tool_calls=(snapshot, beside))
        return AssistantTurn(text="seen: " + " | ".join(r.content for r in results))


#: The image the snapshot tool returns: a PNG's signature, its IHDR (2 x 2 pixels) and some bytes.
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x02\x00\x00\x00\x02\x08\x06\x00\x00\x00" + b"\x07" * 64


def twin_server(policy: Any = None) -> TwinServer:
    """A fresh twin (its ids start again at 1) serving on loopback; `policy`: its model (Settle by default)."""
    return serve(twin=Twin(policy=policy or Settle()))


def served(server: TwinServer) -> list[Any]:
    """The request bodies the twin answered, in order."""
    return [e.request for e in server.twin.exchanges if e.status == 200]


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def log(folder: Path, name: str, entry: Any) -> None:
    with open(folder / name, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


class Killable(AnthropicProvider):
    """The Anthropic driver on the twin; killed on call `die_on` once the twin answered it (its answer is lost)."""

    def __init__(self, twin_url: str, die_on: int | None = None) -> None:
        client = anthropic.AsyncAnthropic(base_url=twin_url, api_key=TWIN_API_KEY, max_retries=0)
        super().__init__(MODEL, client=client)
        self.die_on = die_on
        self.calls = 0

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        self.calls += 1
        response = await super().complete(request)
        if self.calls == self.die_on:
            die()  # the request was served; its answer never reached the journal
        return response

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        async for item in super().stream(request):
            if isinstance(item, StreamDone) and self.calls == self.die_on:
                die()  # streamed to its end; its answer never reached the journal
            yield item


def build(
    url: str, folder: Path, twin_url: str, point: str | None = None, *, approval: bool = False, images: bool = False
) -> Agent:
    """The agent; `point`: where it dies; `approval`: charge requires approval (and dies as at point `tool`);
    `images`: it has the snapshot tool too (the Shelf conversation)."""
    approval = approval or point in ("approval", "approval_image", *RESUME_POINTS)
    images = images or point in ("image", "approval_image")

    @tool(retry_safe=True)
    def lookup(q: str) -> str:
        """Look an order up (read-only: safe to repeat)."""
        log(folder, "tools.jsonl", {"tool": "lookup", "q": q})
        if point == "tool_safe" and _count(folder, "lookup") == 1:
            die()
        if point == "image":
            time.sleep(60)  # in flight when the process dies, once the snapshot's result is journaled
        return f"{q}: shipped"

    def snapshot(shelf: str) -> ToolOutput:
        """A photo of a shelf."""
        log(folder, "tools.jsonl", {"tool": "snapshot", "shelf": shelf})
        while point == "approval_image" and _count(folder, "charge") == 0:
            time.sleep(0.01)  # the charge beside it is running before the snapshot finishes
        image = ImageBlock(source=Base64ImageSource(media_type="image/png", data=base64.b64encode(PNG).decode()))
        return ToolOutput(content=f"shelf {shelf}: photographed", images=(image,))

    def charge(cents: int) -> str:
        """Charge the customer (not safe to repeat)."""
        log(folder, "tools.jsonl", {"tool": "charge", "cents": cents})
        if point in ("tool", "approval"):
            die()
        if point == "approval_image":
            time.sleep(60)  # in flight when the process dies, once the snapshot's result is journaled
        return f"charged {cents}"

    charging = tool(requires_approval=approval)(charge)
    store = RunStore(url)
    provider = Killable(twin_url, die_on={"model": 2, "resume_model": 1}.get(point or ""))
    agent = Agent(
        provider,
        "You settle orders.",
        [lookup, charging, *([tool(snapshot)] if images else [])],
        store,
        lease_seconds=LEASE_SECONDS,
        # The app's state on every request (its metadata): a recovered run's requests carry it as the first did.
        trailing_state=lambda state: f"desk {state.app_state.get('desk')}, iteration {state.iteration}",
    )
    recorder = agent._pipeline.recorder
    if point == "between":  # the second response is stored; its tool never starts
        record_response = recorder.record_response

        async def then_die(state: Any, interaction: Any, meta_updates: Any, events: Any) -> None:
            await record_response(state, interaction, meta_updates, events)
            if interaction.iteration == 2:
                die()

        recorder.record_response = then_die  # type: ignore[method-assign]
    if point in ("image", "approval_image"):  # the snapshot's result is journaled, the call beside it running
        record_tool = recorder.record_tool

        async def record_then_die(state: Any, record: Any, message: Any, images: Any = ()) -> None:
            await record_tool(state, record, message, images)
            if record.name == "snapshot":
                assert message is None and images, "the snapshot was to finish first"
                die()

        recorder.record_tool = record_then_die  # type: ignore[method-assign]
    if point in ("final", "resume_final"):  # inside the transaction that records the run's end, before it commits
        update_run = store._update_run

        def update_then_die(run_id: str, update: dict[Any, Any], *args: Any, **kw: Any) -> int:
            changed = update_run(run_id, update, *args, **kw)
            if update.get(store.models.AgentRun.status, "running") != "running":  # (a start's write sets running)
                die()
            return changed

        store._update_run = update_then_die  # type: ignore[method-assign]
    return agent


async def stream_logged(agent: Agent, folder: Path) -> None:
    """The run streamed, each event's seq and type appended to folder/events.jsonl as it arrives (what a consumer
    of the process that dies received)."""
    async for event in agent.stream("settle order 7", metadata=METADATA):
        log(folder, "events.jsonl", event_entry(event))


def event_entry(event: Any) -> dict[str, Any]:
    return {"seq": event.seq, "type": event.type, "after": event.meta.get("after")}


def _count(folder: Path, name: str) -> int:
    path = folder / "tools.jsonl"
    if not path.exists():
        return 0
    return sum(json.loads(line)["tool"] == name for line in path.read_text().splitlines())


def dbos_config(dbos_url: str, schema: str) -> Any:
    config: dict[str, Any] = {"name": "segue-durable-test", "system_database_url": dbos_url}
    if dbos_url.startswith("postgresql"):
        config["dbos_system_schema"] = schema
    return config


def on_dbos(url: str, folder: Path, twin_url: str, point: str, dbos_url: str, schema: str) -> None:
    from dbos import DBOS

    from segue.durable.dbos import DBOSAgent

    DBOS(config=dbos_config(dbos_url, schema))
    recovering = point in ("recover", "recover_resume")
    durable = DBOSAgent(build(url, folder, twin_url, None if recovering else point, approval=point == "recover_resume"))
    DBOS.launch()  # a process that takes over recovers the pending workflow here
    try:
        if point in RESUME_POINTS:  # the run the test paused, its charge approved
            (paused,) = durable.store.list_runs(status="waiting_approval")
            asyncio.run(durable.resume(paused.run_id, approved=True))
            return
        if not recovering:
            asyncio.run(durable.run("settle order 7", metadata=METADATA))
            return
        (workflow,) = DBOS.list_workflows()
        DBOS.retrieve_workflow(workflow.workflow_id).get_result()
        (run_id,) = {r.run_id for r in durable.store.list_runs()}
        result = asyncio.run(durable.result(run_id))
        steps = [s["function_name"] for s in DBOS.list_workflow_steps(workflow.workflow_id)]
        status = DBOS.get_workflow_status(workflow.workflow_id)
        print(
            json.dumps(
                {
                    "run_id": result.run_id,
                    "status": result.status,
                    "answer": result.answer,
                    "steps": steps,
                    "workflow": status.status if status else None,
                    "workflow_id": workflow.workflow_id,
                }
            )
        )
    finally:
        DBOS.destroy()


async def run_then_resume(agent: Agent) -> Any:
    """The run, paused for the charge's approval, resumed with it approved (in one event loop: the agent's client
    keeps its connections to the twin between the two)."""
    paused = await agent.run("settle order 7", metadata=METADATA)
    assert paused.status == "waiting_approval", paused
    return await agent.resume(paused.run_id, approved=True)


def main(argv: list[str]) -> None:
    url, folder, twin_url, point = argv[0], Path(argv[1]), argv[2], argv[3]
    if len(argv) > 4:
        on_dbos(url, folder, twin_url, point, argv[4], argv[5])
    elif point in ("approval", "approval_image"):  # paused for the charge, resumed with it approved, killed during it
        asyncio.run(run_then_resume(build(url, folder, twin_url, point)))
    elif os.environ.get("SEGUE_TEST_EVENTS"):  # streamed: each event logged (events.jsonl) as it arrives
        asyncio.run(stream_logged(build(url, folder, twin_url, point), folder))
    else:
        asyncio.run(build(url, folder, twin_url, point).run("settle order 7", metadata=METADATA))


if __name__ == "__main__":
    main(sys.argv[1:])
