"""Sub-runs: an agent offered to another as a tool (Agent.as_tool), and a fork of the calling agent (`fork_tool`).

A sub-run is a run of its own, recorded with its parent run and the parent's tool call (segue.run.lineage): it
runs in the parent's tenant with the parent's `deps`, is cancelled with the parent's task, and its cost joins the
parent's `total_cost`. Each call goes validate -> find -> run -> hand back:

- validate: a refusal (the nesting is deeper than `max_depth`, as agents that offer each other or an agent that forks
  itself would be; a tenant other than the parent's; a fork onto a serving path the parent's prefix was not sent
  on) is the tool's error result, naming the reason, and no row is written;
- find: a sub-run this very call made already (the parent was recovered after its process died: the call runs again,
  so the tool is `retry_safe`) is recovered or read back instead of started again; and, for a sub-agent that
  remembers, its earlier runs in the parent's conversation (the sub-runs of the parent's replayed runs and of the
  parent itself), which it replays (`runs=`) so it does not explore again what it learned on an earlier turn;
- run: the sub-agent's pipeline, as `Agent.run` would (a fork: the caller's own pipeline, from the caller's
  prefix: the same replayed runs and knobs, its messages so far as history, then the sub-task);
- hand back: the answer (or the validated output, as JSON) is the tool's result; a sub-run that did not succeed is
  an error result naming its status and run id; the parent's result lists it in `children`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from segue._core.contracts import ServingPath
from segue._core.hashing import compact_json
from segue._core.json_types import json_schema_for
from segue._core.usage import cache_parts
from segue.errors import SegueError
from segue.generated import ChildRun, Message, RunParams, RunResult
from segue.providers.base import serving_path
from segue.run.lineage import CALLER, DEFAULT_MAX_DEPTH, Caller, Parent
from segue.run.pipeline import Pipeline, last_result
from segue.run.request import TRANSPORT_FIELDS
from segue.run.state import stored_result
from segue.tool_context import RunContext
from segue.tools import Tool, ToolOutput

#: The input of a sub-agent offered without an input_type: one task, in words.
TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What to do, with everything needed to do it."}},
    "required": ["task"],
    "additionalProperties": False,
}
#: The run() arguments a sub-run does not set: Agent.run's defaults.
# Agent.run's defaults for every RunParams field a sub-run does not set (a field added to RunParams is None here
# too, so validate's exact-arguments check never refuses a sub-run for it).
_DEFAULTS: dict[str, Any] = {
    f.name: None for f in attrs.fields(RunParams) if f.name not in {*TRANSPORT_FIELDS, "input", "tenant_id"}
} | {"replay_reasoning": True}


class SubRunRefused(SegueError):
    """A sub-run that may not start (too deep, another tenant, a fork onto another path): the reason."""


def agent_tool(
    pipeline: Pipeline,
    *,
    name: str,
    description: str,
    input_type: Any = None,
    remember: bool = True,
    max_depth: int = DEFAULT_MAX_DEPTH,
    tenant_id: str | None = None,
    requires_approval: bool = False,
) -> Tool:
    """The tool that runs `pipeline`'s agent as a sub-run (Agent.as_tool documents the arguments)."""
    _check_depth(max_depth)
    parameters = TASK_SCHEMA if input_type is None else json_schema_for(input_type, f"as_tool({name}) input_type")
    if parameters.get("type") != "object":
        raise TypeError(f"as_tool({name}): input_type must describe an object (a class with fields), got {parameters}")

    async def call(ctx: RunContext[Any], **arguments: Any) -> Any:
        task = arguments["task"] if input_type is None else compact_json(arguments)
        caller = CALLER.get()
        return await _sub_run(
            pipeline, task, ctx, caller, remember=remember, max_depth=max_depth, tenant_id=tenant_id, fork=None
        )

    return _sub_run_tool(name, description, parameters, call, requires_approval=requires_approval)


def fork_tool(
    *,
    name: str = "fork",
    description: str = "Hand a sub-task to a copy of yourself that knows everything you know so far; it answers "
    "with its result.",
    max_depth: int = DEFAULT_MAX_DEPTH,
    model: str | None = None,
    vendor: str | None = None,
) -> Tool:
    """A tool that forks the agent calling it: the fork starts from the caller's prefix (same system and tools, the
    caller's replayed runs and messages so far) and then the sub-task, so its first request reads what the caller
    cached; forks called together in one response read the same cache entry. `model` / `vendor` name the path the
    fork is served on; a path the caller's prefix was not sent on is refused (the fork would read no cache)."""
    _check_depth(max_depth)

    async def call(ctx: RunContext[Any], task: str) -> Any:
        caller = CALLER.get()
        if caller is None or caller.pipeline is None:
            return ToolOutput(
                content="refused: a fork needs a run to fork from (call it from an agent's run)", is_error=True
            )
        target = serving_path(caller.pipeline.agent.provider, model=model, vendor=vendor)
        return await _sub_run(
            caller.pipeline, task, ctx, caller, remember=False, max_depth=max_depth, tenant_id=None, fork=target
        )

    return _sub_run_tool(name, description, TASK_SCHEMA, call)


