"""segue runs as DBOS workflows (`pip install 'segue[dbos]'`).

`DBOSAgent(agent)` registers one DBOS workflow for the agent (so build it before `DBOS.launch()`, like any
`@DBOS.workflow`). Each run is a workflow whose id is the run's id; each model call and each tool call is a DBOS
step. A step records its outcome in segue's store (the journal of segue.run.loop) and returns a reference to it
(segue.run.steps.StepRef: the run, the iteration, the call id), which is all DBOS keeps: DBOS's system database
grows with the number of steps, never with the conversation's length.

A paused run resumes as a workflow of its own (`DBOSAgent.resume`), whose steps are the resumed part's model
calls and tool calls. Its id names the pause it continues (`<run id>:resume:<seq of the RUN_PAUSED event>`) and is
started with DBOS's reuse policy "reject": the same pause is never resumed twice, while each later pause of the run
resumes under an id of its own.

When DBOS recovers a workflow (at `DBOS.launch()` in the process that takes over from a dead one), the run
continues through segue's recovery (segue.run.recovery): finished model calls are read back from segue's store and
never sent again, finished tool calls are not run again, a call in flight runs again only if its tool is
`retry_safe`. DBOS decides when: its recovery means the executor that ran the workflow is gone, so the run's lease
is taken over from that holder without waiting for it to lapse (a holder that was only stalled loses it and writes
nothing more). A lease names the workflow that holds it (`dbos-<digest of the workflow id>:...`): a workflow takes
over only its own executions' lease, never the run's lease of a later resume. The steps the journal holds are told
to DBOS first, in the order they ran (a resume's from its pause on), so its step numbers stay those of the first
execution.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from dbos import DBOS, SetWorkflowID, error
from ulid import ULID

from segue.agent import Agent
from segue.errors import RunStateError
from segue.generated import RunEvent, RunResult
from segue.run.pipeline import last_result
from segue.run.state import stored_result
from segue.run.steps import StepRef
from segue.store.leases import owned_by
from segue.store.records import DEFAULT_TENANT
from segue.store.run_store import RunStore

T = TypeVar("T")
_RUN = inspect.signature(Agent.run)

#: The DBOS step names of a run's steps (`DBOS.list_workflow_steps` shows them).
MODEL_STEP = "segue.model_call"
TOOL_STEP = "segue.tool_call"


class DBOSSteps:
    """Runs a run's steps as DBOS steps (segue.run.steps.Steps), inside the workflow `workflow_id`: the run's, or a
    resume's, which began at the pause of iteration `resumed_at` (its steps: the round it ran there, when
    `resumed_round`, then every later one)."""

    def __init__(self, workflow_id: str, *, resumed_at: int = 0, resumed_round: bool = False) -> None:
        # The lease names the workflow: DBOS's recovery of it takes over only a lease of its own executions.
        self.engine = f"dbos-{hashlib.sha256(workflow_id.encode()).hexdigest()[:10]}"
        self.resumed_at = resumed_at
        self.resumed_round = resumed_round

    def holds(self, owner: str | None) -> bool:
        """Whether the lease token `owner` is one of this workflow's executions'."""
        return owned_by(owner, self.engine)

    async def model_call(self, ref: StepRef, step: Callable[[], Awaitable[T]]) -> T:
        return await _step(MODEL_STEP, ref, step)

    async def tool_call(self, ref: StepRef, step: Callable[[], Awaitable[object]]) -> None:
        await _step(TOOL_STEP, ref, step)

    async def journaled(self, refs: Sequence[StepRef]) -> None:
        for ref in [r for r in refs if self._ours(r)]:

            async def reference(ref: StepRef = ref) -> dict[str, str | int]:
                return ref.as_json()  # its outcome is in segue's store already: nothing runs again

            await DBOS.run_step_async({"name": _name(ref)}, reference)

    def _ours(self, ref: StepRef) -> bool:
        """A step this workflow took (a resume's: from its pause on; a run's: every one)."""
        if ref.iteration > self.resumed_at:
            return True
        return ref.kind == "tool_call" and ref.iteration == self.resumed_at and self.resumed_round


def resume_workflow_id(run_id: str, pause: int) -> str:
    """The id of the workflow that resumes the run's pause whose RUN_PAUSED event has seq `pause`."""
    return f"{run_id}:resume:{pause}"


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

    Build it before `DBOS.launch()` (it registers the workflows `segue.run.<name>` and `segue.resume.<name>`), in
    every process that may recover the agent's runs. `deps` is handed to the tools that take a RunContext, in runs
    started, resumed and recovered here (it is never stored)."""

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
        # The workflows started here, whose result `result` / `resume` take from this process (by workflow id).
        self._started: set[str] = set()
        self._results: dict[str, RunResult] = {}

        async def workflow(run_id: str, tenant_id: str, arguments: dict[str, Any]) -> dict[str, str]:
            return await self._workflow(run_id, tenant_id, arguments)

        async def resume_workflow(run_id: str, tenant_id: str, resumed: dict[str, Any]) -> dict[str, str]:
            return await self._resume_workflow(run_id, tenant_id, resumed)

        self.workflow = DBOS.workflow(name=f"segue.run.{self.name}")(workflow)
        self.resume_workflow = DBOS.workflow(name=f"segue.resume.{self.name}")(resume_workflow)

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

    async def resume(
        self,
        run_id: str,
        *,
        approved: bool | Mapping[str, bool] = True,
        tool_results: Mapping[str, str] | None = None,
        tenant_id: str = DEFAULT_TENANT,
    ) -> RunResult:
        """`Agent.resume` as a DBOS workflow whose steps are the resumed run's model calls and tool calls (`deps`
        are DBOSAgent's). A run that is not paused, unknown or another tenant's, or approvals and results that name
        calls it does not wait on, raise Agent.resume's error before any workflow starts, with nothing written.

        The workflow's id is `<run id>:resume:<seq of the RUN_PAUSED event>`: one workflow per pause, so resuming the
        same pause twice never runs it twice (the second gets RunStateError(reason="already_resumed")), and if the
        process dies, DBOS's recovery continues the resumed run from segue's journal like a run's."""
        pipeline = self.agent._pipeline
        resumption = await pipeline.resumption(run_id, approved, tool_results, tenant_id, deps=self.deps)
        stored = resumption.stored
        workflow_id = resume_workflow_id(stored.run_id, resumption.pause)
        resumed = {
            "pause": resumption.pause,
            "iteration": resumption.iteration,
            "round": bool(resumption.waiting),  # a pause with calls pending resumes with their round
            "waiting": list(resumption.waiting),
            "approved": approved if isinstance(approved, bool) else dict(approved),
            "tool_results": dict(tool_results) if tool_results is not None else None,
        }
        self._started.add(workflow_id)
        try:
            with SetWorkflowID(workflow_id, workflow_id_reuse_policy="reject"):
                handle: Any = await DBOS.start_workflow_async(
                    self.resume_workflow, stored.run_id, stored.tenant_id, resumed
                )
        except error.DBOSWorkflowIDInUseError as e:
            self._started.discard(workflow_id)
            raise RunStateError(
                f"run {stored.run_id} was resumed by another request already (its workflow {workflow_id} is "
                f"{e.workflow_status})",
                run_id=stored.run_id,
                reason="already_resumed",
            ) from e
        await handle.get_result()
        return await self._result(workflow_id, stored.run_id, stored.tenant_id)

    async def result(self, run_id: str, *, tenant_id: str = DEFAULT_TENANT) -> RunResult:
        """The result of a run this agent ran as a workflow: from this process when it ran here, else from the
        store."""
        return await self._result(run_id, run_id, tenant_id)

    async def _result(self, workflow_id: str, run_id: str, tenant_id: str) -> RunResult:
        found = self._results.pop(workflow_id, None)
        if found is not None:
            self._started.discard(workflow_id)
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
        steps = DBOSSteps(run_id)
        events: Any
        if held is None:
            request = await self.agent._validate(dict(arguments), self.deps)
            events = pipeline.run(request, streaming=False, run_id=run_id, steps=steps)
        elif held.status != "running":
            return {"run_id": run_id, "status": held.status}
        elif not steps.holds(held.owner) and _paused_once(await self._stored_meta(run_id)):
            # This workflow ended at the run's pause (its process died before DBOS noted that); a resume holds it.
            return {"run_id": run_id, "status": "waiting_approval"}
        else:  # (a run another process recovered outside DBOS is refused, and left to it)
            events = pipeline.recover(run_id, tenant_id, streaming=False, deps=self.deps, steps=steps)
        return await self._finished(run_id, events)

    async def _resume_workflow(self, run_id: str, tenant_id: str, resumed: Mapping[str, Any]) -> dict[str, str]:
        """A resume's workflow: the paused run resumed, or (on DBOS's recovery) the resumed run continued from
        segue's journal, or where its journal says it got to (its end, or a later pause, which a workflow of its
        own resumes)."""
        pipeline = self.agent._pipeline
        workflow_id = resume_workflow_id(run_id, resumed["pause"])
        steps = DBOSSteps(workflow_id, resumed_at=resumed["iteration"], resumed_round=resumed["round"])
        held = await asyncio.to_thread(self.store.leases.held, run_id)
        assert held is not None  # checked before the workflow started, and runs are never deleted
        events: AsyncIterator[RunEvent]
        if held.status == "waiting_approval":
            resumption = await pipeline.resumption(
                run_id, resumed["approved"], resumed["tool_results"], tenant_id, deps=self.deps
            )
            if resumption.pause != resumed["pause"]:  # it paused again since: this resume's part ended there
                return {"run_id": run_id, "status": "waiting_approval"}
            events = pipeline.resumed(resumption, streaming=False, steps=steps)
        elif held.status == "running" and steps.holds(held.owner):  # this workflow's process died: continue it
            events = pipeline.recover(run_id, tenant_id, streaming=False, deps=self.deps, steps=steps)
        elif held.status == "running" and _paused_since(await self._stored_meta(run_id), resumed):
            # This workflow's part ended at a later pause (its process died before DBOS noted that); a resume of
            # that pause holds the run now.
            return {"run_id": run_id, "status": "waiting_approval"}
        elif held.status == "running":
            raise RunStateError(
                f"run {run_id} was resumed by another request already (outside workflow {workflow_id})",
                run_id=run_id,
                reason="already_resumed",
            )
        else:
            return {"run_id": run_id, "status": held.status}
        return await self._finished(workflow_id, events)

    async def _finished(self, workflow_id: str, events: AsyncIterator[RunEvent]) -> dict[str, str]:
        result = await last_result(events)
        if workflow_id in self._started:  # (a workflow DBOS recovered here is read from the store when asked for)
            self._results[workflow_id] = result
        return {"run_id": result.run_id, "status": result.status}

    async def _stored_meta(self, run_id: str) -> Any:
        found = (await asyncio.to_thread(self.store.load_runs, [run_id])).get(run_id)
        return found.meta if found is not None else None


def _paused_once(meta: Any) -> bool:
    """Whether a run's journal holds a pause (its pending calls stay in its meta once it is resumed)."""
    return meta is not None and meta.segue_pending is not None


def _paused_since(meta: Any, resumed: Mapping[str, Any]) -> bool:
    """Whether the pause a run's journal holds last is not the one a resume's workflow resumed (`resumed`)."""
    pending = meta.segue_pending if meta is not None else None
    return pending is not None and (pending.iteration, list(pending.calls)) != (
        resumed["iteration"],
        resumed["waiting"],
    )
