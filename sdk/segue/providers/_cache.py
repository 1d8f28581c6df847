"""Which serving paths cache only at breakpoints: the catalog's answer, looked up once per model, for a driver.

The OpenAI drivers send `prompt_cache_breakpoint` markers and `prompt_cache_options` only where the resolved
serving path says `llm.cache_kind: "breakpoint"`, as many as its `llm.cache_max_breakpoints`, and refuse a TTL its
`llm.cache_ttls` does not offer. No model name is written here: an app changes the answer with a catalog layer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs

from segue._core.contracts import ProviderNote, ProviderRequest
from segue.cache.ttl import AUTO, AutoTTL, TtlChoice, auto_ttl
from segue.catalog import Catalog, CatalogError, Resolved
from segue.errors import WireError
from segue.generated import ModelSettings
from segue.wire.breakpoints import BreakpointCache, CacheMode, CacheTTL
from segue.wire.common import Comparison
from segue.wire.settings import refuse_off_path

__all__ = ["AUTO", "AutoTTLPaths", "BreakpointPaths", "CatalogRows", "check_path_context", "comparison"]

log = logging.getLogger("segue.providers")


class CatalogRows:
    """A driver's serving paths as the catalog resolves them, one lookup per model (None: the catalog cannot
    resolve it, logged once). `catalog` defaults to `Catalog.load()` on first use; pass one to layer an app's."""

    def __init__(self, vendor: str, catalog: Catalog | None) -> None:
        self.vendor = vendor
        self._catalog = catalog
        self._known: dict[str, Resolved | None] = {}

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog.load()
        return self._catalog

    def resolve(self, model: str) -> Resolved | None:
        if model not in self._known:
            try:
                self._known[model] = self.catalog.resolve(model, self.vendor)
            except CatalogError as e:
                log.warning("no catalog entry for %s@%s (%s); using no catalog facts for it", model, self.vendor, e)
                self._known[model] = None
        return self._known[model]


class BreakpointPaths:
    """Per driver: `for_model(model)` is the request's BreakpointCache, or None when the path has no such cache."""

    def __init__(self, vendor: str, catalog: Catalog | None, *, mode: CacheMode, ttl: CacheTTL) -> None:
        self.mode: CacheMode = mode
        self.ttl: CacheTTL = ttl
        self.rows = CatalogRows(vendor, catalog)
        self._known: dict[str, BreakpointCache | None] = {}

    def for_model(self, model: str) -> BreakpointCache | None:
        if model not in self._known:
            resolved = self.rows.resolve(model)
            self._known[model] = self._breakpoints(resolved) if resolved is not None else None
        return self._known[model]

    def _breakpoints(self, resolved: Resolved) -> BreakpointCache | None:
        if resolved.cache_kind != "breakpoint":
            return None
        writes = resolved.cache_max_breakpoints
        if writes is None or writes < 1:
            raise WireError(
                f"{resolved.label}: the catalog says llm.cache_kind 'breakpoint' but llm.cache_max_breakpoints (writes "
                f"per request) is {writes!r}; set it on the serving path's catalog row"
            )
        offered = resolved.get("llm", "cache_ttls")
        if isinstance(offered, list) and self.ttl not in offered:
            raise WireError(
                f"cache_ttl {self.ttl!r} is not offered on {resolved.label} (catalog llm.cache_ttls: {offered}); "
                "configure the driver with one of those"
            )
        return BreakpointCache(mode=self.mode, ttl=self.ttl, max_breakpoints=writes)


class AutoTTLPaths:
    """`cache_ttl="auto"` for a driver: per model, the serving path's lifetimes and prices from the catalog, and
    per request the lifetime chosen from the conversation's pauses (`ProviderRequest.pauses`), with the note that
    records it on the run (kind `ttl-chosen`)."""

    def __init__(self, rows: CatalogRows) -> None:
        self.rows = rows
        self._known: dict[str, AutoTTL] = {}

    def check(self, model: str, wire_ttls: Sequence[str]) -> None:
        """ValueError when `model`'s path cannot choose (one lifetime, an unpriced or durationless one, one the
        driver's wire cannot send, no catalog entry): called when the driver is built, before any run row."""
        self.terms(model, wire_ttls)

    def terms(self, model: str, wire_ttls: Sequence[str]) -> AutoTTL:
        if model not in self._known:
            try:
                resolved = self.rows.catalog.resolve(model, self.rows.vendor)
            except CatalogError as e:
                raise ValueError(
                    f"cache_ttl='auto' chooses from the catalog's cache lifetimes and prices, but {model}@"
                    f"{self.rows.vendor} has no catalog entry ({e}); name a TTL explicitly or add the path in a "
                    "catalog layer"
                ) from e
            terms = auto_ttl(resolved)
            unsendable = [name for name, _, _ in terms.lifetimes if name not in wire_ttls]
            if unsendable:
                raise ValueError(
                    f"cache_ttl='auto' may choose {unsendable} on {resolved.label} (catalog llm.cache_ttls), which "
                    f"this driver's wire cannot send (it takes {list(wire_ttls)}); fix the catalog layer or name a "
                    "TTL explicitly"
                )
            self._known[model] = terms
        return self._known[model]

    def choose(self, model: str, pauses: Sequence[float], wire_ttls: Sequence[str]) -> tuple[str, ProviderNote]:
        try:
            choice: TtlChoice = self.terms(model, wire_ttls).choose(pauses)
        except ValueError as e:  # a runtime model override whose path cannot choose
            raise WireError(str(e)) from e
        return choice.ttl, ProviderNote(kind="ttl-chosen", message=choice.reason)


def comparison(rows: CatalogRows, model: str, request: ProviderRequest, *, opt_in: bool) -> Comparison | None:
    """The request's ask for cache diagnostics: only when the run asks (`request.diagnose`) and the serving path's
    catalog row says `llm.cache_diagnostics`; it names the previous response when this driver's vendor answered
    it. `opt_in`: ask with nothing to compare (Anthropic keeps a fingerprint only of requests that ask: "On the
    first turn, pass "previous_message_id": null to opt in without a prior message to compare against")."""
    if not request.diagnose:
        return None
    resolved = rows.resolve(model)
    if resolved is None or not resolved.cache_diagnostics:
        return None
    previous = request.previous_response
    previous_id = previous.id if previous is not None and previous.vendor == rows.vendor else None
    if previous_id is None and not opt_in:
        return None
    return Comparison(previous_id=previous_id)


def check_path_context(rows: CatalogRows, model: str, settings: ModelSettings, wire: str) -> None:
    """Refuse model_settings.compaction / context_editing on a serving path whose catalog row does not say the
    vendor documents them there (`llm.vendor_compaction`, `llm.context_editing`), before anything is written."""
    resolved = rows.resolve(model)
    fields = attrs.fields(ModelSettings)
    takes = (
        {fields.compaction.name: resolved.vendor_compaction, fields.context_editing.name: resolved.context_editing}
        if resolved is not None
        else {}
    )
    refuse_off_path(settings, wire, resolved.label if resolved is not None else f"{model}@{rows.vendor}", takes)
