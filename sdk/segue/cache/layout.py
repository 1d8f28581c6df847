"""Where the trailing runtime-state fragment goes, per loop iteration (pure: no I/O, no vendor names).

An app may pass `trailing_state=fn`; each iteration `fn(RuntimeState)` returns text (or None) that is sent as
the LAST message of the request, a user message marked `meta["segue.fragment"]`. Two layouts:

- `replace`: only the newest fragment is sent; earlier ones are dropped from the request.
- `appendOnly`: every earlier fragment stays where it stood and the new one is appended, so each request is a
  byte-prefix extension of the previous one (what an exact-prefix cache rewards).

Which layout a run uses is decided in segue.cache.layout_decision (`auto`, `byCost`, and when), once: before
the first call where the configuration, a pause, an override or the conversation's earlier runs decide it
(`LayoutPlan`, part of the run's frozen plan), else by the path that serves iteration 1; then it never changes.

Call sequence for the agent loop (one `LayoutPolicy` per run, RunState.layout)::

    plan = LayoutPlan.make(mode=..., catalog=..., trailing_state=fn,
                           requires_stable_reasoning_prefix=provider.requires_stable_reasoning_prefix,
                           declares_native_tools=bool(tools), model_override=..., vendor_override=...,
                           conversation=[(run_id, its RunMeta.segue_layout), ...])
    policy = LayoutPolicy(plan)
    for iteration in 1..max:
        fragment = policy.fragment_for(iteration, state)           # Message | None
        request_messages = policy.lay_out(history, fragment, iteration)
        response = await provider.complete(...request_messages...)
        policy.observe_served(iteration, response.vendor, response.model)
        policy.settle(history)                                     # appendOnly: iteration 1's fragment is back
        history += [assistant message, tool results]               # never the fragment itself
    store policy.with_kept_fragments(history) as the run's messages; policy.meta() as RunMeta.segue_layout

History bookkeeping: the loop's `history` never contains this run's fragments. The policy keeps the ones that
stay in the run (`kept_fragments`, appendOnly only), each at the index of `history` it was appended after;
`with_kept_fragments` interleaves them. In replace mode nothing is kept, so stored traces never hold a
replace-mode fragment.

Iteration 1 of an undecided run (`auto` or `byCost`) is laid out replace-style. If the decision turns out
appendOnly, iteration 1's fragment is restored once, at the iteration-1 boundary (where it stood: after the
replayed runs, history and new input), unless a fragment already sits at or after the boundary. Fragments before
the boundary come from replayed earlier appendOnly runs: they never count for that check, and every request of
the run lays them out the same way, so the prefix the first request established never changes. A run decided
`replace` before its first request by the configuration or an override drops them; otherwise (read back from
the conversation too) they stay, because the earlier runs' own requests carried them and keeping them is what
lets the replayed conversation hit the cache.

The fragment text is wrapped in `<segue-runtime-state>` ... `</segue-runtime-state>`. Lookalike tags in user and
tool-result text (and inside the app's own state text) are escaped as `&lt;segue-runtime-state`, the same way
every iteration, so the prefix stays byte-stable. Assistant text is never rewritten: it is the model's own
output and may sit next to signed reasoning.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from segue._core.contracts import FRAGMENT_META_KEY
from segue.cache.layout_decision import (
    LAYOUT_MODES,
    ConversationSizes,
    LayoutDecision,
    LayoutMode,
    LayoutRule,
    ResolvedLayout,
)
from segue.catalog import Catalog
from segue.generated import LayoutMeta, Message, TextBlock, ToolResultBlock, Usage

__all__ = [
    "FRAGMENT_ITERATION_KEY",
    "FRAGMENT_TAG",
    "LAYOUT_MODES",
    "KeptFragment",
    "LayoutDecision",
    "LayoutMode",
    "LayoutPlan",
    "LayoutPolicy",
    "ResolvedLayout",
    "RuntimeState",
    "TrailingStateFn",
    "assemble",
    "build_fragment",
    "escape_fragment_tags",
    "is_fragment",
]

log = logging.getLogger("segue.layout")

FRAGMENT_TAG = "segue-runtime-state"
#: Message.meta key holding the iteration a fragment was built for.
FRAGMENT_ITERATION_KEY = "segue.iteration"
_FORGED = re.compile(rf"<(?=\s*/?\s*{FRAGMENT_TAG})", re.IGNORECASE)


@attrs.frozen(kw_only=True)
class RuntimeState:
    """What `trailing_state` sees for one iteration. `app_state` is the app's own data, passed through."""

    run_id: str
    iteration: int
    max_iterations: int
    usage_so_far: Usage
    app_state: Mapping[str, Any] = attrs.field(factory=dict)


