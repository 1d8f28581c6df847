"""The prefix rule: may a replayed run's reasoning go on this request's wire, and if not, why not.

Reasoning is bound to the exact prefix it was produced under. A run's reasoning is kept only while its recorded
PrefixDescriptor equals what precedes it in the current request (vendor, model, system hash, tools hash, seed =
hash of the messages before its user message as they go on the wire), the request's wire takes that reasoning
back, and the layout leaves the run's own messages as they were. Dropping a run's reasoning changes what
precedes every later run, so a later run produced with it fails the seed check too (cause `follows`); a later run
produced without it (e.g. on another vendor) still matches. Each drop names one cause.

Pure functions over canonical data: the planner (segue.replay.planner) asks them per run, the loop
(segue.run.serving) uses `drop_kept` when a response shows the reasoning did not reach the model after all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import attrs

from segue._core.contracts import ServingPath
from segue._core.hashing import ListHasher, message_json
from segue.generated import (
    Message,
    PrefixDescriptor,
    ReasoningBlock,
    ReplaySummary,
    ReplayWarning,
    ReplayWarningCause,
    ServedPath,
)

log = logging.getLogger("segue.replay")

#: How a message goes on this request's wire (the trailing-state layout may escape it, or leave it out: None).
WireView = Callable[[Message], Message | None]
Verdict = tuple[ReplayWarningCause, str]


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
    #: The structured-output format's hash (None: the request asks for none).
    output_hash: str | None = None
    #: The hash of the model settings in this path's cached prefix (None: none set; see settings_hash).
    settings_hash: str | None = None

    @property
    def path(self) -> ServingPath:
        return ServingPath(vendor=self.vendor, model=self.model, reasoning_vendor=self.reasoning_vendor)


def seed_of(messages: Sequence[Message], view: WireView | None = None) -> str:
    """canonical_hash of the messages (as `message_json`) as they go on the wire: what preceded a run's user
    message."""
    hasher = ListHasher()
    for m in messages:
        shown = view(m) if view is not None else m
        if shown is not None:
            hasher.add(message_json(shown))
    return hasher.digest()


def reasoning_verdict(
    descriptor: PrefixDescriptor | None,
    messages: Sequence[Message],
    seed: str,
    current: CurrentPrefix,
    *,
    earlier_drop: str | None,
    view: WireView | None,
    unstored_fragment: bool = False,
) -> Verdict | None:
    """Why a run's reasoning (in `messages`, produced under `descriptor`) cannot go on this request, or None if it
    can.

    `seed` hashes what precedes the run on this request's wire; `earlier_drop` is the last earlier replayed run
    whose reasoning this request drops (a seed mismatch then says `follows`); `unstored_fragment`: some of the
    run's reasoning was produced right after a runtime-state fragment its replace layout did not store."""
    if current.reasoning_vendor is None:
        return (
            "reasoning-off",
            f"reasoning dropped: this request's wire ({current.vendor}/{current.model}) takes no reasoning back "
            "(e.g. Anthropic with thinking off, or Chat Completions)",
        )
    d = descriptor
    if d is None:
        return (
            "predates-metadata",
            "reasoning dropped: the run has no prefix descriptor (recorded before segue kept them)",
        )
    if d.vendor != current.vendor:
        return ("cross-vendor", f"reasoning dropped: it came from {d.vendor}, this request goes to {current.vendor}")
    if d.also_served:
        return _also_served(d.also_served, current)
    families = sorted({b.vendor for m in messages for b in m.content if isinstance(b, ReasoningBlock)})
    if families != [current.reasoning_vendor]:
        return (
            "cross-vendor",
            f"reasoning dropped: it is {', '.join(families)} reasoning, and this request's wire takes back "
            f"{current.reasoning_vendor} reasoning only",
        )
    if d.model != current.model:
        return ("model", f"reasoning dropped: the model changed from {d.model} to {current.model}")
    if d.system_hash != current.system_hash:
        return ("system", "reasoning dropped: the system prompt (or skills, or stable context) changed since the run")
    if d.tools_hash != current.tools_hash:
        return ("tools", "reasoning dropped: the tool definitions changed since the run")
    if d.output_hash != current.output_hash:
        return (
            "output-schema",
            "reasoning dropped: the structured-output schema (output_type) changed since the run; the model was "
            "shown the format with the prefix the reasoning was produced under",
        )
    if d.settings_hash != current.settings_hash:
        return (
            "settings",
            "reasoning dropped: the model settings that are part of the vendor's cached prefix (tool_choice, "
            "reasoning_effort) changed since the run",
        )
    if d.seed != seed:
        if earlier_drop is not None:
            return ("follows", f"reasoning dropped: the messages before it changed, as {earlier_drop}'s was dropped")
        return (
            "seed",
            "reasoning dropped: the messages before this run differ from when it ran "
            "(the window moved or earlier runs changed)",
        )
    if unstored_fragment:
        return (
            "layout",
            "reasoning dropped: it was produced right after a runtime-state fragment that the run's replace layout "
            "did not store, so no replay can show the model what it saw",
        )
    if view is not None and _changed_before_reasoning(messages, view):
        return (
            "layout",
            "reasoning dropped: this request's trailing-state layout leaves out (or rewrites) the run's own "
            "runtime-state fragments, which preceded its reasoning when it ran",
        )
    return None


def path_cause(planned: CurrentPrefix | ServingPath, vendor: str, model: str) -> ReplayWarningCause:
    """Why reasoning kept for `planned` does not fit the path (vendor, model) that served instead."""
    if vendor != planned.vendor:
        return "cross-vendor"
    if model != planned.model:
        return "model"
    return "reasoning-off"


def drop_kept(summary: ReplaySummary, drops: Mapping[str, ReplayWarning]) -> ReplaySummary:
    """The summary once the reasoning of kept runs turned out not to reach the model after all (a failover served
    another path, the vendor dropped it): each run in `drops` that was kept moves to reasoning_dropped with its
    one warning."""
    moved = [r for r in summary.reasoning_kept if r in drops]
    if not moved:
        return summary
    for run_id in moved:
        log.warning("replay: run %s: %s", run_id, drops[run_id].message)
    return attrs.evolve(
        summary,
        reasoning_kept=[r for r in summary.reasoning_kept if r not in drops],
        reasoning_dropped=[*summary.reasoning_dropped, *moved],
        warnings=[*summary.warnings, *(drops[r] for r in moved)],
    )


def _also_served(paths: Sequence[ServedPath], current: CurrentPrefix) -> Verdict:
    shown = ", ".join(f"{p.vendor}/{p.model}" for p in paths)
    cause: ReplayWarningCause = "cross-vendor" if any(p.vendor != current.vendor for p in paths) else "model"
    return (
        cause,
        f"reasoning dropped: a failover mid-run let {shown} serve part of it, so its reasoning is bound to more "
        f"than {current.vendor}/{current.model}",
    )


def _changed_before_reasoning(messages: Sequence[Message], view: WireView) -> bool:
    """Whether the wire view changes a message of the run that came before some of its reasoning."""
    last = max(i for i, m in enumerate(messages) if any(isinstance(b, ReasoningBlock) for b in m.content))
    return any(view(m) is not m for m in messages[:last])
