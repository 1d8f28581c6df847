"""segue runs as DBOS workflows (`pip install 'segue[dbos]'`).

`DBOSAgent(agent)` registers one DBOS workflow for the agent (so build it before `DBOS.launch()`, like any
`@DBOS.workflow`). Each run is a workflow whose id is the run's id; each model call and each tool call is a DBOS
step. A step records its outcome in segue's store (the journal of segue.run.loop) and returns a reference to it
(segue.run.steps.StepRef: the run, the iteration, the call id), which is all DBOS keeps: DBOS's system database
grows with the number of steps, never with the conversation's length.

When DBOS recovers a workflow (at `DBOS.launch()` in the process that takes over from a dead one), the run
continues through segue's recovery (segue.run.recovery): finished model calls are read back from segue's store and
never sent again, finished tool calls are not run again, a call in flight runs again only if its tool is
`retry_safe`. DBOS decides when: its recovery means the executor that ran the run is gone, so the run's lease is
taken over from that holder without waiting for it to lapse (a holder that was only stalled loses it and writes
nothing more). The steps the journal holds are told to DBOS first, in the order they ran, so its step numbers stay
those of the first execution.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from dbos import DBOS, SetWorkflowID
from ulid import ULID

from segue.agent import Agent
from segue.errors import RunStateError
from segue.generated import RunEvent, RunResult
from segue.run.state import stored_result
from segue.run.steps import StepRef
from segue.store.records import DEFAULT_TENANT
from segue.store.run_store import RunStore

T = TypeVar("T")
_RUN = inspect.signature(Agent.run)

#: The DBOS step names of a run's steps (`DBOS.list_workflow_steps` shows them).
MODEL_STEP = "segue.model_call"
TOOL_STEP = "segue.tool_call"


class DBOSSteps:
    """Runs a run's steps as DBOS steps (segue.run.steps.Steps), inside the run's workflow."""

    engine = "dbos"

    async def model_call(self, ref: StepRef, step: Callable[[], Awaitable[T]]) -> T:
        return await _step(MODEL_STEP, ref, step)

    async def tool_call(self, ref: StepRef, step: Callable[[], Awaitable[object]]) -> None:
        await _step(TOOL_STEP, ref, step)

    async def journaled(self, refs: Sequence[StepRef]) -> None:
        for ref in refs:

            async def reference(ref: StepRef = ref) -> dict[str, str | int]:
                return ref.as_json()  # its outcome is in segue's store already: nothing runs again

            await DBOS.run_step_async({"name": _name(ref)}, reference)


def _name(ref: StepRef) -> str:
    return MODEL_STEP if ref.kind == "model_call" else TOOL_STEP


async def _step(name: str, ref: StepRef, step: Callable[[], Awaitable[T]]) -> T:
    """`step` as the DBOS step `name`: its value stays in this process, DBOS keeps the reference."""
    done: list[T] = []

    async def run() -> dict[str, str | int]:
        done.append(await step())
        return ref.as_json()

    await DBOS.run_step_async({"name": name, "retries_allowed": False}, run)
    if not done:
        raise RuntimeError(
            f"run {ref.run_id}: DBOS's journal holds the {name} step of iteration {ref.iteration} as finished, but "
            "the run reached it again: recover the run with the agent configuration that ran it"
        )
    return done[0]


class DBOSAgent:
    """An Agent whose runs are DBOS workflows: each model call and each tool call a DBOS step (docs/durability.md).

    Build it before `DBOS.launch()` (it registers the workflow `segue.run.<name>`), in every process that may
    recover the agent's runs. `deps` is handed to the tools that take a RunContext, in runs started here and in
    those DBOS recovers here (it is never stored)."""

    def __init__(self, agent: Agent, *, name: str | None = None, deps: Any = None) -> None:
        store = agent._pipeline.agent.store
        if store is None:
            raise ValueError(
                f"DBOSAgent needs an agent with a RunStore (agent {agent.name!r} has none): the run's journal is "
                "segue's store, and DBOS keeps references into it"
            )
        self.agent = agent
        self.store: RunStore = store
        self.name = name or agent.name
        self.deps = deps
        self._started: set[str] = set()  # the runs started here, whose result `result` takes from this process
        self._results: dict[str, RunResult] = {}

        async def workflow(run_id: str, tenant_id: str, arguments: dict[str, Any]) -> dict[str, str]:
            return await self._workflow(run_id, tenant_id, arguments)

        self.workflow = DBOS.workflow(name=f"segue.run.{self.name}")(workflow)

    async def run(self, user_input: str, **params: Any) -> RunResult:
        """`Agent.run` as a DBOS workflow (the same keyword arguments but `deps`, which is DBOSAgent's). Bad input
        raises before the workflow starts. The result is the run's; its id is the workflow's."""
        run_id = await self.start(user_input, **params)
        handle: Any = await DBOS.retrieve_workflow_async(run_id)
        await handle.get_result()
        return await self.result(run_id, tenant_id=params.get("tenant_id", DEFAULT_TENANT))

    async def start(self, user_input: str, **params: Any) -> str:
        """Start the run as a DBOS workflow and return its id (the run's and the workflow's) without waiting; its
        result: `await dbos_agent.result(run_id)` once `DBOS.retrieve_workflow(run_id)` finished."""
        if "deps" in params:
            raise TypeError("DBOSAgent.run takes no deps=: pass them to DBOSAgent(agent, deps=...)")
        # Agent.run's own arguments, its defaults filled in (an unknown keyword is its TypeError).
        bound = _RUN.bind(self.agent, user_input, **params)
        bound.apply_defaults()
        arguments = {k: v for k, v in bound.arguments.items() if k not in ("self", "deps")}
        await self.agent._validate(arguments, self.deps)  # bad input: nothing written, no workflow
        run_id = str(ULID())
        tenant_id = str(arguments["tenant_id"])
        self._started.add(run_id)
        with SetWorkflowID(run_id):
            await DBOS.start_workflow_async(self.workflow, run_id, tenant_id, arguments)
        return run_id

    async def result(self, run_id: str, *, tenant_id: str = DEFAULT_TENANT) -> RunResult:
        """The result of a run this agent ran as a workflow: from this process when it ran here, else from the
        store."""
        found = self._results.pop(run_id, None)
        if found is not None:
            self._started.discard(run_id)
            return found
        detail = await asyncio.to_thread(self.store.get_run, run_id, tenant_id=tenant_id)
        if detail is None:
            raise RunStateError(f"no run {run_id} for tenant {tenant_id!r}", run_id=run_id, reason="not_found")
        return stored_result(detail)

    async def _workflow(self, run_id: str, tenant_id: str, arguments: Mapping[str, Any]) -> dict[str, str]:
        """The run's workflow: a new run, or (on DBOS's recovery) the run continued from segue's journal, or the
        end its journal already holds (the process died after the run's end was written)."""
        pipeline = self.agent._pipeline
        held = await asyncio.to_thread(self.store.leases.held, run_id)
        steps = DBOSSteps()
        events: Any
        if held is None:
            request = await self.agent._validate(dict(arguments), self.deps)
            events = pipeline.run(request, streaming=False, run_id=run_id, steps=steps)
        elif held.status == "running":
            events = pipeline.recover(run_id, tenant_id, streaming=False, deps=self.deps, steps=steps)
        else:
            return {"run_id": run_id, "status": held.status}
        result = await _last_result(events)
        if run_id in self._started:  # (a run DBOS recovered here is read from the store when asked for)
            self._results[run_id] = result
        return {"run_id": result.run_id, "status": result.status}


async def _last_result(events: Any) -> RunResult:
    result: RunResult | None = None
    async for event in events:
        if isinstance(event, RunEvent) and event.result is not None:
            result = event.result
    if result is None:
        raise RuntimeError("the run ended without a result event")
    return result
