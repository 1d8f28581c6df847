"""Step 3 of a run: plan it. Reads only (one store query), after the request was validated and found new.

The plan is everything about a run that is known before its first call and fixed for the run: the run's tools
(segue.run.toolbox: the agent's tool sources are read here, once per run), the configuration snapshot
(segue.run.config), the trailing-state layout decided as far as it can be, and the replay: the
replayed runs plus `history=` as canonical messages (computed once; each iteration only appends the run's own
messages after them), a replay summary per path the run may be served on, and per path the seed its prefix
descriptor will carry (what precedes the run's user message, hashed once here and never again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

import attrs

from segue._core.contracts import ServingPath
from segue.cache.layout import LayoutPlan
from segue.cache.ttl import pauses_between
from segue.catalog import CatalogError
from segue.errors import ReplayRunError
from segue.generated import Compaction, CompactionRef, ContextBlock, LayoutMeta, Message, ReplaySummary, ResponseRef
from segue.replay import compaction as compactions
from segue.replay.paths import PathPlans
from segue.replay.planner import check_runs, plan_replay
from segue.replay.prefix_rule import WireView, seed_of
from segue.run.config import AgentConfig, RunConfig
from segue.run.request import RunRequest
from segue.run.settings import check_tool_choice
from segue.run.window import Room, replay_room
from segue.store import records
from segue.store.records import StoredRun


@attrs.frozen(kw_only=True)
class RunPlan:
    """`prefix`: the replayed runs and history, carrying the reasoning any planned path keeps (segue.run.serving
    fits it per request); `summaries`: the replay summary per planned path (empty: nothing replayed);
    `layout`: the run's trailing-state layout as planned (None without trailing_state): its rule, and its decision
    when known before the first call (segue.cache.layout_decision); the run lays out by RunState.layout."""

    config: RunConfig
    #: The run's context blocks as sent: its own, with the stable context of the conversation it continues.
    context: list[ContextBlock]
    layout: LayoutPlan | None
    prefix: list[Message]
    summaries: dict[ServingPath, ReplaySummary]
    seeds: dict[ServingPath, str]
    continued_from: str | None
    #: Seconds between the conversation's turns (the replayed runs' times, then now): ProviderRequest.pauses.
    pauses: tuple[float, ...] = ()
    #: The continued run's last vendor response (its meta `segue.last_response`): the first request names it for
    #: cache diagnostics. None: nothing continued, or a run recorded before segue kept it.
    previous_response: ResponseRef | None = None
    #: Ask the vendors for cache diagnostics (Agent(cache_diagnostics=...), on by default).
    diagnose: bool = True
    #: The run's compaction policy wants a new compaction before this run (segue.run.compaction makes it).
    compaction_due: bool = False
    #: This run is a compaction: the runs its summary stands for (run_id: its own, set when its row is made).
    makes: CompactionRef | None = None
    #: The tightest serving path's room (None: no window known): every request's messages fit `room.messages`.
    room: Room | None = None

    @property
    def path(self) -> ServingPath:
        """The path the run is aimed at (a Failover's first member, or the runtime vendor's)."""
        return self.config.current.path

    @property
    def summary(self) -> ReplaySummary | None:
        """The replay as planned for the path the run is aimed at (None: nothing replayed)."""
        return self.summaries.get(self.path)

    @property
    def paths(self) -> PathPlans:
        """The replay as planned per serving path, which the loop executes (segue.replay.paths)."""
        return PathPlans(aimed=self.path, summaries=self.summaries, seeds=self.seeds)

    @property
    def view(self) -> WireView | None:
        """How the prefix goes on this run's wire (the layout may escape or leave out messages)."""
        return self.layout.on_wire if self.layout is not None else None

    def seed(self, served: ServingPath | None, sent: Collection[str]) -> str:
        """The seed of the run served on `served`, whose request carried the reasoning of the runs in `sent`:
        planned already, unless a path segue planned nothing for served (then hashed from the prefix)."""
        return self.paths.seed(served, sent, self.prefix, self.view)


def conversation_pauses(stored: Mapping[str, StoredRun], run_ids: Sequence[str]) -> tuple[float, ...]:
    """The pauses between the replayed runs, in the order `runs=` names them, and from the last one to now."""

    def at(stamp: str | None) -> float | None:
        return datetime.fromisoformat(stamp).timestamp() if stamp else None

    spans = []
    for run_id in dict.fromkeys(run_ids):
        run = stored[run_id]
        start = at(run.created_at)
        if start is not None:
            spans.append((start, at(run.finished_at)))
    now = at(records.utc_now())
    assert now is not None
    return pauses_between(spans, now)


