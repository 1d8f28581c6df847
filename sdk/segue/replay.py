"""Run replay: validate the knobs and the runs, then rebuild earlier runs as canonical messages.

Flow: `validate_knobs` (types, duplicates; no I/O) -> one store query for every replayed run -> `plan_replay`
(existence, tenant, terminal state; window and token budget; reasoning keep/drop by prefix descriptor) ->
`ReplayPlan(messages, summary)`. Nothing here writes.

The prefix rule: a run's reasoning is kept only while its recorded PrefixDescriptor equals what precedes it in
the current request (vendor, model, system hash, tools hash, seed = hash of the messages before its user
message, as they go on the wire), and the request's wire takes that reasoning back. Dropping a run's reasoning
changes what precedes every later run, so a later run whose reasoning was produced with it fails the seed check
too (cause `follows`). One warning per run names the cause.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from segue.errors import ReplayRunError
from segue.generated import (
    Message,
    PrefixDescriptor,
    ReasoningBlock,
    ReplayKnobs,
    ReplaySummary,
    ReplayWarning,
    ReplayWarningCause,
    ServedPath,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    get_converter,
)
from segue.hashing import ListHasher, canonical_json
from segue.meta import PREFIX_META_KEY, TOOLS_META_KEY
from segue.providers.base import REPLAYED_META_KEY
from segue.store.run_store import TERMINAL, StoredRun
from segue.tokens import count_json

log = logging.getLogger("segue.replay")
_ULID = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$", re.IGNORECASE)


#: How a message goes on this request's wire (the trailing-state layout may escape or leave it out: None).
WireView = Callable[[Message], Message | None]


def is_run_id(value: object) -> bool:
    """Run ids are ULIDs: 26 Crockford base32 characters (either case)."""
    return isinstance(value, str) and _ULID.match(value) is not None


def run_id_of(value: object) -> str | None:
    """The run id as segue stores it (ULIDs are case-insensitive; stored upper case), or None if it is not one."""
    return value.upper() if isinstance(value, str) and is_run_id(value) else None


@attrs.frozen(kw_only=True)
class CurrentPrefix:
    """What the new request puts in front of the replayed runs: compared with each run's descriptor.

    `reasoning_vendor` is the ReasoningBlock.vendor the serving driver's wire takes back (None: none)."""

    vendor: str
    model: str
    system_hash: str
    tools_hash: str
    tool_hashes: Mapping[str, str]
    reasoning_vendor: str | None = None


@attrs.frozen(kw_only=True)
class ReplayPlan:
    messages: list[Message]
    summary: ReplaySummary
    continued_from: str | None


def message_json(m: Message) -> str:
    """A message as hashed: canonical JSON of its role and content (meta never reaches a vendor)."""
    return canonical_json({"role": m.role, "content": get_converter().unstructure(m.content, list[Any])})


def seed_of(messages: Sequence[Message], view: WireView | None = None) -> str:
    """canonical_hash of the messages (as `message_json`) as they go on the wire: what preceded a run's user
    message."""
    hasher = ListHasher()
    for m in messages:
        shown = view(m) if view is not None else m
        if shown is not None:
            hasher.add(message_json(shown))
    return hasher.digest()


def validate_knobs(
    runs: Any,
    replay_last: Any,
    replay_reasoning: Any,
    replay_budget_tokens: Any = None,
    *,
    single_call: bool = False,
) -> ReplayKnobs | None:
    """Check knob types and duplicates; None when there is nothing to replay."""
    # Values come from apps and JSON-RPC clients unchecked, hence `Any` and runtime checks.
    if isinstance(replay_last, bool) or not (
        (isinstance(replay_last, int) and replay_last >= 0) or replay_last == "all"
    ):
        shown = f"{replay_last!r} ({type(replay_last).__name__})"
        hint = f"; pass {int(replay_last)}" if isinstance(replay_last, float) and replay_last.is_integer() else ""
        raise ReplayRunError(
            f"replay_last must be a whole number >= 0 (how many of the latest runs replay in full) or 'all', "
            f"got {shown}{hint}",
            run_id=None,
            reason="invalid",
        )
    if not isinstance(replay_reasoning, bool):
        raise ReplayRunError(
            f"replay_reasoning must be True or False, got {replay_reasoning!r}", run_id=None, reason="invalid"
        )
    if replay_budget_tokens is not None and (
        isinstance(replay_budget_tokens, bool) or not isinstance(replay_budget_tokens, int) or replay_budget_tokens < 1
    ):
        raise ReplayRunError(
            f"replay_budget_tokens must be a positive int or None, got {replay_budget_tokens!r}",
            run_id=None,
            reason="invalid",
        )
    if single_call and replay_last != 0:
        raise ReplayRunError(
            f"SingleCall replays runs as question + answer only: pass replay_last=0, not {replay_last!r}",
            run_id=None,
            reason="unsupported",
        )
    if runs is None:
        return None
    if isinstance(runs, str) or not isinstance(runs, Sequence):
        raise ReplayRunError(
            f"runs must be a list of run ids, got {type(runs).__name__} {runs!r:.80}", run_id=None, reason="invalid"
        )
    ids: list[str] = []
    for given in runs:
        run_id = run_id_of(given)
        if run_id is None:
            raise ReplayRunError(
                f"runs must hold run ids (ULIDs: 26 characters of Crockford base32), got {given!r:.60}",
                run_id=None,
                reason="invalid",
            )
        if run_id in ids:
            raise ReplayRunError(
                f"run {run_id} appears twice in runs=; pass each run once, oldest first",
                run_id=run_id,
                reason="duplicate",
            )
        ids.append(run_id)
    if not ids:
        return None
    return ReplayKnobs(
        runs=ids,
        replay_last=replay_last,
        replay_reasoning=replay_reasoning,
        replay_budget_tokens=replay_budget_tokens,
    )