def _sub_run_tool(
    name: str,
    description: str,
    parameters: Mapping[str, Any],
    call: Callable[..., Awaitable[Any]],
    *,
    requires_approval: bool = False,
) -> Tool:
    """The tool a sub-run is called through (an agent as a tool, a fork)."""
    return Tool(
        name=name,
        description=description,
        parameters=dict(parameters),
        fn=call,
        context_parameter="ctx",
        requires_approval=requires_approval,
        # The sub-run has its own limits (max_iterations, each call's timeout); recovery finds the sub-run this
        # call made rather than starting another, so calling again is safe.
        timeout=None,
        retry_safe=True,
        max_result_chars=1_000_000,
    )


def _check_depth(max_depth: int) -> None:
    if type(max_depth) is not int or max_depth < 1:
        raise ValueError(f"max_depth must be a whole number >= 1 (how deep sub-runs may nest), got {max_depth!r}")


async def _sub_run(
    pipeline: Pipeline,
    task: str,
    ctx: RunContext[Any],
    caller: Caller | None,
    *,
    remember: bool,
    max_depth: int,
    tenant_id: str | None,
    fork: ServingPath | None,
) -> Any:
    agent = pipeline.agent
    try:
        parent = _validated_link(agent.name, ctx, caller, max_depth=max_depth, tenant_id=tenant_id, fork=fork)
        tenant = ctx.tenant_id
        existing = await _made_by_this_call(pipeline, parent, caller, ctx)
        if existing is not None:
            result = existing
        else:
            arguments = _fork_arguments(caller, fork) if fork is not None and caller is not None else {}
            if remember and parent is not None and caller is not None:
                earlier = await _earlier_runs(pipeline, caller)
                if earlier:
                    arguments["runs"] = earlier
            history = arguments.get("history")
            # A fork called in the caller's first response follows its user message: history refuses to end with
            # one (an app's history must end with an answer), so the caller's messages go in as they were sent.
            unanswered = arguments.pop("history") if history and history[-1].role == "user" else None
            request = pipeline.validate(
                {**_DEFAULTS, **arguments, "user_input": task, "tenant_id": tenant}, deps=ctx.deps
            )
            if unanswered is not None:
                request = attrs.evolve(request, params=attrs.evolve(request.params, history=unanswered))
            if parent is not None:
                request = attrs.evolve(request, parent=parent)
            result = await last_result(pipeline.run(request, streaming=False))
    except SubRunRefused as e:
        return ToolOutput(content=f"refused: {e}", is_error=True)
    except SegueError as e:  # bad input the sub-run's validation or plan refused: nothing of it was written
        return ToolOutput(content=f"sub-agent {agent.name} could not start: {e}", is_error=True)
    if caller is not None and result.status == "waiting_approval":
        # The caller pauses too, on this call; resuming it resumes this sub-run with the app's decision.
        caller.state.paused_children[ctx.tool_call_id] = result.run_id
    elif caller is not None:
        caller.state.paused_children.pop(ctx.tool_call_id, None)
        caller.state.children.append(child_of(result, agent.name, ctx.tool_call_id, fork=fork is not None))
    return outcome(result, agent.name)


def _validated_link(
    agent: str,
    ctx: RunContext[Any],
    caller: Caller | None,
    *,
    max_depth: int,
    tenant_id: str | None,
    fork: ServingPath | None,
) -> Parent | None:
    """The sub-run's link to its caller, or SubRunRefused with the reason (before anything is written)."""
    if tenant_id is not None and tenant_id != ctx.tenant_id:
        raise SubRunRefused(
            f"sub-agent {agent} is bound to tenant {tenant_id!r} but the run calling it is tenant {ctx.tenant_id!r}; "
            "a sub-run runs in its parent's tenant (leave tenant_id out of as_tool, or call it from that tenant)"
        )
    if caller is None:
        return None
    chain = caller.chain
    if len(chain) >= max_depth:
        raise SubRunRefused(
            f"sub-agent {agent} would run at depth {len(chain) + 1}, beyond max_depth={max_depth} "
            f"(the chain of agents: {' -> '.join([*chain, agent])}); agents that offer each other, or an agent that "
            "forks itself, stop here: raise max_depth in as_tool / fork_tool if the nesting is meant"
        )
    if fork is not None:
        served = _served_path(caller)
        if served is not None and (served[0], served[1]) != (fork.vendor, fork.model):
            raise SubRunRefused(
                f"a fork onto {fork.vendor}/{fork.model} cannot start from the parent's prefix, which was sent to "
                f"{served[0]}/{served[1]}: another path has none of it cached; fork on the parent's path (leave "
                "model and vendor out of fork_tool), or offer a separate agent with as_tool"
            )
    return caller.link(fork=fork is not None)