def with_conversation_context(request: RunRequest, first: StoredRun) -> RunRequest:
    """The request with the stable context of the conversation it continues: the one its first replayed run was
    made with (a run records its context blocks, inherited ones included), so every turn sends the same stable
    band its runs were produced under. The request may repeat that context; other stable context would change
    the prefix of every replayed run, and is refused before anything is written."""
    own = [b for b in request.context if b.placement == "stable"]
    made = first.meta.segue_request
    blocks = made.context if made is not None and isinstance(made.context, list) else []
    inherited = [b for b in blocks if b.placement == "stable"]
    if own == inherited:
        return request
    if own:
        raise ReplayRunError(
            f"this request's placement='stable' context differs from the stable context run {first.run_id} (the "
            "first replayed run) was made with: it would change the prefix every replayed run was produced "
            "under; leave stable context out with runs= (the conversation's is sent), or start a new conversation",
            run_id=first.run_id,
            reason="invalid",
        )
    context = [*inherited, *request.context]
    return attrs.evolve(request, params=attrs.evolve(request.params, context=context))


class Planner:
    """Plans runs for one agent."""

    def __init__(self, agent: AgentConfig) -> None:
        self.agent = agent

    async def plan(
        self,
        request: RunRequest,
        *,
        compaction: CompactionRef | None = None,
        making: bool = False,
        resumed_layout: LayoutMeta | None = None,
    ) -> RunPlan:
        """The run's plan. ReplayRunError when a replayed run is missing, another tenant's, or unfinished, or the
        compaction policy cannot work on the path; ToolSourceError when a tool source cannot give the run its tools;
        InputError when tool_choice names none of them, or when the run's own part of the request exceeds a serving
        path's context window (the replayed runs are fitted to what is left). `compaction`: one just made, replayed
        instead of the one the conversation's last run replayed; `making`: this is a compaction's own plan;
        `resumed_layout`: a paused run's own layout decision, which it resumes with."""
        tools = await self.agent.tools.snapshot()
        check_tool_choice(request.params.model_settings, list(tools.by_name))
        stored = None
        if request.knobs is not None:
            store = self.agent.store
            assert store is not None, "validation refuses runs= without a store"
            stored = await asyncio.to_thread(store.load_runs, request.knobs.runs)
            check_runs(stored, request.knobs.runs, request.tenant_id)  # before reading any run's context
            request = with_conversation_context(request, stored[request.knobs.runs[0]])
        config = self.agent.snapshot(request, tools)
        policy = request.params.compaction
        if policy is not None:
            self._check_policy(policy, config)
        conversation = (
            [(r, stored[r].meta.segue_layout) for r in dict.fromkeys(request.knobs.runs)]
            if request.knobs is not None and stored is not None
            else []
        )
        layout = self.agent.layout(request, tools, resumed=resumed_layout, conversation=conversation)
        view = layout.on_wire if layout is not None else None
        history = request.history
        room = replay_room(self.agent, request, config)  # InputError when the run's own part cannot fit
        if request.knobs is None or stored is None:
            seed = seed_of(history, view)
            return RunPlan(
                config=config,
                context=request.context,
                layout=layout,
                prefix=list(history),
                summaries={},
                seeds={config.current.path: seed},
                continued_from=None,
                diagnose=self.agent.cache_diagnostics,
                room=room,
            )
        vendor = policy is not None and bool(policy.vendor)
        ref = (compaction or compactions.in_use(stored, request.knobs.runs)) if policy and not vendor else None
        # Compaction(vendor=True): the turn replays from the latest run carrying the vendor's compaction block.
        vendor_ref = (
            compactions.vendor_in_use(stored, request.knobs.runs, config.current.path.vendor) if vendor else None
        )
        made = None
        if ref is not None:
            assert self.agent.store is not None
            found = (await asyncio.to_thread(self.agent.store.load_runs, [ref.run_id])).get(ref.run_id)
            made = (compactions.check_made(found, ref, request.tenant_id), ref)
        plan = plan_replay(
            stored,
            compactions.after_vendor(request.knobs, vendor_ref),
            config.current,
            guardrails=bool(self.agent.guardrails),
            view=view,
            alternatives=config.alternatives,
            then=history,
            room=(room.tokens, room.why()) if room is not None else None,
            compaction=made,
        )
        since = len(request.knobs.runs) - (ref.runs if ref is not None else 0)
        due = policy is not None and not making and compactions.due(policy, since, plan.messages)
        return RunPlan(
            config=config,
            context=request.context,
            layout=layout,
            prefix=[*plan.messages, *history],
            summaries=compactions.as_asked(plan.summaries, request.knobs, vendor_ref),
            seeds=plan.seeds,
            continued_from=plan.continued_from,
            pauses=conversation_pauses(stored, request.knobs.runs),
            previous_response=stored[request.knobs.runs[-1]].meta.segue_last_response,
            diagnose=self.agent.cache_diagnostics,
            compaction_due=due,
            room=room,
        )

    def _check_policy(self, policy: Compaction, config: RunConfig) -> None:
        """The compaction policy against every path the run may be served on."""
        catalog = self.agent.catalog()
        for path in [config.current, *config.alternatives]:
            try:
                minimum = catalog.resolve(path.model, path.vendor).cache_min_tokens
            except CatalogError:
                continue
            compactions.check_trigger(policy, f"{path.vendor}/{path.model}", minimum)