def check_runs(stored: Mapping[str, StoredRun], run_ids: Sequence[str], tenant_id: str) -> None:
    for run_id in run_ids:
        run = stored.get(run_id)
        if run is None:
            raise ReplayRunError(f"run {run_id} does not exist; check the run id", run_id=run_id, reason="not_found")
        if run.tenant_id != tenant_id:
            raise ReplayRunError(
                f"run {run_id} belongs to another tenant than {tenant_id!r}; replay only this tenant's runs",
                run_id=run_id,
                reason="tenant_mismatch",
            )
        if run.status not in TERMINAL:
            raise ReplayRunError(
                f"run {run_id} is still {run.status}; replay it once it has finished",
                run_id=run_id,
                reason="not_terminal",
            )
        if not run.traces:
            raise ReplayRunError(
                f"run {run_id} has no stored traces (deleted outside segue?); leave it out of runs= "
                "or restore its traces",
                run_id=run_id,
                reason="not_found",
            )


def plan_replay(
    stored: Mapping[str, StoredRun],
    knobs: ReplayKnobs,
    tenant_id: str,
    current: CurrentPrefix,
    *,
    guardrails: bool = False,
    view: WireView | None = None,
) -> ReplayPlan:
    """The replayed messages (each marked with its run id) and the summary. `view` is how the request's layout puts
    a message on the wire; seeds are compared against exactly that."""
    check_runs(stored, knobs.runs, tenant_id)
    runs = [stored[r] for r in knobs.runs]
    warnings: list[ReplayWarning] = []

    def warn(run_id: str, cause: ReplayWarningCause, message: str) -> None:
        warnings.append(ReplayWarning(run_id=run_id, cause=cause, message=message))
        log.warning("replay: run %s: %s", run_id, message)

    full_count = len(runs) if knobs.replay_last == "all" else min(int(knobs.replay_last), len(runs))
    modes = ["text"] * (len(runs) - full_count) + ["full"] * full_count
    full_messages = {r.run_id: _complete(r) for r in runs}
    text_messages = {r.run_id: _question_and_answer(r) for r in runs}
    if knobs.replay_budget_tokens is not None:
        modes = _fit_budget(runs, modes, full_messages, text_messages, knobs.replay_budget_tokens, warn)

    messages: list[Message] = []
    hasher = ListHasher()  # hash of `messages` as they go on the wire: the seed each full run is checked against
    kept: list[str] = []
    dropped: list[str] = []
    for run, mode in zip(runs, modes, strict=True):
        if mode == "skip":
            continue
        if mode == "text":
            _append(messages, hasher, text_messages[run.run_id], None, run.run_id, view)
            continue
        run_messages = full_messages[run.run_id]
        items = _stored_items(run, run_messages)
        _warn_tools(run, run_messages, current, warn)
        if any(isinstance(b, ReasoningBlock) for m in run_messages for b in m.content):
            cause = _drop_cause(run, run_messages, hasher.digest(), current, knobs, guardrails, dropped, view)
            if cause is None:
                kept.append(run.run_id)
            else:
                dropped.append(run.run_id)
                if cause[0] != "off":
                    warn(run.run_id, cause[0], cause[1])
                run_messages = [_without_reasoning(m) for m in run_messages]
                items = None
        _append(messages, hasher, run_messages, items, run.run_id, view)

    summary = ReplaySummary(
        schema_version=1,
        knobs=knobs,
        runs_full=[r.run_id for r, m in zip(runs, modes, strict=True) if m == "full"],
        runs_text=[r.run_id for r, m in zip(runs, modes, strict=True) if m == "text"],
        reasoning_kept=kept,
        reasoning_dropped=dropped,
        warnings=warnings,
    )
    return ReplayPlan(messages=messages, summary=summary, continued_from=knobs.runs[-1])


