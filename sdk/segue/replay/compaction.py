"""Compaction, the replay's side: which compaction a conversation's turn replays, whether a new one is due, and the
summary request's instruction. Making one is segue.run.compaction's job; putting it in place of the runs it stands
for is the planner's (segue.replay.planner, `compaction=`).

A compaction is a run of its own (its row marked `segue.compaction` in meta, naming the runs it stands for), so
its request, usage and cost are recorded and priced like any call. A turn finds the one to replay in the replay
summary of the last run of `runs=`: each run records the compaction it replayed, so a conversation carries it from
turn to turn without the app keeping anything but its run ids.

`Compaction(vendor=True)` lets the serving path's vendor compact instead: the policy turns on the path's own
compaction (ModelSettings.compaction, only where the catalog row says `llm.vendor_compaction`), and the artifact is
the compaction block a response carried, kept in that run's assistant message. The vendor drops everything before
the block ("The API automatically drops all message blocks prior to the compaction block", Anthropic's compaction
page), so a turn replays from the latest run of `runs=` that carries one and leaves the runs before it out: they
are what the block stands for (`vendor_in_use`), named in the replay summary like segue's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import attrs

from segue._core.hashing import message_json
from segue._core.tokens import count_tokens
from segue.errors import InputError, ReplayRunError
from segue.generated import (
    Compaction,
    CompactionBlock,
    CompactionRef,
    Message,
    ModelSettings,
    ReplayKnobs,
    ReplaySummary,
    ReplayWarning,
    VendorCompaction,
)
from segue.store.records import StoredRun

__all__ = [
    "INSTRUCTION",
    "check_trigger",
    "check_vendor",
    "due",
    "in_use",
    "instruction",
    "vendor_in_use",
    "with_vendor",
]

#: The summary request's last user message, unless the policy gives its own.
INSTRUCTION = (
    "Summarize the conversation so far for your own later use, in place of it: each question asked and the answer "
    "given, and every fact the tools returned that a later question may need (table names, their columns, figures), "
    "word for word where it matters. Write the summary only; do not call tools."
)


def instruction(policy: Compaction) -> str:
    return policy.instruction or INSTRUCTION


def in_use(stored: Mapping[str, StoredRun], runs: Sequence[str]) -> CompactionRef | None:
    """The compaction the conversation's last run replayed, when it still stands for a leading span of `runs`
    (the app may have passed other runs than that turn did: then there is none)."""
    if not runs:
        return None
    replay = stored[runs[-1]].meta.segue_replay
    ref = replay.compaction if replay is not None else None
    if ref is None or ref.runs > len(runs) or runs[0] != ref.first or runs[ref.runs - 1] != ref.last:
        return None
    return ref


def check_made(made: StoredRun | None, ref: CompactionRef, tenant_id: str) -> StoredRun:
    """The compaction's run, checked like a replayed run: this tenant's, finished, with a summary."""
    if made is None or made.tenant_id != tenant_id or made.meta.segue_compaction is None or not made.answer:
        raise ReplayRunError(
            f"compaction {ref.run_id}, which run {ref.last} replayed in place of its conversation's first {ref.runs} "
            "runs, does not exist for this tenant or has no summary (deleted outside segue?); pass the policy "
            "again to make a new one from the runs, or replay without compaction",
            run_id=ref.run_id,
            reason="not_found",
        )
    return made


def check_trigger(policy: Compaction, path: str, minimum: int | None) -> None:
    """A trigger below the path's minimum cacheable prompt would compact a region the vendor cannot cache, on
    every turn: refused, naming both. (The vendor's trigger, with `vendor`, is the vendor's to check.)"""
    if policy.vendor:
        return
    if policy.trigger_tokens is not None and minimum is not None and policy.trigger_tokens < minimum:
        raise ReplayRunError(
            f"compaction trigger_tokens={policy.trigger_tokens:,} is below {path}'s minimum cacheable prompt "
            f"({minimum:,} tokens, catalog llm.cache_min_tokens): the summary request could not be read from the "
            f"cache; pass trigger_tokens >= {minimum:,}, or every=S runs",
            run_id=None,
            reason="invalid",
        )


def due(policy: Compaction, since: int, replayed: Sequence[Message]) -> bool:
    """A new compaction is made when `every` runs have followed the last one (or the conversation's start), or
    when the replayed region passes `trigger_tokens`; never for a turn with nothing new to compact."""
    if since < 1 or policy.vendor:
        return False
    if policy.every is not None and since >= policy.every:
        return True
    if policy.trigger_tokens is not None:
        return sum(count_tokens(message_json(m)) for m in replayed) > policy.trigger_tokens
    return False


def check_vendor(policy: Compaction, name: str) -> None:
    """A vendor-mode policy has no `every` (the vendor compacts by prompt tokens, never by runs): InputError naming
    the value otherwise. (`vendor` itself is a bool: the generated Compaction checks that when constructed.)"""
    if policy.vendor and policy.every is not None:
        raise InputError(
            f"{name} sets vendor=True and every={policy.every!r:.20}: the vendor compacts when the prompt passes "
            "trigger_tokens, never every N runs; drop every (and pass trigger_tokens=T, or leave it to the vendor's "
            "default), or drop vendor=True for segue's own compaction every N runs"
        )


def native(policy: Compaction | None) -> VendorCompaction | None:
    """The serving path's own compaction setting a vendor-mode policy turns on (None: not vendor mode)."""
    if policy is None or not policy.vendor:
        return None
    return VendorCompaction(trigger_tokens=policy.trigger_tokens, instructions=policy.instruction)


def with_vendor(
    policy: Compaction | None, settings: ModelSettings | None, check: Callable[[ModelSettings], None], name: str
) -> ModelSettings | None:
    """The run's model settings with the vendor's compaction a vendor-mode policy turns on, once every path the run
    may be served on was asked whether it has one (`check`: the drivers' settings checks, InputError when one
    refuses), so a policy that cannot work is refused before any row, naming the path and the value."""
    setting = native(policy)
    if setting is None:
        return settings
    assert policy is not None
    shown = f"Compaction(vendor=True, trigger_tokens={policy.trigger_tokens!r}), given as {name},"
    if settings is not None and settings.compaction is not None and settings.compaction != setting:
        raise InputError(
            f"{shown} turns on the vendor's compaction, and model_settings.compaction={settings.compaction!r:.120} "
            "sets it too, differently; pass one of them"
        )
    try:
        check(ModelSettings(compaction=setting))
    except InputError as e:
        raise InputError(
            f"{shown} lets the serving path's vendor compact, which it cannot here: {e}. Or compact client-side: "
            "drop vendor=True and pass every=S or trigger_tokens=T"
        ) from None
    return attrs.evolve(settings, compaction=setting) if settings is not None else ModelSettings(compaction=setting)


def vendor_in_use(stored: Mapping[str, StoredRun], runs: Sequence[str], vendor: str) -> CompactionRef | None:
    """The vendor's compaction a turn replays from: the latest run of `runs` whose messages carry `vendor`'s
    compaction block, standing for the runs before it (None: no such run, or only the first carries one, so it
    stands for no whole run)."""
    for i in range(len(runs) - 1, 0, -1):
        traces = stored[runs[i]].traces
        if any(isinstance(b, CompactionBlock) and b.vendor == vendor for t in traces for b in t.message.content):
            return CompactionRef(run_id=runs[i], runs=i, first=runs[0], last=runs[i - 1], vendor=vendor)
    return None


def after_vendor(knobs: ReplayKnobs, ref: CompactionRef | None) -> ReplayKnobs:
    """The knobs of what a turn replays under the vendor's compaction `ref`: the runs from the one carrying the
    block on (the vendor drops the rest)."""
    return knobs if ref is None else attrs.evolve(knobs, runs=knobs.runs[ref.runs :])


Path = TypeVar("Path")


def as_asked(
    summaries: Mapping[Path, ReplaySummary], knobs: ReplayKnobs, ref: CompactionRef | None
) -> dict[Path, ReplaySummary]:
    """Replay summaries planned over `after_vendor`'s runs, as the run asked (its own knobs), naming the vendor's
    compaction `ref` they replayed from, with the `compacted` warning segue's own compaction gives."""
    if ref is None:
        return dict(summaries)
    left = ReplayWarning(
        run_id=ref.run_id,
        cause="compacted",
        message=f"the first {ref.runs} runs ({ref.first} to {ref.last}) are not sent: {ref.vendor}'s compaction "
        f"block in run {ref.run_id}'s response stands for them (the vendor drops everything before it)",
    )
    return {
        path: attrs.evolve(s, knobs=knobs, compaction=ref, warnings=[left, *s.warnings])
        for path, s in summaries.items()
    }
