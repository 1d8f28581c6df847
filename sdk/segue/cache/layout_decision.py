"""Which trailing-state layout a conversation uses, decided once and then held (pure: no I/O, no vendor names).

The one place the layout is decided. Modes (`Agent(trailing_state_layout=...)`):

- `appendOnly` / `replace`: configured, always win.
- `auto` (the default, seed 004): appendOnly when the serving path's catalog row says `prefix_prompt_cache`, or
  when the driver requires a stable reasoning prefix and the run declares native tools; otherwise replace. Not
  weighed by cost.
- `byCost`: `auto`, except that on a priced prefix cache the layout is weighed by cost (`weigh`): keeping a
  fragment costs its F tokens at the read price on every later request; replacing it costs, where the vendor
  reuses a prompt only up to where an earlier request ended, a step of the conversation (D tokens) sent again at
  input less read price, plus the reasoning a replace layout drops: a run's reasoning produced right after a
  fragment the run does not store is dropped from every replay (cause `layout`), so each step's R reasoning
  tokens are counted at the output price the model paid to produce them. replace when
  read x F > (input - read) x D + output x R. A first turn has no step to measure, so it keeps the catalog's
  appendOnly unweighed; the first turn that can weigh decides for the conversation.

When. Before the first call (`LayoutRule.before_first_call`): the configuration, a paused run's own decision,
a runtime override (by the catalog flag alone), or the conversation's: a run that replays earlier runs (`runs=`)
reads back the decision the latest of them recorded under the same mode (RunMeta.segue_layout, basis
`conversation`) rather than deciding again, so `auto` cannot flip between the turns of one conversation. Else
at the first iteration, by the (model, vendor) that served it (`LayoutRule.on_served`). Either way the decision
is frozen for the run: a failover to a host with other cache rules never changes it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Literal, get_args

import attrs

from segue._core.contracts import FRAGMENT_META_KEY
from segue._core.tokens import count_json
from segue.catalog import Catalog, CatalogError, Resolved
from segue.catalog.pricing import Prices
from segue.generated import LayoutMeta, Message, ReasoningBlock, get_converter

log = logging.getLogger("segue.layout")

LayoutMode = Literal["auto", "appendOnly", "replace", "byCost"]
ResolvedLayout = Literal["appendOnly", "replace"]
LayoutBasis = Literal["configured", "override", "served", "fallback", "weighed", "conversation"]
LAYOUT_MODES: tuple[LayoutMode, ...] = get_args(LayoutMode)
#: The decisions a later run of the conversation reads back, per configured mode: `auto`'s by the catalog,
#: `byCost`'s once weighed (a first turn's unweighed appendOnly is not yet the conversation's decision).
_FINAL: dict[str, frozenset[str]] = {
    "auto": frozenset({"served", "conversation"}),
    "byCost": frozenset({"weighed", "conversation"}),
}
_ABSENT = object()


@attrs.frozen(kw_only=True)
class LayoutDecision:
    """The layout a run uses and why. `iteration` 0 = decided before the first call (configured, override, a
    pause, the conversation). `basis`: configured | override | served | fallback | weighed | conversation."""

    mode: ResolvedLayout
    reason: str
    iteration: int
    basis: LayoutBasis
    frozen: bool

    @property
    def drops_replayed_fragments(self) -> bool:
        """Whether the run's requests leave the replayed runs' fragments out: only a replace decided by the
        configuration or an override. Otherwise they stay where the earlier runs' requests had them, which is what
        lets the replayed conversation hit the cache and keep its reasoning."""
        return self.mode == "replace" and self.basis in ("configured", "override")


@attrs.frozen(kw_only=True)
class ConversationSizes:
    """What `byCost` weighs, in segue's token estimate: F, the run's first fragment; D, what one answer step of
    the conversation so far adds; R, the reasoning tokens of such a step (fragments left out of both)."""

    fragment: int
    step: int
    reasoning: int

    @classmethod
    def measure(cls, fragment: Message, earlier: Sequence[Message]) -> ConversationSizes:
        """F from `fragment`; D and R from `earlier`, the replayed runs and history, from its first answer on."""
        steps = sum(m.role == "assistant" for m in earlier)
        first = next((i for i, m in enumerate(earlier) if m.role == "assistant"), len(earlier))
        body = reasoning = 0
        for m in earlier[first:]:
            if m.meta is not None and m.meta.get(FRAGMENT_META_KEY) is True:
                continue
            body += _tokens(m.content)
            reasoning += sum(_tokens([b]) for b in m.content if isinstance(b, ReasoningBlock))
        return cls(
            fragment=_tokens(fragment.content),
            step=body // steps if steps else 0,
            reasoning=reasoning // steps if steps else 0,
        )


def _tokens(content: Sequence[Any]) -> int:
    """segue's token estimate of message content (segue._core.tokens: ceil(utf-8 bytes / 4) of its JSON)."""
    return count_json(get_converter().unstructure(content, list[Any]))


def weigh(prices: Prices, sizes: ConversationSizes) -> tuple[ResolvedLayout, str]:
    """appendOnly or replace on a prefix cache with a read price, by cost per later request (module notes)."""
    assert prices.cache_read is not None
    read, rest, out = prices.cache_read, prices.input - prices.cache_read, prices.output
    keep = read * sizes.fragment
    resend = rest * sizes.step
    dropped = out * sizes.reasoning
    mode: ResolvedLayout = "replace" if keep > resend + dropped else "appendOnly"
    lost = ""
    if sizes.reasoning:
        lost = f" + the step's {sizes.reasoning} reasoning tokens it drops at {out:g}: {dropped:g}"
    return mode, (
        f"by cost: keeping a {sizes.fragment}-token fragment costs {read:g} x {sizes.fragment} = {keep:g} $/M on each "
        f"later request, replacing it re-sends a {sizes.step}-token step at {prices.input:g} - {read:g}: "
        f"{resend:g}{lost}, so {mode}"
    )