def drop_kept(summary: ReplaySummary, run_ids: Sequence[str], cause: ReplayWarningCause, message: str) -> ReplaySummary:
    """The summary once the reasoning of kept runs `run_ids` turned out not to reach the model after all (a
    failover served another path, the vendor dropped it): each moves to reasoning_dropped with one warning."""
    moved = [r for r in summary.reasoning_kept if r in run_ids]
    if not moved:
        return summary
    for run_id in moved:
        log.warning("replay: run %s: %s", run_id, message)
    return attrs.evolve(
        summary,
        reasoning_kept=[r for r in summary.reasoning_kept if r not in moved],
        reasoning_dropped=[*summary.reasoning_dropped, *moved],
        warnings=[*summary.warnings, *(ReplayWarning(run_id=r, cause=cause, message=message) for r in moved)],
    )


def path_cause(planned: CurrentPrefix, vendor: str, model: str) -> ReplayWarningCause:
    """Why reasoning kept for `planned` does not fit the path (vendor, model) that served instead."""
    if vendor != planned.vendor:
        return "cross-vendor"
    if model != planned.model:
        return "model"
    return "reasoning-off"


def _append(
    messages: list[Message],
    hasher: ListHasher,
    new: Sequence[Message],
    items: Sequence[str] | None,
    run_id: str,
    view: WireView | None,
) -> None:
    for i, m in enumerate(new):
        shown = view(m) if view is not None else m
        if shown is None:
            continue
        hasher.add(items[i] if items is not None and shown is m else message_json(shown))
    messages.extend(_mark(new, run_id))


def _stored_items(run: StoredRun, messages: Sequence[Message]) -> list[str] | None:
    """The store's precomputed message_json of the run's traces, while `messages` are those traces unchanged."""
    if len(run.hash_items) < len(messages):
        return None
    if any(messages[i] is not run.traces[i].message for i in range(len(messages))):
        return None
    return [run.hash_items[i] for i in range(len(messages))]


def _drop_cause(
    run: StoredRun,
    messages: Sequence[Message],
    seed: str,
    current: CurrentPrefix,
    knobs: ReplayKnobs,
    guardrails: bool,
    dropped: Sequence[str],
    view: WireView | None,
) -> tuple[ReplayWarningCause | Literal["off"], str] | None:
    if not knobs.replay_reasoning:
        return ("off", "")
    if guardrails:
        return ("guardrails", "reasoning dropped: guardrails are configured, and reasoning is not replayed with them")
    if current.reasoning_vendor is None:
        return (
            "reasoning-off",
            f"reasoning dropped: this request's wire ({current.vendor}/{current.model}) takes no reasoning back "
            "(e.g. Anthropic with thinking off, or Chat Completions)",
        )
    mismatch = _mismatch(run, messages, seed, current, view)
    if mismatch is not None and mismatch[0] == "seed" and dropped:
        return ("follows", f"reasoning dropped: the messages before it changed because {dropped[-1]}'s was dropped")
    return mismatch


def _mismatch(
    run: StoredRun, messages: Sequence[Message], seed: str, current: CurrentPrefix, view: WireView | None
) -> tuple[ReplayWarningCause, str] | None:
    raw = run.meta.get(PREFIX_META_KEY)
    if raw is None:
        return (
            "predates-metadata",
            "reasoning dropped: the run has no prefix descriptor (recorded before segue kept them)",
        )
    d = get_converter().structure(raw, PrefixDescriptor)
    if d.vendor != current.vendor:
        return ("cross-vendor", f"reasoning dropped: it came from {d.vendor}, this request goes to {current.vendor}")
    families = sorted({b.vendor for m in messages for b in m.content if isinstance(b, ReasoningBlock)})
    if families != [current.reasoning_vendor]:
        return (
            "cross-vendor",
            f"reasoning dropped: it is {', '.join(families)} reasoning, and this request's wire takes back "
            f"{current.reasoning_vendor} reasoning only",
        )
    if d.model != current.model:
        return ("model", f"reasoning dropped: the model changed from {d.model} to {current.model}")
    if d.also_served:
        return _also_served(d.also_served, current)
    if d.system_hash != current.system_hash:
        return ("system", "reasoning dropped: the system prompt (or skills, or stable context) changed since the run")
    if d.tools_hash != current.tools_hash:
        return ("tools", "reasoning dropped: the tool definitions changed since the run")
    if d.seed != seed:
        return (
            "seed",
            "reasoning dropped: the messages before this run differ from when it ran "
            "(the window moved or earlier runs changed)",
        )
    if view is not None and _changed_before_reasoning(messages, view):
        return (
            "layout",
            "reasoning dropped: this request's trailing-state layout leaves out (or rewrites) the run's own "
            "runtime-state fragments, which preceded its reasoning when it ran",
        )
    return None


