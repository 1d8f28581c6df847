"""Where the trailing runtime-state fragment goes, per loop iteration (pure: no I/O, no vendor names).

An app may pass `trailing_state=fn`; each iteration `fn(RuntimeState)` returns text (or None) that is sent as
the LAST message of the request, a user message marked `meta["segue.fragment"]`. Two layouts:

- `replace`: only the newest fragment is sent; earlier ones are dropped from the request.
- `appendOnly`: every earlier fragment stays where it stood and the new one is appended, so each request is a
  byte-prefix extension of the previous one (what an exact-prefix cache rewards).

`auto` (the default) is appendOnly when the serving path's catalog row says `prefix_prompt_cache`, or when the
driver requires a stable reasoning prefix and the run declares native tools; otherwise replace. On a prefix
cache whose catalog row prices input and cache reads, the path that decides at iteration 1 is weighed by cost
too (`by_cost`): keeping a fragment costs its F tokens at the read price on every later request; replacing it
costs, where the vendor reuses a prompt only up to where an earlier request ended, what each step of the
conversation adds (D tokens, measured on the replayed runs and history) sent again at input less read price.
replace when read * F > (input - read) * D, else the flag's appendOnly; a first turn, with no step measured
yet, keeps the flag's (docs/layout.md, "auto by cost"). Explicit modes win. A runtime override that names a
vendor, or whose model-only catalog entry says yes, decides at once (by the flag alone);
otherwise the (model, vendor) that served iteration 1 decides. Then the decision is frozen for the run, so a
failover to a host with other cache rules never flips the layout mid-run.

Call sequence for the agent loop (one `LayoutPolicy` per run)::

    policy = LayoutPolicy(mode=..., catalog=..., trailing_state=fn,
                          requires_stable_reasoning_prefix=provider.requires_stable_reasoning_prefix,
                          declares_native_tools=bool(tools), model_override=..., vendor_override=...)
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

Iteration 1 of an undecided `auto` run is laid out replace-style. If the decision turns out appendOnly, iteration
1's fragment is restored once, at the iteration-1 boundary (where it stood: after the replayed runs, history
and new input), unless a fragment already sits at or after the boundary. Fragments before the boundary come from
replayed earlier appendOnly runs: they never count for that check, and every request of the run lays them out
the same way, so the prefix the first request established never changes. A run decided `replace` before its
first request (explicit, or by an override) drops them; otherwise they stay, because the earlier runs' own
requests carried them and keeping them is what lets the replayed conversation hit the cache.

The fragment text is wrapped in `<segue-runtime-state>` ... `</segue-runtime-state>`. Lookalike tags in user and
tool-result text (and inside the app's own state text) are escaped as `&lt;segue-runtime-state`, the same way
every iteration, so the prefix stays byte-stable. Assistant text is never rewritten: it is the model's own
output and may sit next to signed reasoning.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from segue._core.contracts import FRAGMENT_META_KEY
from segue._core.tokens import count_json
from segue.catalog import Catalog, CatalogError, Resolved
from segue.generated import LayoutMeta, Message, TextBlock, ToolResultBlock, Usage, get_converter

__all__ = [
    "FRAGMENT_ITERATION_KEY",
    "FRAGMENT_TAG",
    "KeptFragment",
    "LayoutDecision",
    "LayoutMode",
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

LayoutMode = Literal["auto", "appendOnly", "replace"]
ResolvedLayout = Literal["appendOnly", "replace"]
_MODES: tuple[str, ...] = ("auto", "appendOnly", "replace")

FRAGMENT_TAG = "segue-runtime-state"
#: Message.meta key holding the iteration a fragment was built for.
FRAGMENT_ITERATION_KEY = "segue.iteration"
_ABSENT = object()
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


def _tokens(message: Message) -> int:
    """segue's token estimate of a message's content (segue._core.tokens: ceil(utf-8 bytes / 4) of its JSON)."""
    return count_json(get_converter().unstructure(message.content, list[Any]))


def _step_tokens(messages: Sequence[Message]) -> int:
    """Tokens per answer step (an assistant message and what follows it) of earlier turns, fragments left out:
    what one iteration adds, as the conversation so far shows it (0 when it has no answer yet)."""
    steps = sum(m.role == "assistant" for m in messages)
    first = next((i for i, m in enumerate(messages) if m.role == "assistant"), len(messages))
    body = sum(_tokens(m) for m in messages[first:] if not is_fragment(m))
    return body // steps if steps else 0


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
class LayoutDecision:
    """The layout a run uses and why. `iteration` 0 = decided before the first call (configured or override).
    `basis`: configured | override | served | fallback."""

    mode: ResolvedLayout
    reason: str
    iteration: int
    basis: Literal["configured", "override", "served", "fallback"]
    frozen: bool


@attrs.frozen(kw_only=True)
class KeptFragment:
    """A fragment that stays in the run's message list: it sits after the first `index` history messages."""

    iteration: int
    index: int
    message: Message