TrailingStateFn = Callable[[RuntimeState], "str | None"]


def escape_fragment_tags(text: str) -> str:
    """Escape `<segue-runtime-state` / `</segue-runtime-state` lookalikes; deterministic and idempotent."""
    return _FORGED.sub("&lt;", text)


def is_fragment(message: Message) -> bool:
    return message.meta is not None and message.meta.get(FRAGMENT_META_KEY) is True


def build_fragment(text: str, iteration: int) -> Message:
    """The canonical fragment message: a user message with the state text wrapped in the fragment tag."""
    body = f"<{FRAGMENT_TAG}>\n{escape_fragment_tags(text)}\n</{FRAGMENT_TAG}>"
    return Message(
        role="user",
        content=[TextBlock(text=body)],
        meta={FRAGMENT_META_KEY: True, FRAGMENT_ITERATION_KEY: iteration},
    )


def _escaped(message: Message) -> Message:
    if message.role not in ("user", "tool"):
        return message
    content: list[Any] = []
    changed = False
    for block in message.content:
        if isinstance(block, TextBlock) and _FORGED.search(block.text):
            block = attrs.evolve(block, text=escape_fragment_tags(block.text))
            changed = True
        elif isinstance(block, ToolResultBlock) and _FORGED.search(block.content):
            block = attrs.evolve(block, content=escape_fragment_tags(block.content))
            changed = True
        content.append(block)
    return attrs.evolve(message, content=content) if changed else message


def assemble(messages: Sequence[Message], fragment: Message | None, mode: ResolvedLayout) -> list[Message]:
    """The request's messages: a new list (inputs untouched). replace drops every earlier fragment, appendOnly
    keeps them; forged tags in user/tool text are escaped; the fragment, if any, goes last."""
    if mode not in ("appendOnly", "replace"):
        raise ValueError(f"assemble needs a resolved layout, 'appendOnly' or 'replace', got {mode!r}")
    if fragment is not None and not is_fragment(fragment):
        raise ValueError(f"the fragment must be built by build_fragment (meta[{FRAGMENT_META_KEY!r}] is True)")
    out = [m if is_fragment(m) else _escaped(m) for m in messages if mode == "appendOnly" or not is_fragment(m)]
    if fragment is not None:
        out.append(fragment)
    return out


@attrs.frozen(kw_only=True)
class KeptFragment:
    """A fragment that stays in the run's message list: it sits after the first `index` history messages."""

    iteration: int
    index: int
    message: Message


@attrs.frozen(kw_only=True)
class LayoutPlan:
    """What a run's plan fixes about its layout (segue.run.plan): the rule, the app's `trailing_state`, and the
    decision made before the first call (None: the path that serves iteration 1 decides, once)."""

    rule: LayoutRule
    trailing_state: TrailingStateFn | None = None
    decided: LayoutDecision | None = None
    #: A resumed run's iteration whose fragment was restored before the pause (LayoutMeta.restored_iteration).
    restored_iteration: int | None = None

    @classmethod
    def make(
        cls,
        *,
        mode: LayoutMode = "auto",
        catalog: Catalog | None = None,
        trailing_state: TrailingStateFn | None = None,
        requires_stable_reasoning_prefix: bool = False,
        declares_native_tools: bool = False,
        model_override: str | None = None,
        vendor_override: str | None = None,
        resumed: LayoutMeta | None = None,
        conversation: Sequence[tuple[str, LayoutMeta | None]] = (),
    ) -> LayoutPlan:
        """The plan, decided as far as the configuration, a pause, an override or the conversation can decide it
        (segue.cache.layout_decision)."""
        rule = LayoutRule(
            configured=mode,
            catalog=catalog if catalog is not None else Catalog.load(),
            stable_prefix=requires_stable_reasoning_prefix,
            native_tools=declares_native_tools,
        )
        decided = rule.before_first_call(
            model_override=model_override, vendor_override=vendor_override, resumed=resumed, conversation=conversation
        )
        restored = resumed.restored_iteration if resumed is not None and decided is not None else None
        restored = restored if isinstance(restored, int) else None
        return cls(rule=rule, trailing_state=trailing_state, decided=decided, restored_iteration=restored)

    def on_wire(self, message: Message) -> Message | None:
        """How a message before the iteration-1 boundary (replayed runs, history) goes on every request of the
        run: None when it is a replayed fragment the run leaves out; escaped like `assemble` does otherwise."""
        if is_fragment(message):
            return None if self.decided is not None and self.decided.drops_replayed_fragments else message
        return _escaped(message)