def _also_served(paths: Sequence[ServedPath], current: CurrentPrefix) -> tuple[ReplayWarningCause, str]:
    shown = ", ".join(f"{p.vendor}/{p.model}" for p in paths)
    cause: ReplayWarningCause = "cross-vendor" if any(p.vendor != current.vendor for p in paths) else "model"
    return (
        cause,
        f"reasoning dropped: a failover mid-run let {shown} serve part of it, so its reasoning is bound "
        f"to more than {current.vendor}/{current.model}",
    )


def _changed_before_reasoning(messages: Sequence[Message], view: WireView) -> bool:
    """Whether the wire view changes a message of the run that came before some of its reasoning."""
    last = max(i for i, m in enumerate(messages) if any(isinstance(b, ReasoningBlock) for b in m.content))
    return any(view(m) is not m for m in messages[:last])


def _warn_tools(run: StoredRun, messages: Sequence[Message], current: CurrentPrefix, warn: Any) -> None:
    called = sorted({b.name for m in messages for b in m.content if isinstance(b, ToolCallBlock)})
    missing = [n for n in called if n not in current.tool_hashes]
    if missing:
        warn(run.run_id, "tool-missing", f"replayed calls to tools no longer offered, sent as they were: {missing}")
    then: Mapping[str, str] = run.meta.get(TOOLS_META_KEY, {})
    changed = [n for n in called if n in current.tool_hashes and n in then and then[n] != current.tool_hashes[n]]
    if changed:
        warn(run.run_id, "tool-changed", f"tools whose definition changed since the run: {changed}")


def _fit_budget(
    runs: Sequence[StoredRun],
    modes: list[str],
    full: Mapping[str, list[Message]],
    text: Mapping[str, list[Message]],
    budget: int,
    warn: Any,
) -> list[str]:
    """Collapse the oldest full runs to question + answer, then leave out the oldest runs, until within budget."""
    conv = get_converter()
    cost = {
        (r.run_id, kind): count_json(conv.unstructure(msgs, list[Message]))
        for r in runs
        for kind, msgs in (("full", full[r.run_id]), ("text", text[r.run_id]))
    }

    def total() -> int:
        return sum(cost[(r.run_id, m)] for r, m in zip(runs, modes, strict=True) if m != "skip")

    for i, run in enumerate(runs):
        if total() <= budget:
            break
        if modes[i] == "full":
            modes[i] = "text"
            warn(run.run_id, "budget", f"replayed as question + answer to stay within {budget} tokens")
    for i, run in enumerate(runs):
        if total() <= budget:
            break
        modes[i] = "skip"
        warn(run.run_id, "budget", f"left out of the replay to stay within {budget} tokens")
    return modes


def _complete(run: StoredRun) -> list[Message]:
    """The run's messages up to its last complete iteration, ending with an assistant message.

    An assistant turn whose tool calls have no results (the run died mid-iteration) is cut, so a tool call is
    never separated from its result; a run without a final answer gets a short assistant note, so roles
    still alternate.
    """
    messages = [t.message for t in run.traces]
    cut = len(messages)
    for i, m in enumerate(messages):
        calls = {b.id for b in m.content if isinstance(b, ToolCallBlock)}
        if m.role == "assistant" and calls:
            following = messages[i + 1] if i + 1 < len(messages) else None
            answered = (
                {b.tool_call_id for b in following.content if isinstance(b, ToolResultBlock)}
                if following is not None and following.role == "tool"
                else set()
            )
            if not calls <= answered:
                cut = i
                break
    messages = messages[:cut]
    if not messages:
        return _question_and_answer(run)
    if messages[-1].role != "assistant":
        messages.append(_note(run))
    return messages


def _question_and_answer(run: StoredRun) -> list[Message]:
    question = run.traces[0].message if run.traces else Message(role="user", content=[TextBlock(text=run.input)])
    question = Message(role="user", content=[b for b in question.content if not isinstance(b, ReasoningBlock)])
    answer = Message(role="assistant", content=[TextBlock(text=run.answer)]) if run.answer else _note(run)
    return [question, answer]


def _note(run: StoredRun) -> Message:
    return Message(
        role="assistant", content=[TextBlock(text=f"(This earlier run ended without an answer: {run.status}.)")]
    )


def _without_reasoning(m: Message) -> Message:
    if not any(isinstance(b, ReasoningBlock) for b in m.content):
        return m
    return Message(role=m.role, content=[b for b in m.content if not isinstance(b, ReasoningBlock)], meta=m.meta)


def _mark(messages: Sequence[Message], run_id: str) -> list[Message]:
    return [
        Message(role=m.role, content=m.content, meta={**(m.meta or {}), REPLAYED_META_KEY: run_id}) for m in messages
    ]