@attrs.frozen(kw_only=True)
class LayoutRule:
    """What the decision depends on that is fixed for a run: the configured mode, the catalog, and whether the
    driver requires a stable reasoning prefix while the run declares native tools."""

    configured: LayoutMode
    catalog: Catalog
    stable_prefix: bool = False
    native_tools: bool = False

    def __attrs_post_init__(self) -> None:
        if self.configured not in LAYOUT_MODES:
            raise ValueError(f"trailing_state_layout must be one of {', '.join(LAYOUT_MODES)}; got {self.configured!r}")

    def before_first_call(
        self,
        *,
        model_override: str | None = None,
        vendor_override: str | None = None,
        resumed: LayoutMeta | None = None,
        conversation: Sequence[tuple[str, LayoutMeta | None]] = (),
    ) -> LayoutDecision | None:
        """The decision known before the run's first call, or None (the first path that serves decides).
        `resumed`: the paused run's own stored decision; `conversation`: (run id, its stored layout) of the replayed
        runs, oldest first."""
        if self.configured in ("appendOnly", "replace"):
            return LayoutDecision(
                mode=self.configured, reason=f"configured trailing_state_layout={self.configured!r}", iteration=0,
                basis="configured", frozen=False,
            )  # fmt: skip
        if resumed is not None and resumed.mode in ("appendOnly", "replace"):
            return _resumed(resumed)
        if model_override is not None:
            decided = self._override(model_override, vendor_override)
            if decided is not None:
                return decided
        return self._from_conversation(conversation)

    def on_served(
        self, model: str, vendor: str, iteration: int, sizes: ConversationSizes | None, stable_prefix: bool | None
    ) -> LayoutDecision:
        """The decision of an undecided run, by the (model, vendor) that served `iteration`. `sizes`: the run's
        first fragment and the conversation's steps (None: no fragment was sent); `stable_prefix`: the serving
        driver's flag when it differs from the rule's."""
        stable = self.stable_prefix if stable_prefix is None else stable_prefix
        return self._decide(model, vendor, stable, iteration, "served", sizes)

    def _override(self, model: str, vendor: str | None) -> LayoutDecision | None:
        if vendor is not None:
            return self._decide(model, vendor, self.stable_prefix, 0, "override", None)
        try:
            resolved = self.catalog.resolve(model)
        except CatalogError as e:
            log.info("layout: override model %r is not in the catalog (%s); deciding from the served path", model, e)
            return None
        if resolved.prefix_prompt_cache:  # a model-only "no" defers: the serving vendor may still say yes
            return self._decide(model, None, self.stable_prefix, 0, "override", None)
        return None

    def _from_conversation(self, runs: Sequence[tuple[str, LayoutMeta | None]]) -> LayoutDecision | None:
        final = _FINAL.get(self.configured, frozenset())
        for run_id, stored in reversed(runs):
            if stored is None or stored.configured != self.configured or stored.mode not in ("appendOnly", "replace"):
                continue
            if stored.basis not in final:
                continue
            reason = stored.reason or ""
            if stored.basis != "conversation":
                reason = f"the conversation's, as run {run_id} decided it: {reason}"
            return LayoutDecision(mode=stored.mode, reason=reason, iteration=0, basis="conversation", frozen=True)
        return None

    def _decide(
        self,
        model: str,
        vendor: str | None,
        stable_prefix: bool,
        iteration: int,
        basis: Literal["override", "served"],
        sizes: ConversationSizes | None,
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
        stable = "; the driver requires a stable reasoning prefix and the run declares native tools"
        decided: LayoutBasis = basis
        if prefix_cache and stable_prefix and self.native_tools:
            mode: ResolvedLayout = "appendOnly"
            why += stable
        elif prefix_cache:
            mode = "appendOnly"
            if self.configured == "byCost" and basis == "served" and resolved is not None:
                mode, weighed, done = self._by_cost(resolved, sizes)
                why += f"; {weighed}" if weighed else ""
                decided = "weighed" if done else basis
        elif stable_prefix and self.native_tools:
            mode = "appendOnly"
            why += stable
        else:
            mode = "replace"
        return LayoutDecision(mode=mode, reason=why, iteration=iteration, basis=decided, frozen=True)

    @staticmethod
    def _by_cost(resolved: Resolved, sizes: ConversationSizes | None) -> tuple[ResolvedLayout, str | None, bool]:
        """(mode, why, whether it was weighed). Without a first fragment, a measured step, or input and cache-read
        prices (a self-hosted path costs nothing either way), the catalog's appendOnly stands, unweighed."""
        prices = resolved.pricing
        if sizes is None or prices is None or prices.cache_read is None or resolved.self_hosted:
            return "appendOnly", None, False
        if not sizes.step:
            return "appendOnly", "by cost: not weighed, no earlier step of the conversation to measure", False
        return (*weigh(prices, sizes), True)


def _resumed(stored: LayoutMeta) -> LayoutDecision:
    """A paused run resumes with the layout its earlier iterations were laid out by: the decision stays frozen
    for the run, whoever serves after the pause (a Failover backup would otherwise turn an appendOnly run into
    replace mid-run)."""
    assert stored.mode in ("appendOnly", "replace")
    basis: LayoutBasis = stored.basis if stored.basis is not None else "served"
    reason = stored.reason if isinstance(stored.reason, str) else "decided before the pause"
    iteration = stored.iteration if isinstance(stored.iteration, int) else 0
    return LayoutDecision(mode=stored.mode, reason=reason, iteration=iteration, basis=basis, frozen=True)
