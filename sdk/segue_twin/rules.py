"""The vendors' prompt-cache numbers, as data: one `CacheRules` per (vendor, model), read from the catalog.

The numbers (minimum cacheable tokens per model, 128-token steps, breakpoint limits, the 20-position lookback,
the 80-breakpoint matching window, the TTLs each serving path offers) live in catalogs/*.json with their sources
(Anthropic prompt caching: https://platform.claude.com/docs/en/build-with-claude/prompt-caching; OpenAI prompt
caching: https://developers.openai.com/api/docs/guides/prompt-caching). Only the TTL names' lengths in seconds,
which are part of each wire protocol, are here. `Twin(rules=...)` can supply other numbers without code changes.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Literal

import attrs

from segue._core.image_tokens import FORMULAS, ImageFormula
from segue.catalog import Catalog, CatalogError, Resolved

log = logging.getLogger("segue.twin")

Vendor = Literal["anthropic", "openai"]
CacheStyle = Literal["block", "prefix", "breakpoint"]


@attrs.frozen(kw_only=True)
class CacheRules:
    """How one model's prompt cache behaves.

    style: "block" (Anthropic: cache_control breakpoints, each looking back a bounded number of positions),
    "prefix" (OpenAI before GPT-5.6: exact byte-prefix matching in fixed token increments) or "breakpoint"
    (OpenAI GPT-5.6 and later: hits only where a request wrote a breakpoint, no lookback limit).
    min_cacheable_tokens: shortest prefix that is written (below it: no write, no error).
    increment_tokens: granularity of a prefix-cache hit after the minimum (prefix style).
    lookback_blocks: positions a breakpoint checks, its own block being the first (block style).
    max_breakpoints: block: most cache_control markers one request may carry; breakpoint: most breakpoints one
    request writes (the implicit one included).
    match_breakpoints: breakpoint style: how many of the conversation's latest breakpoints are matched against.
    ttl_seconds: lifetime per TTL name; default_ttl names the one used when the request names none.
    image_tokens: the image-token formula (segue._core.image_tokens), None where the catalog has none.
    best_effort_hits: keep entries of a best-effort retention (`BEST_EFFORT_TTLS`) until its maximum, not only
    for the lifetime the vendor guarantees (`Twin(best_effort_hits=True)`: the optimistic end of the range).
    """

    style: CacheStyle
    min_cacheable_tokens: int
    ttl_seconds: Mapping[str, float]
    default_ttl: str
    increment_tokens: int = 1
    lookback_blocks: int | None = None
    max_breakpoints: int | None = None
    match_breakpoints: int | None = None
    best_effort_hits: bool = False
    #: How the model counts an image (catalog llm.image_tokens; None: no documented formula, see segue_twin.images).
    image_tokens: ImageFormula | None = None
    #: The path answers cache diagnostics (catalog llm.cache_diagnostics; segue_twin.diagnostics).
    diagnostics: bool = False

    def __attrs_post_init__(self) -> None:
        if self.default_ttl not in self.ttl_seconds:
            raise ValueError(
                f"CacheRules.default_ttl {self.default_ttl!r} is not one of ttl_seconds {sorted(self.ttl_seconds)}"
            )
        needed = {
            "block": ("lookback_blocks", "max_breakpoints"),
            "breakpoint": ("max_breakpoints", "match_breakpoints"),
        }
        missing = [name for name in needed.get(self.style, ()) if getattr(self, name) is None]
        if missing:
            raise ValueError(f"CacheRules of style {self.style!r} needs {', '.join(missing)}")
        numbers = {"increment_tokens": self.increment_tokens}
        numbers.update(
            (name, value)
            for name in ("lookback_blocks", "max_breakpoints", "match_breakpoints")
            if (value := getattr(self, name)) is not None
        )
        if self.min_cacheable_tokens < 0 or any(value < 1 for value in numbers.values()):
            raise ValueError(
                f"CacheRules needs min_cacheable_tokens >= 0 and the other numbers >= 1; got "
                f"min_cacheable_tokens={self.min_cacheable_tokens}, {numbers}"
            )

    def number(self, name: Literal["lookback_blocks", "max_breakpoints", "match_breakpoints"]) -> int:
        """A limit this style uses (present by construction); ValueError for one the style does not have."""
        value: int | None = getattr(self, name)
        if value is None:
            raise ValueError(f"a {self.style!r} cache has no {name}")
        return value

    def ttl(self, name: str | None) -> float:
        """Seconds for a TTL name (None = default); unknown names raise ValueError naming the known ones."""
        key = self.default_ttl if name is None else name
        try:
            seconds = self.ttl_seconds[key]
        except KeyError:
            raise ValueError(f"unknown cache ttl {key!r}; expected one of {sorted(self.ttl_seconds)}") from None
        if key in BEST_EFFORT_TTLS and not self.best_effort_hits:
            return TTL_SECONDS[BEST_EFFORT_TTLS[key]]
        return seconds


#: Seconds per TTL name, as each wire protocol spells them. Anthropic: "5m" (refreshed on use) and "1h".
#: OpenAI retention before GPT-5.6: "in_memory" (cleared after 5-10 minutes of inactivity; the twin uses 10) and
#: "24h". OpenAI GPT-5.6 `prompt_cache_options.ttl`: "30m" and "12h" (minimum lifetimes; the twin expires at them).
#: Which names a model offers, and which is its default, is catalog data (`llm.cache_ttls`, first = default).
TTL_SECONDS: Mapping[str, float] = {
    "5m": 300.0,
    "1h": 3600.0,
    "in_memory": 600.0,
    "24h": 86400.0,
    "30m": 1800.0,
    "12h": 43200.0,
}

#: Retentions the vendor states as a maximum, not a lifetime, and the guaranteed retention the twin holds them to
#: by default. OpenAI `24h` "keeps cached prefixes active for longer, up to a maximum of 24 hours. This field
#: expresses a maximum retention policy" (the pinned openai SDK's `prompt_cache_retention`): nothing promises a hit
#: hours later, so the twin hits a `24h` entry only within what `in_memory` keeps (600 s of inactivity; "for
#: longer" is never shorter), and until the 24 h maximum only with `Twin(best_effort_hits=True)`.
BEST_EFFORT_TTLS: Mapping[str, str] = {"24h": "in_memory"}


@functools.cache
def _catalog() -> Catalog:
    return Catalog.load()


def catalog_rules(catalog: Catalog) -> Callable[[str, str], CacheRules]:
    """A `Twin(rules=...)` source reading another catalog (e.g. `Catalog.load([app_dir])`)."""
    return lambda model, vendor: rules_from(_resolved(model, vendor, catalog))


def _resolved(model: str, vendor: str, catalog: Catalog | None = None) -> Resolved:
    catalog = catalog or _catalog()
    try:
        return catalog.resolve(model, vendor)  # a model the catalog does not list: the vendor's defaults
    except CatalogError as e:
        raise ValueError(
            f"the twin has no cache rules for model {model!r} served by {vendor!r}: {e}; add the model to the "
            "catalog (an app catalog directory in SEGUE_CATALOG_PATH works) or pass Twin(rules=...)"
        ) from None


def rules_from(resolved: Resolved) -> CacheRules:
    """CacheRules from a resolved catalog entry: the numbers are catalog data, not twin code."""
    kind = resolved.get("llm", "cache_kind", default=None)
    if kind not in ("block", "prefix", "breakpoint"):
        raise ValueError(
            f"{resolved.label}: catalog llm.cache_kind is {kind!r}; the twin emulates 'block', 'prefix' or 'breakpoint'"
        )
    minimum = resolved.get("llm", "cache_min_tokens", default=None)
    if not isinstance(minimum, int):
        # segue's catalog has no minimum for this model: none was found in a vendor source (the catalog leaves it
        # absent rather than guess):
        # serve it rather than fail, cache from the first token, and say so once, so nobody reads the twin's
        # numbers for it as the vendor's.
        _warn_no_minimum(resolved.label)
        minimum = 0
    ttls = _ttls(resolved)
    need = {
        "block": ("cache_lookback_blocks", "cache_max_breakpoints"),
        "breakpoint": ("cache_max_breakpoints", "cache_match_breakpoints"),
        "prefix": ("cache_increment_tokens",),
    }[kind]
    numbers = {key: resolved.get("llm", key, default=None) for key in need}
    missing = [key for key, value in numbers.items() if not isinstance(value, int)]
    if missing:
        raise ValueError(f"{resolved.label}: catalog llm.{', llm.'.join(missing)} missing; a {kind!r} cache needs it")
    return CacheRules(
        style=kind,
        min_cacheable_tokens=minimum,
        ttl_seconds=ttls,
        default_ttl=next(iter(ttls)),
        increment_tokens=numbers.get("cache_increment_tokens", 1),
        lookback_blocks=numbers.get("cache_lookback_blocks"),
        max_breakpoints=numbers.get("cache_max_breakpoints"),
        match_breakpoints=numbers.get("cache_match_breakpoints"),
        image_tokens=_image_formula(resolved),
        diagnostics=resolved.cache_diagnostics,
    )


def _image_formula(resolved: Resolved) -> ImageFormula | None:
    formula = resolved.get("llm", "image_tokens", default=None)
    for known in FORMULAS:  # the catalog schema allows only these
        if formula == known:
            return known
    return None


@functools.cache
def _warn_no_minimum(label: str) -> None:
    log.warning(
        "twin: segue's catalog has no minimum for %s (no llm.cache_min_tokens: none was found in a vendor source, "
        "so the catalog leaves it absent); the twin caches it from the first token, where the vendor may not. Add "
        "llm.cache_min_tokens in an app catalog (SEGUE_CATALOG_PATH) to emulate a minimum.",
        label,
    )


def _ttls(resolved: Resolved) -> dict[str, float]:
    """The offered TTLs in catalog order (the first is the default), with their wire lengths in seconds."""
    names = resolved.get("llm", "cache_ttls", default=None)
    if not isinstance(names, list) or not names:
        raise ValueError(f"{resolved.label}: catalog llm.cache_ttls is missing; the twin needs the offered TTLs")
    unknown = [name for name in names if name not in TTL_SECONDS]
    if unknown:
        raise ValueError(
            f"{resolved.label}: catalog llm.cache_ttls names {unknown}, which the twin does not know; "
            f"expected names from {sorted(TTL_SECONDS)}"
        )
    return {name: TTL_SECONDS[name] for name in names}


def vendor_of(model: str) -> Vendor:
    """The vendor a bare model id belongs to (claude-* is Anthropic; everything else is OpenAI-style)."""
    return "anthropic" if model.startswith("claude") else "openai"


def rules_for(model: str, vendor: str | None = None) -> CacheRules:
    """The cache rules for ``model`` served by ``vendor`` (inferred from the id when None), from the catalog."""
    return rules_from(_resolved(model, vendor or vendor_of(model)))


def openai_model_reasons(model: str, vendor: str = "openai") -> bool:
    """Whether a model on an OpenAI-shaped endpoint reasons (catalog llm.supports_reasoning)."""
    return _resolved(model, vendor).get("llm", "supports_reasoning", default=False) is True