class LayoutPolicy:
    """One per run: builds fragments, decides the layout (then freezes it), lays out each request."""

    def __init__(
        self,
        *,
        mode: LayoutMode = "auto",
        catalog: Catalog | None = None,
        trailing_state: TrailingStateFn | None = None,
        requires_stable_reasoning_prefix: bool = False,
        declares_native_tools: bool = False,
        model_override: str | None = None,
        vendor_override: str | None = None,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"trailing_state_layout must be one of {', '.join(_MODES)}; got {mode!r}")
        self.configured: LayoutMode = mode
        self._catalog = catalog
        self._trailing_state = trailing_state
        self._stable_prefix = requires_stable_reasoning_prefix
        self._native_tools = declares_native_tools
        self._decision: LayoutDecision | None = None
        self._boundary: int | None = None
        self._first_iteration: int | None = None
        self._first_fragment: Message | None = None  # laid out replace-style while undecided: may be restored
        self._restored_iteration: int | None = None
        self._restore_checked = False
        self._kept: dict[int, KeptFragment] = {}
        self._sent: set[int] = set()  # iterations whose request carried a fragment
        self._laid: dict[int, tuple[Message, Message | None]] = {}  # id -> (message before the boundary, on_wire)
        self._step_tokens = 0  # tokens per answer step of the replayed runs and history: the cost rule's D
        if mode != "auto":
            self._decision = LayoutDecision(
                mode=mode, reason=f"configured trailing_state_layout={mode!r}", iteration=0, basis="configured",
                frozen=False,
            )  # fmt: skip
        elif model_override is not None:
            self._decide_override(model_override, vendor_override)
        # Fixed before the first request, for the whole run: a run decided `replace` by then drops the replayed
        # runs' fragments from every request; otherwise they stay where the earlier runs' requests had them.
        self._drop_replayed_fragments = self._decision is not None and self._decision.mode == "replace"

    # --- decision ---------------------------------------------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog.load()
        return self._catalog

    @property
    def decision(self) -> LayoutDecision | None:
        """None while an `auto` run is still undecided (before the first serving path is observed)."""
        return self._decision

    def _decide_override(self, model: str, vendor: str | None) -> None:
        if vendor is not None:
            self._decision = self._decide(model, vendor, self._stable_prefix, 0, "override")
            return
        try:
            resolved = self.catalog.resolve(model)
        except CatalogError as e:
            log.info("layout: override model %r is not in the catalog (%s); deciding from the served path", model, e)
            return
        if resolved.prefix_prompt_cache:  # a model-only "no" defers: the serving vendor may still say yes
            self._decision = self._decide(model, None, self._stable_prefix, 0, "override")

    def _decide(
        self,
        model: str,
        vendor: str | None,
        stable_prefix: bool,
        iteration: int,
        basis: Literal["override", "served"],
    ) -> LayoutDecision:
        path = f"{model}@{vendor}" if vendor else model
        resolved: Resolved | None
        try:
            resolved = self.catalog.resolve(model, vendor)
        except CatalogError as e:
            resolved = None
            log.warning("layout: no catalog entry for %s (%s); treating prefix_prompt_cache as false", path, e)
            prefix_cache, why = False, f"catalog: no entry for {path}"
        else:
            value = resolved.get("llm", "prefix_prompt_cache", default=_ABSENT)
            src = resolved.source("llm", "prefix_prompt_cache")
            shown = "absent" if value is _ABSENT else json.dumps(value)
            prefix_cache = resolved.prefix_prompt_cache
            why = f"catalog: {resolved.label} prefix_prompt_cache={shown}" + (f" ({src})" if src else "")
            if resolved.note:
                why += f"; {resolved.note}"
        if prefix_cache and stable_prefix and self._native_tools:
            mode: ResolvedLayout = "appendOnly"
            why += "; the driver requires a stable reasoning prefix and the run declares native tools"
        elif prefix_cache:
            mode = "appendOnly"
            if basis == "served" and resolved is not None:
                mode, weighed = self.by_cost(resolved)
                why += f"; {weighed}" if weighed else ""
        elif stable_prefix and self._native_tools:
            mode = "appendOnly"
            why += "; the driver requires a stable reasoning prefix and the run declares native tools"
        else:
            mode = "replace"
        return LayoutDecision(mode=mode, reason=why, iteration=iteration, basis=basis, frozen=True)

    def by_cost(self, resolved: Resolved) -> tuple[ResolvedLayout, str | None]:
        """appendOnly or replace on a prefix cache by the catalog's prices and the conversation's sizes (module
        notes). Without a first fragment, a measured step, or input and cache-read prices (a self-hosted path
        costs nothing either way), the catalog's appendOnly stands."""
        prices = resolved.pricing
        fragment = self._first_fragment
        if fragment is None or prices is None or prices.cache_read is None or resolved.self_hosted:
            return "appendOnly", None
        if not self._step_tokens:
            return "appendOnly", "by cost: not weighed, no earlier step of the conversation to measure"
        read, rest = prices.cache_read, prices.input - prices.cache_read
        kept, step = _tokens(fragment), self._step_tokens
        keep, replace = read * kept, rest * step
        mode: ResolvedLayout = "replace" if keep > replace else "appendOnly"
        return mode, (
            f"by cost: keeping a {kept}-token fragment costs {read:g} x {kept} = {keep:g} $/M on each later request, "
            f"replacing it re-sends a {step}-token step at {prices.input:g} - {read:g}: {replace:g}, so {mode}"
        )

    def resume_from(self, stored: LayoutMeta) -> None:
        """A paused run resumes with the layout its earlier iterations were laid out by (RunMeta.segue_layout):
        the decision stays frozen for the run, whoever serves after the pause (a Failover backup would otherwise
        turn an appendOnly run into replace mid-run)."""
        if stored.mode not in ("appendOnly", "replace"):
            return  # undecided at the pause: the first path served after it decides, as for any run
        basis = stored.basis if stored.basis in ("configured", "override", "served", "fallback") else "served"
        reason = stored.reason if isinstance(stored.reason, str) else "decided before the pause"
        iteration = stored.iteration if isinstance(stored.iteration, int) else 0
        self._decision = LayoutDecision(mode=stored.mode, reason=reason, iteration=iteration, basis=basis, frozen=True)
        self._drop_replayed_fragments = stored.mode == "replace" and basis in ("configured", "override")
        restored = stored.restored_iteration
        self._restored_iteration = restored if isinstance(restored, int) else None

    def observe_served(
        self,
        iteration: int,
        vendor: str,
        model: str,
        *,
        requires_stable_reasoning_prefix: bool | None = None,
    ) -> LayoutDecision:
        """Report who answered `iteration` (after failover). The first report decides an undecided `auto` run and
        freezes it; later reports change nothing. `requires_stable_reasoning_prefix` is the serving driver's flag
        when it differs from the one the policy was built with."""
        if self._decision is None:
            stable = (
                self._stable_prefix if requires_stable_reasoning_prefix is None else requires_stable_reasoning_prefix
            )
            self._decision = self._decide(model, vendor, stable, iteration, "served")
        return self._decision

    def _mode_for(self, iteration: int) -> ResolvedLayout:
        if self._decision is not None:
            return self._decision.mode
        if self._first_iteration is not None and iteration > self._first_iteration:
            # A later iteration without any observed serving path: freeze replace rather than flip later, which
            # only iteration 1's fragment could survive.
            log.warning("layout: no serving path observed before iteration %d; freezing replace", iteration)
            self._decision = LayoutDecision(
                mode="replace", reason=f"no serving path observed before iteration {iteration}",
                iteration=iteration, basis="fallback", frozen=True,
            )  # fmt: skip
            return "replace"
        return "replace"  # iteration 1 of an undecided run

    # --- fragments and layout ---------------------------------------------------------------------------------

    def fragment_for(self, iteration: int, state: RuntimeState) -> Message | None:
        """The iteration's fragment from the app's `trailing_state`, or None (no callback, None or blank text)."""
        if state.iteration != iteration:
            raise ValueError(f"RuntimeState.iteration is {state.iteration} but the fragment is for {iteration}")
        if self._trailing_state is None:
            return None
        text = self._trailing_state(state)
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
            self._step_tokens = _step_tokens(pre)
        return laid

    def _before_boundary(self, messages: Sequence[Message]) -> list[Message]:
        """`on_wire` of each message before the boundary, each worked out once per run (the same objects on every
        request, so what the wire built for them can be reused)."""
        out = []
        for m in messages:
            found = self._laid.get(id(m))
            if found is None or found[0] is not m:
                found = self._laid[id(m)] = (m, self.on_wire(m))
            if found[1] is not None:
                out.append(found[1])
        return out

    def on_wire(self, message: Message) -> Message | None:
        """How a message before the iteration-1 boundary (replayed runs, history) goes on every request of this
        run: None when it is a replayed fragment this run leaves out; escaped like `assemble` does otherwise."""
        if is_fragment(message):
            return None if self._drop_replayed_fragments else message
        return _escaped(message)

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
            configured=self.configured,
            mode=d.mode if d else None,
            reason=d.reason if d else None,
            iteration=d.iteration if d else None,
            basis=d.basis if d else None,
            restored_iteration=self._restored_iteration,
            unstored_fragments=self.unstored_fragments or None,
        )
