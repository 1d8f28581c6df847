"""Making a compaction: a run of its own, before the turn that found it due (segue.replay.compaction).

Its request is the conversation's next request with the summary instruction in place of the user's input: the
same system prompt, stable context, tools and model settings, the replayed region exactly as the turn would send
it (the compaction in use, then the runs after it in full), so it extends what the last turn sent and the
summarizer reads the conversation from the cache instead of paying for it again. It is planned, recorded, priced
and traced like any run (its row marked `segue.compaction`: the runs it stands for), with one model call: no tool
runs for it, no history= and no structured output (the summary is text). The turn is then planned again with the
new compaction in place of the runs it stands for.

A compaction that fails (a vendor error, no text) leaves the conversation as it was: the turn replays the
compaction in use and the runs after it, with a `compacted` warning naming the failed run, and the next turn tries
again.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Protocol

import attrs
from ulid import ULID

from segue.generated import CompactionRef, ReplayWarning, RunEvent
from segue.replay.compaction import instruction
from segue.run.config import AgentConfig
from segue.run.conversation import user_message
from segue.run.guard import Guard
from segue.run.idempotency import fingerprint_of
from segue.run.loop import Loop
from segue.run.plan import Planner, RunPlan
from segue.run.recorder import Recorder
from segue.run.request import RunRequest
from segue.run.state import RunState
from segue.run.tool_calls import ToolRunner
from segue.telemetry import RunTrace

log = logging.getLogger("segue.replay")


class Pipeline(Protocol):
    """What a compaction needs of the run pipeline (segue.run.pipeline.Pipeline), which starts it."""

    agent: AgentConfig
    planner: Planner
    recorder: Recorder
    tools: ToolRunner
    guard: Guard

    def trace(self, request: RunRequest) -> RunTrace: ...

    def started(self, state: RunState) -> None: ...

    def until_stopped(
        self, state: RunState, events: AsyncIterator[RunEvent], *, first: RunEvent | None = None
    ) -> AsyncGenerator[RunEvent, None]: ...


def summary_request(request: RunRequest) -> RunRequest:
    """The request of the compaction a turn found due: the turn's, with the summary instruction in place of the
    user's input, and nothing a summary does not take (history=, structured output, idempotency, metadata)."""
    policy = request.params.compaction
    assert policy is not None
    params = attrs.evolve(
        request.params,
        input=instruction(policy),
        idempotency_key=None,
        metadata={},
        history=[],
        output_type=None,
        output_repairs=None,
    )
    return attrs.evolve(request, params=params, output=None, retry_of=None)


async def summary_of(planner: Planner, request: RunRequest, plan: RunPlan) -> tuple[RunRequest, RunPlan]:
    """The summary request of the compaction `plan` found due, and its plan: the conversation replayed as the turn
    would send it without the new compaction (the one in use, then the runs after it). Agent.prewarm warms this
    prefix when a compaction is due (segue.run.prewarm), since it is what the next turn sends first."""
    asked = summary_request(request)
    in_use = plan.summary.compaction if plan.summary is not None else None
    return asked, await planner.plan(asked, compaction=in_use, making=True)


class Compactor:
    """Makes the compactions of one agent's conversations."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        agent = pipeline.agent
        # One model call: a summary that asks for a tool ends the compaction run instead of running the tool.
        self.loop = Loop(attrs.evolve(agent, max_iterations=1), pipeline.recorder, pipeline.tools, pipeline.guard)

    async def before(self, request: RunRequest, plan: RunPlan) -> RunPlan:
        """The turn's plan once the compaction it found due is made: planned again with it, or, when it failed,
        the plan it had, with a warning."""
        made, failure = await self.make(request, plan)
        if made is not None:
            replanned = await self.pipeline.planner.plan(request, compaction=made)
            # The prefix moved on purpose: the turn does not continue the last response's cache, so it names none
            # (no cache collapse is reported for a move the policy made).
            return attrs.evolve(replanned, previous_response=None)
        assert failure is not None
        summaries = {p: attrs.evolve(s, warnings=[*s.warnings, failure]) for p, s in plan.summaries.items()}
        return attrs.evolve(plan, summaries=summaries)

    async def make(self, request: RunRequest, plan: RunPlan) -> tuple[CompactionRef | None, ReplayWarning | None]:
        knobs = request.knobs
        assert knobs is not None
        summary_request, summary_plan = await summary_of(self.pipeline.planner, request, plan)
        text = summary_request.params.input
        run_id = str(ULID())
        makes = CompactionRef(run_id=run_id, runs=len(knobs.runs), first=knobs.runs[0], last=knobs.runs[-1])
        summary_plan = attrs.evolve(summary_plan, makes=makes)
        state = RunState(
            run_id=run_id,
            request=summary_request,
            plan=summary_plan,
            own=[user_message(text)],
            replay=summary_plan.summary,
            trace=self.pipeline.trace(summary_request),
        )
        await self.pipeline.recorder.start(state, fingerprint_of(summary_request, self.pipeline.agent.config_hash))
        self.pipeline.started(state)
        result = None
        async for event in self.pipeline.until_stopped(state, self.loop.run(state, streaming=False)):
            result = event.result or result
        if result is not None and result.status == "success" and result.answer:
            return makes, None
        why = (result.error if result is not None else None) or "it ended without a summary"
        message = (
            f"compaction {run_id} of the first {makes.runs} runs failed ({why}); replayed the compaction in use and "
            "the runs after it instead, and the next turn tries again"
        )
        log.warning("replay: %s", message)
        return None, ReplayWarning(run_id=run_id, cause="compacted", message=message)
