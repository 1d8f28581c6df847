"""Run replay: check the replayed runs, then rebuild them as canonical messages.

Flow: the knobs were validated with the request (segue.run.request) -> one store query for every replayed run ->
`plan_replay` (existence, tenant, terminal state; window and token budget; reasoning keep/drop by prefix
descriptor) -> `ReplayPlan(messages, summaries, seeds)`. Nothing here writes.

Reasoning is kept or dropped per run by the prefix rule (segue.replay.prefix_rule), once per path a request may be
served on: the path it is aimed at, and the other members of a Failover. One warning per run names the cause.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs

from segue._core.contracts import REPLAYED_META_KEY, ServingPath
from segue._core.hashing import ListHasher, message_json
from segue._core.identity import IdentityMemo
from segue._core.tokens import count_json, count_tokens
from segue.errors import ReplayRunError
from segue.generated import (
    CompactionRef,
    Message,
    ReasoningBlock,
    ReplayKnobs,
    ReplaySummary,
    ReplayWarning,
    ReplayWarningCause,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    get_converter,
)
from segue.replay.prefix_rule import CurrentPrefix, WireView, reasoning_verdict
from segue.store.records import TERMINAL, StoredRun

__all__ = ["ReplayPlan", "check_runs", "plan_replay"]


@attrs.frozen(kw_only=True)
class ReplayPlan:
    """`messages` carry the reasoning any planned path keeps (fit them to a path with without_replayed_reasoning
    and that path's reasoning_kept); `summaries` has one ReplaySummary per path, the first path's first; `seeds`
    per path, the hash of the replayed messages as that path sends them, then the messages that follow them
    (`then`): what precedes the new run's user message, its descriptor's seed."""

    messages: list[Message]
    summaries: dict[ServingPath, ReplaySummary]
    continued_from: str | None
    seeds: dict[ServingPath, str] = attrs.Factory(dict)

    @property
    def summary(self) -> ReplaySummary:
        return next(iter(self.summaries.values()))


@attrs.define
class _PathCheck:
    """The prefix rule on one path: its own running hash of the wire and its own verdicts."""

    current: CurrentPrefix
    hasher: ListHasher = attrs.Factory(ListHasher)
    kept: list[str] = attrs.Factory(list)
    dropped: list[str] = attrs.Factory(list)
    warnings: list[ReplayWarning] = attrs.Factory(list)


def check_runs(stored: Mapping[str, StoredRun], run_ids: Sequence[str], tenant_id: str) -> None:
    for run_id in run_ids:
        run = stored.get(run_id)
        if run is None or run.tenant_id != tenant_id:
            # Another tenant's run is answered as no run at all: the error never tells that it exists.
            raise ReplayRunError(
                f"run {run_id} does not exist for tenant {tenant_id!r}; check the run id and the tenant",
                run_id=run_id,
                reason="not_found",
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
    current: CurrentPrefix,
    *,
    guardrails: bool = False,
    view: WireView | None = None,
    alternatives: Sequence[CurrentPrefix] = (),
    then: Sequence[Message] = (),
    room: tuple[int, str] | None = None,
    compaction: tuple[StoredRun, CompactionRef] | None = None,
) -> ReplayPlan:
    """The replayed messages (each marked with its run id) and a summary per path: `current`, then the
    `alternatives` a Failover may serve instead (same system and tools, another vendor / model). `view` is how the
    request's layout puts a message on the wire; seeds are compared against exactly that. `room`: (tokens, why)
    the replayed region must fit in (the context window less the output budget and the run's own part). Every run
    of `knobs.runs` is in `stored`, checked by `check_runs` (the plan step calls it once, before reading any run)."""
    runs = [stored[r] for r in knobs.runs]
    checks = [_PathCheck(p) for p in (current, *alternatives)]

    def warn(run_id: str, cause: ReplayWarningCause, message: str, only: _PathCheck | None = None) -> None:
        for check in [only] if only is not None else checks:
            check.warnings.append(ReplayWarning(run_id=run_id, cause=cause, message=message))

    left_out, collapsed = _window(len(runs), knobs)
    modes = ["skip"] * left_out + ["text"] * (collapsed - left_out) + ["full"] * (len(runs) - collapsed)
    compacted = compaction[1].runs if compaction is not None else 0
    modes = ["compacted"] * compacted + modes[compacted:]
    # Worked out when first needed: a window that leaves runs out or replays them in full never needs the rest.
    full_messages = _Lazy({r.run_id: r for r in runs}, _complete)
    text_messages = _Lazy({r.run_id: r for r in runs}, _question_and_answer)
    if knobs.replay_budget_tokens is not None:
        modes = _fit_budget(runs, modes, full_messages, text_messages, knobs.replay_budget_tokens, warn)
    if room is not None:
        modes = fit_room(runs, modes, full_messages, text_messages, room, knobs.replay_step or 1, warn)

    messages: list[Message] = []
    if compaction is not None:
        made, ref = compaction
        shown = _question_and_answer(made)
        for check in checks:
            _hash(check.hasher, shown, None, view)
        messages.extend(_mark(shown, made.run_id))
        warn(
            made.run_id,
            "compacted",
            f"the first {ref.runs} runs ({ref.first} to {ref.last}) replayed as compaction {made.run_id}'s summary; "
            "their tool calls, results and reasoning are not sent",
        )
    for run, mode in zip(runs, modes, strict=True):
        if mode in ("skip", "compacted"):
            continue
        if mode == "text":
            shown = text_messages[run.run_id]
            for check in checks:
                _hash(check.hasher, shown, None, view)
            messages.extend(_mark(shown, run.run_id))
            continue
        full = full_messages[run.run_id]
        _warn_tools(run, full, current, warn)
        stripped: list[Message] | None = None
        keep_any = False
        for check in checks:
            items = _stored_items(run, full)
            sent = full
            if any(isinstance(b, ReasoningBlock) for m in full for b in m.content):
                cause = _drop_cause(run, full, check, knobs, guardrails, view)
                if cause is None:
                    check.kept.append(run.run_id)
                else:
                    check.dropped.append(run.run_id)
                    if cause[0] != "off":
                        warn(run.run_id, cause[0], cause[1], check)
                    stripped = stripped or [_without_reasoning(m) for m in full]
                    sent, items = stripped, None
            keep_any = keep_any or sent is full
            _hash(check.hasher, sent, items, view)
        messages.extend(_mark(full if keep_any else stripped or full, run.run_id))

    def summary(check: _PathCheck) -> ReplaySummary:
        return ReplaySummary(
            schema_version=1,
            knobs=knobs,
            runs_full=[r.run_id for r, m in zip(runs, modes, strict=True) if m == "full"],
            runs_text=[r.run_id for r, m in zip(runs, modes, strict=True) if m == "text"],
            reasoning_kept=check.kept,
            reasoning_dropped=check.dropped,
            warnings=check.warnings,
            compaction=compaction[1] if compaction is not None else None,
        )

    summaries: dict[ServingPath, ReplaySummary] = {}
    seeds: dict[ServingPath, str] = {}
    for check in checks:
        if check.current.path not in summaries:
            summaries[check.current.path] = summary(check)
            _hash(check.hasher, then, None, view)
            seeds[check.current.path] = check.hasher.digest()
    return ReplayPlan(messages=messages, summaries=summaries, continued_from=knobs.runs[-1], seeds=seeds)


class _Lazy(Mapping[str, list[Message]]):
    """run id -> `make(run)`, made on first access and kept."""

    def __init__(self, runs: Mapping[str, StoredRun], make: Callable[[StoredRun], list[Message]]) -> None:
        self._runs, self._make = runs, make
        self._made: dict[str, list[Message]] = {}

    def __getitem__(self, run_id: str) -> list[Message]:
        found = self._made.get(run_id)
        if found is None:
            found = self._made[run_id] = self._make(self._runs[run_id])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)


def _window(count: int, knobs: ReplayKnobs) -> tuple[int, int]:
    """(how many of the oldest runs the window leaves out, how many it does not replay in full: those left out,
    then the ones replayed as question + answer).

    With replay_last=N and replay_step=S it collapses S runs at a time, once N + S of them have accumulated: N to
    N+S-1 runs stay in full, and the replayed prefix stays the same for S-1 turns out of S. replay_keep=M leaves
    out the oldest of the collapsed runs beyond M - N (with replay_last "all", N is M: every kept run is in full),
    on the same turns the window collapses, so M to M+S-1 runs are replayed and a drop costs the prefix no
    turn of its own."""
    keep = knobs.replay_keep
    if knobs.replay_last == "all" and keep is None:
        return 0, 0
    last = keep if knobs.replay_last == "all" else int(knobs.replay_last)
    step = knobs.replay_step or 1
    assert last is not None
    collapsed = 0 if count <= last else (count - last) // step * step
    left_out = 0 if keep is None else max(0, collapsed - (keep - last))
    return left_out, collapsed


def _hash(hasher: ListHasher, new: Sequence[Message], items: Sequence[str] | None, view: WireView | None) -> None:
    """Add messages to a running hash of the wire, as `view` puts them there (precomputed items when unchanged)."""
    for i, m in enumerate(new):
        shown = view(m) if view is not None else m
        if shown is None:
            continue
        hasher.add(items[i] if items is not None and shown is m else message_json(shown))


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
    check: _PathCheck,
    knobs: ReplayKnobs,
    guardrails: bool,
    view: WireView | None,
) -> tuple[ReplayWarningCause | Literal["off"], str] | None:
    if not knobs.replay_reasoning:
        return ("off", "")
    if guardrails:
        return ("guardrails", "reasoning dropped: guardrails are configured, and reasoning is not replayed with them")
    earlier = check.dropped[-1] if check.dropped else None
    layout = run.meta.segue_layout
    unstored = set(layout.unstored_fragments or []) if layout is not None else set()
    after_unstored = any(
        t.iteration in unstored and any(isinstance(b, ReasoningBlock) for b in t.message.content) for t in run.traces
    )
    return reasoning_verdict(
        run.meta.segue_prefix,
        messages,
        check.hasher.digest(),
        check.current,
        earlier_drop=earlier,
        view=view,
        unstored_fragment=after_unstored,
    )


def _warn_tools(run: StoredRun, messages: Sequence[Message], current: CurrentPrefix, warn: Any) -> None:
    called = sorted({b.name for m in messages for b in m.content if isinstance(b, ToolCallBlock)})
    missing = [n for n in called if n not in current.tool_hashes]
    if missing:
        warn(run.run_id, "tool-missing", f"replayed calls to tools no longer offered, sent as they were: {missing}")
    then: Mapping[str, str] = run.meta.segue_tools or {}
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


#: The room a new run's iterations get beside the replayed runs: what the largest of this many latest runs took.
RESERVE_RUNS = 4


def fit_room(
    runs: Sequence[StoredRun],
    modes: list[str],
    full: Mapping[str, list[Message]],
    text: Mapping[str, list[Message]],
    room: tuple[int, str],
    step: int,
    warn: Any,
) -> list[str]:
    """Collapse the oldest full runs to question + answer, `step` at a time (as the window does), then leave out
    the oldest runs, `step` at a time, until the replayed region fits `room`. Sizes come from the store's
    precomputed message_json where the messages are the traces as stored (nothing is serialized again). The new
    run's own iterations are left as much room as the largest of the latest RESERVE_RUNS runs took beyond its
    question and answer."""
    tokens, why = room
    sizes: dict[tuple[str, str], int] = {}

    def size(run: StoredRun, mode: str) -> int:
        found = sizes.get((run.run_id, mode))
        if found is None:
            messages = full[run.run_id] if mode == "full" else text[run.run_id]
            items = _stored_items(run, messages) if mode == "full" else None
            found = sum(count_tokens(t) for t in items or [message_json(m) for m in messages])
            sizes[(run.run_id, mode)] = found
        return found

    total = sum(size(r, m) for r, m in zip(runs, modes, strict=True) if m not in ("skip", "compacted"))
    # The new run's own iterations need room too (segue.run.fit_iterations clips them in, or ends the run): as
    # much as the largest of the latest runs took in full, so it is not born with a window already full.
    tokens -= max((size(r, "full") - size(r, "text") for r in runs[-RESERVE_RUNS:]), default=0)
    if total <= tokens:
        return modes
    modes = list(modes)
    for mode, then, what in (("full", "text", "replayed as question + answer"), ("text", "skip", "left out")):
        chosen = [i for i, m in enumerate(modes) if m == mode]
        while total > tokens and chosen:
            for i in chosen[:step]:
                total -= size(runs[i], mode) - (size(runs[i], then) if then != "skip" else 0)
                modes[i] = then
                warn(runs[i].run_id, "budget", f"{what} to fit {why}")
            chosen = chosen[step:]
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
    out = []
    for m in messages:
        # A stored run's messages are the store's cached objects, the same turn after turn (frozen), and so is a
        # marked copy of one: made once per message, not once per replay.
        found = _MARKED.get(m)
        if found is None or found[0] != run_id:
            marked = Message(role=m.role, content=m.content, meta={**(m.meta or {}), REPLAYED_META_KEY: run_id})
            found = _MARKED.put(m, (run_id, marked))
        out.append(found[1])
    return out


#: A stored message -> (the run id, its marked copy).
_MARKED: IdentityMemo[tuple[str, Message]] = IdentityMemo(50_000)
