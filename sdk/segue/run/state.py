"""One run in progress (RunState), and the events a run reports."""

from __future__ import annotations

from typing import Any

import attrs

from segue._core.contracts import ProviderNote, ProviderResponse, ServingPath, WirePrefix
from segue._core.run_text import replay_text
from segue._core.usage import cache_parts
from segue.cache.layout import LayoutPolicy
from segue.cache.notes import RunNotes
from segue.errors import ReplayRunError, RunStateError, ToolSourceError
from segue.generated import (
    CacheCollapse,
    CacheVerdict,
    ChildRun,
    ImageBlock,
    Message,
    PendingApproval,
    PrefixDescriptor,
    ReplaySummary,
    ResponseRef,
    RunCost,
    RunDetail,
    RunEvent,
    RunEventType,
    RunResult,
    RunStatus,
    ServedBy,
    StopReason,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from segue.run.conversation import ZERO_USAGE, tool_calls
from segue.run.lineage import total_cost
from segue.run.plan import RunPlan
from segue.run.request import RunRequest
from segue.run.steps import Steps
from segue.run.window import message_tokens
from segue.telemetry import RunTrace


def _layout(plan: RunPlan) -> LayoutPolicy | None:
    return LayoutPolicy(plan.layout) if plan.layout is not None else None


@attrs.define(kw_only=True)
class RunState:
    """The mutable bookkeeping of one run: its own messages, who served it so far, what it has recorded.

    Everything the loop learns while the run goes on lives here, so that the steps (segue.run.loop, model_call,
    tool_calls, serving, recorder) share one record instead of passing values along, and a resumed or recovered
    run is rebuilt as one of these (segue.run.pipeline `resumed_state`, segue.run.recovery). Each field says why
    it is kept.
    """

    #: The run's id: every row, span and event of the run names it.
    run_id: str
    #: The validated arguments (segue.run.request): the loop reads the run's settings, tenant and limits from it.
    request: RunRequest
    #: The frozen plan (segue.run.plan): the replayed prefix, its summaries per path, the layout, the room.
    plan: RunPlan
    #: This run's messages (its traces) after the plan's prefix: each request sends prefix + these.
    own: list[Message]
    #: The replay summary of the path that served (segue.run.serving): recorded in the run's meta and result.
    replay: ReplaySummary | None
    #: The replayed runs whose reasoning every request so far carried (None: nothing served yet): a later request
    #: may only keep fewer, never bring back reasoning an earlier one went without.
    bound: frozenset[str] | None = None
    #: The model steps taken: the iteration numbers of calls, records and max_iterations.
    iteration: int = 0
    #: Answered, or paused for approval: the loop stops.
    ended: bool = False
    #: The iteration a resumed run was paused at: the loop continues after it, with the decisions.
    resumed_at: int = 0
    #: The run's invoke_agent span (segue.telemetry): chat and tool spans nest in it, the recorder ends it.
    trace: RunTrace = attrs.Factory(RunTrace.off)
    #: The usage summed over the run's calls: the run's result and its running row report it.
    usage: Usage = ZERO_USAGE
    #: The guardrails' placeholder table (segue.run.guard): what a tool's result had masked, restored in what
    #: reaches the app and the tools, for the whole run.
    pii: dict[str, str] = attrs.Factory(dict)
    #: The prefix descriptor, written with the first response (segue.run.serving): the next run's seed compares
    #: with it; kept to write only a change.
    descriptor: PrefixDescriptor | None = None
    #: The run's notes, each kind once (segue.cache.notes): the meta, the result and the events report them.
    notes: RunNotes = attrs.Factory(RunNotes)
    #: This run's traces as stored, in order: the recorder writes only what follows them, never rewrites them.
    persisted: list[Message] = attrs.Factory(list)
    #: Per (path, the replayed runs whose reasoning it keeps): each replayed message as fitted to that path, so the
    #: prefix is fitted once per run, not once per request.
    fitted: dict[tuple[ServingPath, frozenset[str]], dict[int, tuple[Message, Message]]] = attrs.Factory(dict)
    #: The prefix as it goes on the wire (set with the first request): the wires build it once per run.
    wire_prefix: WirePrefix | None = None
    #: The index of the last replayed message on the wire (set with `wire_prefix`): block-cache drivers put a
    #: breakpoint there (ProviderRequest.replay_end).
    replay_end: int | None = None
    #: The calls so far, priced from the catalog (segue.catalog.costs): the run's cost is their sum, never repriced.
    cost: RunCost | None = None
    #: "twin" once segue's twin answered a call of the run (segue.run.serving): keeps a twin run's cost out of usd.
    served_by: ServedBy | None = None
    #: The model that answered the latest call that named another model than the one asked for (served-model):
    #: cost and catalog lookups use it; kept to record only a change.
    served_model: str | None = None
    #: ((vendor, model), body) of the run's latest request, for the cache notes of the next one on that path.
    last_request: tuple[tuple[str, str], dict[str, Any]] | None = None
    #: Structured output: repair turns used so far, against the request's `output_repairs`.
    repairs: int = 0
    #: Why the model stopped in the latest response, in RunResult.stop_reason's words (None: no response yet).
    stop_reason: StopReason | None = None
    #: The output limit the run raised to after a tool call was cut at the old one (None: not raised): raised once.
    raised_limit: int | None = None
    #: The conversation's latest vendor response: the next request names it for cache diagnostics and expects to
    #: read what it cached (segue.run.cache_watch). None: the plan's (the continued run's last response).
    last_response: ResponseRef | None = None
    #: The run said its cache collapse already (once per run).
    collapsed: bool = False
    #: The vendor's verdict on the run's first request it did not find unchanged (RunResult.cache_verdict).
    verdict: CacheVerdict | None = None
    #: How many events of the run are out: the last one's seq (segue.run.events).
    events: int = 0
    #: The next request is the one retry of an answer cut inside a tool call, to be evaluated afresh
    #: (ProviderRequest.fresh).
    fresh_retry: bool = False
    #: This process's lease token on the run (segue.store.leases): every write of the run names it.
    lease_owner: str | None = None
    #: The engine that runs each step (segue.run.steps; the DBOS adapter): None, the loop runs them itself.
    steps: Steps | None = None
    #: The sub-runs the run's tool calls made, as they ended (segue.run.subrun): RunResult.children, total_cost.
    children: list[ChildRun] = attrs.Factory(list)
    #: Calls of the current tool round whose sub-run paused for approval (call id -> sub-run id): the run pauses too.
    paused_children: dict[str, str] = attrs.Factory(dict)
    #: The images the journal holds for the finished calls of the round in flight (call id -> images), read back by
    #: recovery and resume (segue.store.tool_calls): the round's tool message carries them as the first run's would.
    journaled_images: dict[str, tuple[ImageBlock, ...]] = attrs.Factory(dict)
    #: Index in `own` -> the message as the run's requests send it, its earlier tool results clipped to fit the
    #: context window (segue.run.fit_iterations); the same object on every later request.
    clipped: dict[int, Message] = attrs.Factory(dict)
    #: The same for the plan's prefix: replayed tool results clipped when the run's own were not enough.
    clipped_prefix: dict[int, Message] = attrs.Factory(dict)
    #: The first messages of the plan's prefix left out of the run's requests (whole replayed runs, oldest first)
    #: when clipping was not enough.
    prefix_cut: int = 0
    #: Notes of the run's own making for the next response (ModelCall.priced adds them to it).
    pending_notes: list[ProviderNote] = attrs.Factory(list)
    #: id(message) -> (message, its tokens): each message counted once per run.
    token_counts: dict[int, tuple[Message, int]] = attrs.Factory(dict)
    #: Where the run's trailing-state fragments go (None: no trailing_state), laid out by the plan's layout; it
    #: holds the decision once the first serving path made it (segue.cache.layout).
    layout: LayoutPolicy | None = attrs.field(default=attrs.Factory(lambda self: _layout(self.plan), takes_self=True))

    @property
    def previous_response(self) -> ResponseRef | None:
        """The response the next request continues: this run's latest, else the continued run's last."""
        return self.last_response if self.last_response is not None else self.plan.previous_response

    def tokens_of(self, message: Message) -> int:
        """A message's tokens as the context-window fit counts them (an image by the tightest path's formula:
        segue.run.window), each message counted once per run."""
        found = self.token_counts.get(id(message))
        if found is None or found[0] is not message:
            images = self.plan.room.images if self.plan.room is not None else None
            found = self.token_counts[id(message)] = (message, message_tokens(message, images))
        return found[1]

    def stored_messages(self) -> list[Message]:
        """This run's messages as they are stored: with the fragments the layout keeps (appendOnly)."""
        layout = self.layout
        if layout is None:
            return list(self.own)
        prefix = self.plan.prefix
        return layout.with_kept_fragments([*prefix, *self.own])[len(prefix) :]

    def result(
        self,
        status: RunStatus,
        answer: str | None = None,
        error: str | None = None,
        pending: list[PendingApproval] | None = None,
        output: Any = None,
    ) -> RunResult:
        parent = self.request.parent
        return RunResult(
            run_id=self.run_id,
            status=status,
            answer=answer,
            usage=self.usage,
            iterations=self.iteration,
            replay=self.replay,
            error=error,
            notes=self.notes.as_list() or None,
            cache_verdict=self.verdict,
            cached_share=cache_parts(self.usage).read_share,
            cost=self.cost,
            served_by=self.served_by,
            replay_text=replay_text(self.replay) if self.replay is not None else None,
            pending_approvals=pending,
            retry_of=self.request.retry_of,
            parent_run_id=parent.run_id if parent is not None else None,
            parent_call_id=parent.call_id if parent is not None else None,
            children=list(self.children) or None,
            total_cost=total_cost(self.cost, self.children),
            output=output,
            stop_reason=self.stop_reason,
        )


def stored_result(run: RunDetail, error: str | None = None) -> RunResult:
    """The RunResult of a recorded run (an idempotent replay, a stream that could not finish), as the loop would
    have returned it."""
    meta = run.meta
    pending = meta.segue_pending if meta is not None and run.status == "waiting_approval" else None
    names = (pending.names or {}) if pending is not None else {}
    return RunResult(
        run_id=run.run_id,
        status=run.status,
        answer=run.answer,
        usage=run.usage,
        iterations=len(run.llm_interactions),
        replay=run.replay,
        error=run.error or error,
        notes=(meta.segue_notes if meta is not None else None) or None,
        cached_share=cache_parts(run.usage).read_share,
        cost=meta.segue_cost if meta is not None else None,
        served_by=run.served_by,
        replay_text=replay_text(run.replay) if run.replay is not None else None,
        pending_approvals=[PendingApproval(call_id=c, name=names.get(c)) for c in pending.calls] if pending else None,
        retry_of=run.retry_of,
        parent_run_id=run.parent_run_id,
        parent_call_id=run.parent_call_id,
        stop_reason=meta.segue_stop_reason if meta is not None else None,
    )


#: The stop reason of a response that paused after the vendor compacted the conversation (Anthropic's
#: pause_after_compaction): the run goes on with the next request.
COMPACTION_PAUSE = "compaction"
#: The vendors' stop reasons (in segue's wire vocabulary, Anthropic's words) as RunResult.stop_reason.
_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "pause_turn": "pause",
    # Anthropic's pause_after_compaction: the response holds the compaction block alone (BetaStopReason)
    COMPACTION_PAUSE: "pause",
    "refusal": "refusal",
    "content_filter": "content_filter",
}


