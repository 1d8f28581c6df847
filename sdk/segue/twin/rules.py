"""The vendors' prompt-cache numbers, as data: one `CacheRules` per (vendor, model), read from the catalog.

The numbers (minimum cacheable tokens per model, 128-token steps, 4 breakpoints, 20-block lookback) live in
catalogs/*.json with their sources (Anthropic prompt caching:
https://platform.claude.com/docs/en/build-with-claude/prompt-caching; OpenAI prompt caching:
https://developers.openai.com/api/docs/guides/prompt-caching). Only the TTL names and lengths, which are part of
each wire protocol, are here. `Twin(rules=...)` can supply other numbers without code changes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Literal

import attrs

from segue.catalog import Catalog, CatalogError, Resolved

Vendor = Literal["anthropic", "openai"]
CacheStyle = Literal["block", "prefix"]


@attrs.frozen(kw_only=True)
class CacheRules:
    """How one model's prompt cache behaves.

    style: "block" (Anthropic: explicit cache_control breakpoints, block-boundary lookback) or "prefix"
    (OpenAI: exact byte-prefix matching in fixed token increments).
    min_cacheable_tokens: shortest prefix that is written (below it: no write, no error).
    increment_tokens: granularity of a prefix-cache hit after the minimum (prefix style).
    lookback_blocks: earlier block boundaries checked before each breakpoint (block style).
    max_breakpoints: most cache_control markers one request may carry (block style).
    ttl_seconds: lifetime per TTL name; default_ttl names the one used when the request names none.
    """

    style: CacheStyle
    min_cacheable_tokens: int
    increment_tokens: int = 1
    lookback_blocks: int = 20
    max_breakpoints: int = 4
    ttl_seconds: Mapping[str, float] = attrs.field(factory=dict)
    default_ttl: str = "5m"

    def __attrs_post_init__(self) -> None:
        if self.default_ttl not in self.ttl_seconds:
            raise ValueError(
                f"CacheRules.default_ttl {self.default_ttl!r} is not one of ttl_seconds {sorted(self.ttl_seconds)}"
            )
        if self.min_cacheable_tokens < 0 or self.increment_tokens < 1 or self.lookback_blocks < 0:
            raise ValueError(
                "CacheRules needs min_cacheable_tokens >= 0, increment_tokens >= 1 and lookback_blocks >= 0; got "
                f"{self.min_cacheable_tokens}, {self.increment_tokens}, {self.lookback_blocks}"
            )

    def ttl(self, name: str | None) -> float:
        """Seconds for a TTL name (None = default); unknown names raise ValueError naming the known ones."""
        key = self.default_ttl if name is None else name
        try:
            return self.ttl_seconds[key]
        except KeyError:
            raise ValueError(f"unknown cache ttl {key!r}; expected one of {sorted(self.ttl_seconds)}") from None


#: Anthropic TTLs: "5m" (default, refreshed on use) and "1h".
ANTHROPIC_TTLS: Mapping[str, float] = {"5m": 300.0, "1h": 3600.0}
#: OpenAI retention: "in_memory" (~5-10 min of inactivity; the twin uses 10) and "24h" (extended).
OPENAI_TTLS: Mapping[str, float] = {"in_memory": 600.0, "24h": 86400.0}


@functools.cache
def _catalog() -> Catalog:
    return Catalog.load()


def catalog_rules(catalog: Catalog) -> Callable[[str, str], CacheRules]:
    """A `Twin(rules=...)` source reading another catalog (e.g. `Catalog.load([app_dir])`)."""
    return lambda model, vendor: rules_from(_resolved(model, vendor, catalog))


def _resolved(model: str, vendor: str, catalog: Catalog | None = None) -> Resolved:
    catalog = catalog or _catalog()
    try:
        return catalog.resolve(catalog.model_for(model, vendor), vendor)
    except CatalogError as e:
        raise ValueError(
            f"the twin has no cache rules for model {model!r} served by {vendor!r}: {e}; add the model to the "
            "catalog (an app catalog directory in SEGUE_CATALOG_PATH works) or pass Twin(rules=...)"
        ) from None


def rules_from(resolved: Resolved) -> CacheRules:
    """CacheRules from a resolved catalog entry: the numbers are catalog data, not twin code."""
    kind = resolved.get("llm", "cache_kind", default=None)
    if kind == "breakpoint":
        # Not emulated yet (issue 13): served as an exact-prefix cache without rounding, as before the catalog
        # named the breakpoint kind.
        kind = "prefix"
    if kind not in ("block", "prefix"):
        raise ValueError(f"{resolved.label}: catalog llm.cache_kind is {kind!r}; the twin emulates 'block' or 'prefix'")
    minimum = resolved.get("llm", "cache_min_tokens", default=None)
    if not isinstance(minimum, int):
        raise ValueError(f"{resolved.label}: catalog llm.cache_min_tokens is missing; the twin needs it")
    if kind == "block":
        return CacheRules(
            style="block",
            min_cacheable_tokens=minimum,
            lookback_blocks=resolved.get("llm", "cache_lookback_blocks", default=20),
            max_breakpoints=resolved.get("llm", "cache_max_breakpoints", default=4),
            ttl_seconds=ANTHROPIC_TTLS,
            default_ttl="5m",
        )
    return CacheRules(
        style="prefix",
        min_cacheable_tokens=minimum,
        increment_tokens=resolved.get("llm", "cache_increment_tokens", default=1),
        ttl_seconds=OPENAI_TTLS,
        default_ttl="in_memory",
    )


def vendor_of(model: str) -> Vendor:
    """The vendor a bare model id belongs to (claude-* is Anthropic; everything else is OpenAI-style)."""
    return "anthropic" if model.startswith("claude") else "openai"


def rules_for(model: str, vendor: str | None = None) -> CacheRules:
    """The cache rules for ``model`` served by ``vendor`` (inferred from the id when None), from the catalog."""
    return rules_from(_resolved(model, vendor or vendor_of(model)))


def openai_model_reasons(model: str) -> bool:
    """Whether an OpenAI model emits reasoning items (catalog llm.supports_reasoning)."""
    return _resolved(model, "openai").get("llm", "supports_reasoning", default=False) is True