class LayoutPolicy:
    """One per run (RunState.layout): builds fragments, lays out each request, and holds the run's decision once
    made (set once, never replaced)."""

    def __init__(self, plan: LayoutPlan) -> None:
        self.plan = plan
        self._decision: LayoutDecision | None = plan.decided
        self._boundary: int | None = None
        self._first_iteration: int | None = None
        self._first_fragment: Message | None = None  # laid out replace-style while undecided: may be restored
        self._restored_iteration: int | None = plan.restored_iteration
        self._restore_checked = False
        self._kept: dict[int, KeptFragment] = {}
        self._sent: set[int] = set()  # iterations whose request carried a fragment
        self._laid: dict[int, tuple[Message, Message | None]] = {}  # id -> (message before the boundary, on_wire)
        self._sizes: ConversationSizes | None = None  # what byCost weighs, measured at the first iteration

    # --- decision ---------------------------------------------------------------------------------------------

    @property
    def decision(self) -> LayoutDecision | None:
        """None while an `auto` or `byCost` run is still undecided (before the first serving path is observed)."""
        return self._decision

    def _freeze(self, decision: LayoutDecision) -> LayoutDecision:
        assert self._decision is None, "a run's layout is decided once"
        self._decision = decision
        return decision

    def observe_served(
        self,
        iteration: int,
        vendor: str,
        model: str,
        *,
        requires_stable_reasoning_prefix: bool | None = None,
    ) -> LayoutDecision:
        """Report who answered `iteration` (after failover). The first report decides an undecided run and
        freezes it; later reports change nothing. `requires_stable_reasoning_prefix` is the serving driver's flag
        when it differs from the one the policy was built with."""
        if self._decision is not None:
            return self._decision
        return self._freeze(
            self.plan.rule.on_served(model, vendor, iteration, self._sizes, requires_stable_reasoning_prefix)
        )

    def _mode_for(self, iteration: int) -> ResolvedLayout:
        if self._decision is not None:
            return self._decision.mode
        if self._first_iteration is not None and iteration > self._first_iteration:
            # A later iteration without any observed serving path: freeze replace rather than flip later, which
            # only iteration 1's fragment could survive.
            log.warning("layout: no serving path observed before iteration %d; freezing replace", iteration)
            self._freeze(LayoutDecision(
                mode="replace", reason=f"no serving path observed before iteration {iteration}",
                iteration=iteration, basis="fallback", frozen=True,
            ))  # fmt: skip
            return "replace"
        return "replace"  # iteration 1 of an undecided run

    # --- fragments and layout ---------------------------------------------------------------------------------

    def fragment_for(self, iteration: int, state: RuntimeState) -> Message | None:
        """The iteration's fragment from the app's `trailing_state`, or None (no callback, None or blank text)."""
        if state.iteration != iteration:
            raise ValueError(f"RuntimeState.iteration is {state.iteration} but the fragment is for {iteration}")
        if self.plan.trailing_state is None:
            return None
        text = self.plan.trailing_state(state)
        if text is None:
            return None
        if not isinstance(text, str):
            raise TypeError(f"trailing_state must return str or None, got {type(text).__name__} {text!r:.60}")
        return build_fragment(text, iteration) if text.strip() else None

    def lay_out(
        self, history: Sequence[Message], fragment: Message | None, iteration: int, boundary: int | None = None
    ) -> list[Message]:
        """The request messages for `iteration`. `history` is the run's message list WITHOUT this run's fragments.

        `boundary` is where iteration 1's fragment stood: the number of messages before it (replayed runs, history,
        new input). Default and normal value: `len(history)` on the first call; it is recorded then."""
        if iteration < 1:
            raise ValueError(f"iterations count from 1, got {iteration}")
        if self._boundary is None:
            b = len(history) if boundary is None else boundary
            if not 0 <= b <= len(history):
                raise ValueError(f"boundary {b} is outside the history (0..{len(history)})")
            self._boundary = b
        elif boundary is not None and boundary != self._boundary:
            raise ValueError(f"boundary {boundary} differs from the one recorded on the first call ({self._boundary})")
        if self._kept and max(k.index for k in self._kept.values()) > len(history):
            raise ValueError("history is shorter than on an earlier iteration; pass the run's whole message list")
        mode = self._mode_for(iteration)
        if mode == "appendOnly":
            self._restore_first(history)
        pre, post = history[: self._boundary], history[self._boundary :]
        own = self._interleave(post, self._boundary)
        if mode == "replace":  # nothing is kept in replace mode, but a resumed run's list may carry fragments
            own = [m for m in own if not is_fragment(m)]
        # The filtering is done: escape and append. What precedes the boundary is the same on every request.
        laid = [*self._before_boundary(pre), *assemble(own, fragment, "appendOnly")]
        if fragment is not None:
            self._sent.add(iteration)
        if self._first_iteration is None:
            self._first_iteration = iteration
        if fragment is not None and mode == "appendOnly":
            self._kept[iteration] = KeptFragment(iteration=iteration, index=len(history), message=fragment)
        elif self._decision is None and iteration == self._first_iteration:
            self._first_fragment = fragment  # a retried first iteration replaces it
            if fragment is not None and self.plan.rule.configured == "byCost":
                self._sizes = ConversationSizes.measure(fragment, pre)
        return laid

    def _before_boundary(self, messages: Sequence[Message]) -> list[Message]:
        """`on_wire` of each message before the boundary, each worked out once per run (the same objects on every
        request, so what the wire built for them can be reused)."""
        out = []
        for m in messages:
            found = self._laid.get(id(m))
            if found is None or found[0] is not m:
                found = self._laid[id(m)] = (m, self.plan.on_wire(m))
            if found[1] is not None:
                out.append(found[1])
        return out

    def settle(self, history: Sequence[Message]) -> None:
        """Call right after `observe_served`, with the run's whole message list: once the run is appendOnly,
        iteration 1's fragment goes back at its boundary now rather than on the next `lay_out`, so the messages a
        run stores (`with_kept_fragments`) only ever grow at the end."""
        if self._decision is not None and self._decision.mode == "appendOnly":
            self._restore_first(history)

    def _restore_first(self, history: Sequence[Message]) -> None:
        """Once: put iteration 1's replace-style fragment back where it stood, now that the run is appendOnly."""
        if self._restore_checked:
            return
        self._restore_checked = True
        first, fragment, boundary = self._first_iteration, self._first_fragment, self._boundary
        if first is None or fragment is None or boundary is None or first in self._kept:
            return
        if any(is_fragment(m) for m in history[boundary:]):
            return  # the caller's list already carries a fragment for this run (e.g. resumed): do not duplicate
        self._kept[first] = KeptFragment(iteration=first, index=boundary, message=fragment)
        self._restored_iteration = first

    def _interleave(self, messages: Sequence[Message], offset: int) -> list[Message]:
        kept = sorted(self._kept.values(), key=lambda k: (k.index, k.iteration))
        out: list[Message] = []
        j = 0
        for i, m in enumerate(messages, start=offset):
            while j < len(kept) and kept[j].index <= i:
                out.append(kept[j].message)
                j += 1
            out.append(m)
        out.extend(k.message for k in kept[j:])
        return out

    @property
    def kept_fragments(self) -> tuple[KeptFragment, ...]:
        """The fragments that stay in this run's message list (appendOnly only), in order."""
        return tuple(sorted(self._kept.values(), key=lambda k: (k.index, k.iteration)))

    def with_kept_fragments(self, history: Sequence[Message]) -> list[Message]:
        """The run's message list as it should be stored: `history` with the kept fragments in place."""
        boundary = self._boundary if self._boundary is not None else len(history)
        return [*history[:boundary], *self._interleave(history[boundary:], boundary)]

    @property
    def unstored_fragments(self) -> list[int]:
        """Iterations whose request ended with a fragment the run does not store (replace): the reasoning those
        iterations produced saw a message its replay can never show again."""
        return sorted(self._sent - set(self._kept))

    def meta(self) -> LayoutMeta:
        """For `agent_runs.meta["segue.layout"]` (RunMeta.segue_layout)."""
        d = self._decision
        return LayoutMeta(
            configured=self.plan.rule.configured,
            mode=d.mode if d else None,
            reason=d.reason if d else None,
            iteration=d.iteration if d else None,
            basis=d.basis if d else None,
            restored_iteration=self._restored_iteration,
            unstored_fragments=self.unstored_fragments or None,
        )