def stop_reason_of(vendor_reason: str) -> StopReason:
    """A response's stop reason in RunResult.stop_reason's words (one a vendor adds later reads as end)."""
    return _STOP_REASONS.get(vendor_reason, "end")


def cut_note(response: ProviderResponse) -> ProviderNote:
    limit = f"max_tokens={response.output_limit}" if response.output_limit is not None else "the vendor's own limit"
    return ProviderNote(
        kind="output-truncated",
        message=f"the final answer was cut at the output limit ({limit}): it is incomplete; raise "
        "model_settings.max_tokens for a complete answer",
    )


#: Longest part of a tool's error quoted in a tool-failed note.
_ERROR_CHARS = 200


def failed_tool_note(own: list[Message]) -> ProviderNote | None:
    """A tool-failed note when the run's latest tool results hold an error: the model answers without a call
    that succeeded after it, so the answer may rest on the error. The run still ends `success` (the model did
    answer), as in the OpenAI Agents SDK, whose default tool error handler sends the error to the model and lets
    the run complete; the note keeps that from reading as a clean answer. (PydanticAI instead ends the run with
    the tool's exception unless the tool raised ModelRetry.)"""
    results = next(
        (blocks for m in reversed(own) if (blocks := [b for b in m.content if isinstance(b, ToolResultBlock)])), []
    )
    failed = [b for b in results if b.is_error]
    if not failed:
        return None
    names = {c.id: c.name for m in own for c in tool_calls(m)}
    first = failed[0]
    error = first.content if len(first.content) <= _ERROR_CHARS else first.content[:_ERROR_CHARS] + "..."
    more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
    return ProviderNote(
        kind="tool-failed",
        message=f"the last call to {names.get(first.tool_call_id, first.tool_call_id)} failed{more} and the model "
        f"answered without calling it again: the answer may rest on the error ({error})",
    )


