"""Client-side compaction, the replay's side: which compaction a conversation's turn replays, whether a new one is
due, and the summary request's instruction. Making one is segue.run.compaction's job; putting it in place of the
runs it stands for is the planner's (segue.replay.planner, `compaction=`).

A compaction is a run of its own (its row marked `segue.compaction` in meta, naming the runs it stands for), so
its request, usage and cost are recorded and priced like any call. A turn finds the one to replay in the replay
summary of the last run of `runs=`: each run records the compaction it replayed, so a conversation carries it from
turn to turn without the app keeping anything but its run ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from segue._core.hashing import message_json
from segue._core.tokens import count_tokens
from segue.errors import ReplayRunError
from segue.generated import Compaction, CompactionRef, Message
from segue.store.records import StoredRun

__all__ = ["INSTRUCTION", "check_trigger", "due", "in_use", "instruction"]

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
    every turn: refused, naming both."""
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
    if since < 1:
        return False
    if policy.every is not None and since >= policy.every:
        return True
    if policy.trigger_tokens is not None:
        return sum(count_tokens(message_json(m)) for m in replayed) > policy.trigger_tokens
    return False