def _served_path(caller: Caller) -> tuple[str, str] | None:
    """(vendor, model) of the caller's latest request, which its prefix was sent on (None: none sent)."""
    last = caller.state.last_request
    return tuple(last[0]) if last is not None else None


def _fork_arguments(caller: Caller, fork: ServingPath) -> dict[str, Any]:
    """The caller's prefix as a fork's request: its replayed runs with the same knobs, its history and its own
    messages up to the response that called the fork (that response's calls are not answered in the fork), its
    stable context, output format and settings: what the caller's latest request sent before its end."""
    state = caller.state
    params = state.request.params
    own: list[Message] = list(state.own)
    if own and own[-1].role == "assistant":
        own.pop()
    return {
        "history": [*state.request.history, *own],
        "context": [b for b in state.request.context if b.placement == "stable"] or None,
        "runs": params.runs,
        "replay_last": params.replay_last,
        "replay_reasoning": params.replay_reasoning,
        "replay_budget_tokens": params.replay_budget_tokens,
        "replay_step": params.replay_step,
        "replay_keep": params.replay_keep,
        "model": fork.model,
        "vendor": fork.vendor,
        "output_type": params.output_type,
        "output_repairs": params.output_repairs,
        "model_settings": params.model_settings,
    }


async def _made_by_this_call(
    pipeline: Pipeline, parent: Parent | None, caller: Caller | None, ctx: RunContext[Any]
) -> RunResult | None:
    """The sub-run this tool call made already, when the parent runs it again: after a recovery, its result when
    it ended, recovered with its parent when its lease lapsed too; after the parent was resumed, the sub-run that
    paused for approval, resumed with the app's decision (None: the call made none)."""
    store = pipeline.agent.store
    if parent is None or store is None:
        return None
    found = await asyncio.to_thread(store.lineage.children, [parent.run_id], tenant_id=parent.tenant_id)
    mine = [c for c in found if c.parent_call_id == parent.call_id and c.agent_name == pipeline.agent.name]
    if not mine:
        return None
    made = mine[-1]
    if made.status == "running":
        return await last_result(pipeline.recover(made.run_id, parent.tenant_id, streaming=False, deps=ctx.deps))
    if made.status == "waiting_approval" and caller is not None and caller.decision is not None:
        resumed = pipeline.resume(made.run_id, caller.decision, None, parent.tenant_id, streaming=False, deps=ctx.deps)
        return await last_result(resumed)
    detail = await asyncio.to_thread(store.get_run, made.run_id, tenant_id=parent.tenant_id)
    assert detail is not None
    return stored_result(detail)


async def _earlier_runs(pipeline: Pipeline, caller: Caller) -> list[str]:
    """This sub-agent's earlier runs in the caller's conversation: the finished sub-runs it made (not forks) for the
    runs the caller replays and for the caller itself, oldest first."""
    store = pipeline.agent.store
    if store is None:
        return []
    knobs = caller.state.request.knobs
    conversation = [*(knobs.runs if knobs is not None else []), caller.state.run_id]
    found = await asyncio.to_thread(store.lineage.children, conversation, tenant_id=caller.state.request.tenant_id)
    return [c.run_id for c in found if c.agent_name == pipeline.agent.name and c.status == "success"]


def child_of(result: RunResult, agent: str, call_id: str, *, fork: bool) -> ChildRun:
    return ChildRun(
        run_id=result.run_id,
        agent_name=agent,
        call_id=call_id,
        status=result.status,
        usage=result.usage,
        cached_share=cache_parts(result.usage).read_share,
        cost=result.cost,
        total_cost=result.total_cost,
        fork=True if fork else None,
    )


def outcome(result: RunResult, agent: str) -> Any:
    """What the parent's model sees: the sub-run's validated output or answer; an error result otherwise."""
    if result.status == "success":
        return result.output if result.output is not None else (result.answer or "")
    if result.status == "waiting_approval":
        pending = ", ".join(p.name or p.call_id for p in result.pending_approvals or [])
        text = f"sub-agent {agent} (run {result.run_id}) is waiting for approval of {pending}"
        return ToolOutput(content=text, is_error=True)
    why = f": {result.error}" if result.error else ""
    return ToolOutput(content=f"sub-agent {agent} (run {result.run_id}) ended {result.status}{why}", is_error=True)