def truncated_message(response: ProviderResponse, raised: int | None) -> str:
    """The error of a run whose tool call was cut at the output limit, naming the limit."""
    calls = ", ".join(response.truncated_calls)
    limit = response.output_limit
    if limit is None:
        where = "the server's own output limit (no max_tokens was sent; a self-hosted server also stops at its context)"
    else:
        where = f"max_tokens={limit}" + (" (already raised once in this run)" if raised is not None else "")
    return (
        f"the response from {response.vendor} was cut at {where} while the model wrote a call to {calls}; "
        "raise model_settings.max_tokens (or the server's context size) and retry the run"
    )


def make_event(
    type: RunEventType,
    run_id: str,
    iteration: int,
    *,
    text: str | None = None,
    tool_call: ToolCallBlock | None = None,
    tool_result: ToolResultBlock | None = None,
    result: RunResult | None = None,
    error: str | None = None,
    meta: dict[str, Any] | None = None,
    cache_collapse: CacheCollapse | None = None,
) -> RunEvent:
    return RunEvent(
        cache_collapse=cache_collapse,
        type=type,
        run_id=run_id,
        iteration=iteration,
        text=text,
        tool_call=tool_call,
        tool_result=tool_result,
        result=result,
        error=error,
        meta=meta or {},
    )


def validation_event(e: Exception) -> RunEvent:
    """The RUN_ERROR a stream yields for a request refused before any row: the error's reason and run in meta."""
    meta: dict[str, Any] = {"error_type": type(e).__name__}
    if isinstance(e, ReplayRunError):
        meta.update(reason=e.reason, run_id=e.run_id)
    elif isinstance(e, RunStateError):
        meta.update(reason=e.reason, run_id=e.run_id, agent=e.agent)
    elif isinstance(e, ToolSourceError):
        meta.update(source=e.source)
    return make_event("RUN_ERROR", "", 0, error=str(e), meta=meta)
