"""The replay as planned per serving path, and what the plan says changes when a path serves (pure).

`plan_replay` (segue.replay.planner) plans a run's replay once per path it may be served on: the path it is
aimed at, and the other members of a Failover. The plans differ only in whose replayed reasoning they keep.
`PathPlans` is that plan as the loop executes it (segue.run.serving): which reasoning each path's request
carries, and, once a response says which path served, the run's replay summary from then on:

- the first response makes the serving path's plan the run's summary (its warnings are logged once);
- a later response on another planned path drops, from the summary, the runs that path's plan does not keep
  (cause: that plan's own warning for the run, else `follows`); a member segue planned nothing for got none of
  the replayed reasoning, so all of it is dropped (cause `cross-vendor`, `model` or `reasoning-off`);
- what the summary keeps then bounds every later request of the run: no later request sends reasoning an
  earlier one went without;
- a run whose reasoning the vendor reports dropping moves to reasoning_dropped (cause `vendor-dropped`) but
  stays on the wire, since the vendor drops it the same way each time and the cached prefix holds it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import attrs

from segue._core.contracts import REPLAYED_META_KEY, ProviderNote, ServingPath, without_replayed_reasoning
from segue.generated import Message, ReplaySummary, ReplayWarning
from segue.replay.prefix_rule import WireView, drop_kept, log, path_cause, seed_of

#: Warning causes that say why a run's reasoning was dropped (the others are about tools and the budget).
_DROP_CAUSES = frozenset(
    {"model", "system", "tools", "seed", "cross-vendor", "predates-metadata", "follows", "guardrails", "reasoning-off"}
    | {"layout", "vendor-dropped", "output-schema", "settings"}
)


@attrs.frozen(kw_only=True)
class PathPlans:
    """`summaries`: the replay summary per planned path (empty: nothing replayed); `seeds`: per path, the seed its
    prefix descriptor carries (the hash of what precedes the run's user message as that path sends it);
    `aimed`: the path the run is aimed at."""

    aimed: ServingPath
    summaries: Mapping[ServingPath, ReplaySummary]
    seeds: Mapping[ServingPath, str]

    def sent(self, bound: frozenset[str] | None) -> dict[ServingPath, frozenset[str]]:
        """Per planned path, the replayed runs whose reasoning a request of the run carries there: what the path's
        plan keeps, less what an earlier request of the run already went without (`bound`; None: none served)."""
        return {
            path: frozenset(plan.reasoning_kept) & bound if bound is not None else frozenset(plan.reasoning_kept)
            for path, plan in self.summaries.items()
        }

    def served(
        self,
        summary: ReplaySummary,
        bound: frozenset[str] | None,
        path: ServingPath,
        vendor: str,
        model: str,
    ) -> tuple[ReplaySummary, frozenset[str]]:
        """The run's summary once `path` served (vendor/model answered), and the runs whose reasoning later
        requests may still carry."""
        plan = self.summaries.get(path)
        if plan is None:  # a member segue planned no path for: it got none of the replayed reasoning
            message = (
                f"reasoning dropped: {vendor}/{model} served, a Failover member the replay was not planned for, "
                "so no replayed reasoning was sent"
            )
            cause = path_cause(self.aimed, vendor, model)
            summary = drop_kept(
                summary, {r: ReplayWarning(run_id=r, cause=cause, message=message) for r in summary.reasoning_kept}
            )
        elif bound is None:  # the first response: the run's replay is that path's plan
            summary = plan
            for w in plan.warnings:
                log.warning("replay: run %s: %s", w.run_id, w.message)
        else:
            drops = {r: _drop_warning(plan, r) for r in summary.reasoning_kept if r not in plan.reasoning_kept}
            summary = drop_kept(summary, drops)
        return summary, frozenset(summary.reasoning_kept)

    def seed(
        self, served: ServingPath | None, sent: Collection[str], prefix: Sequence[Message], view: WireView | None
    ) -> str:
        """The seed of the run served on `served`, whose request carried the reasoning of the runs in `sent`:
        planned already, unless a path segue planned nothing for served (then hashed from `prefix` as the run's
        wire shows it)."""
        planned = self.summaries.get(served) if served is not None else None
        if served is not None and planned is not None and served in self.seeds:
            if set(planned.reasoning_kept) == set(sent):
                return self.seeds[served]
        if not self.summaries:
            return self.seeds[self.aimed]
        return seed_of(without_replayed_reasoning(prefix, sent), view)


def vendor_dropped(summary: ReplaySummary, run_id: str, note: ProviderNote) -> ReplaySummary:
    """The summary once the vendor reported dropping the reasoning of replayed run `run_id`."""
    warning = ReplayWarning(run_id=run_id, cause="vendor-dropped", message=f"reasoning dropped: {note.message}")
    return drop_kept(summary, {run_id: warning})


def replayed_run(note: ProviderNote, messages: Sequence[Message]) -> str | None:
    """The replayed run a vendor-dropped note points at, if it points at a replayed message of `messages` (the
    request's)."""
    if note.kind != "vendor-dropped" or note.message_index is None:
        return None
    if not 0 <= note.message_index < len(messages):
        return None
    run_id = (messages[note.message_index].meta or {}).get(REPLAYED_META_KEY)
    return run_id if isinstance(run_id, str) else None


def still_sent(summary: ReplaySummary | None) -> frozenset[str] | None:
    """The replayed runs whose reasoning a paused run's requests carried: the kept ones, and those the vendor
    dropped (they stay on the wire)."""
    if summary is None:
        return None
    dropped_by_vendor = {w.run_id for w in summary.warnings if w.cause == "vendor-dropped"}
    return frozenset(summary.reasoning_kept) | dropped_by_vendor


def _drop_warning(plan: ReplaySummary, run_id: str) -> ReplayWarning:
    found = next((w for w in plan.warnings if w.run_id == run_id and w.cause in _DROP_CAUSES), None)
    return found or ReplayWarning(run_id=run_id, cause="follows", message="reasoning dropped on the path that served")
