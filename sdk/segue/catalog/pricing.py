"""Prices of one serving path and the dollar cost of a usage record, with cache writes priced per TTL.

A price the catalog does not know stays unknown: a cost that needs it is refused with the missing key named,
never computed as if the price were zero or the input price.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from segue.generated import Usage


def _read_only(prices: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(prices))


@attrs.frozen(kw_only=True)
class Prices:
    """Dollars per million tokens for one serving path.

    `cache_write` maps a TTL name (as the path's `llm.cache_ttls` spells it) to the price of writes with that
    lifetime; `default_ttl` (the first of `cache_ttls`) prices writes the vendor did not attribute to a TTL.
    None, or a TTL missing from `cache_write`, means the catalog does not know that price."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: Mapping[str, float] = attrs.field(factory=dict, converter=_read_only)
    default_ttl: str | None = None

    def writes_by_ttl(self, usage: Usage) -> dict[str, int]:
        """The usage's cache writes per TTL; writes it does not attribute count at the default TTL ("" if none)."""
        listed = {ttl: n for ttl, n in (usage.cache_write_tokens_by_ttl or {}).items() if n}
        total = usage.cache_write_tokens
        attributed = sum(listed.values())
        if total is not None and attributed > total:
            raise ValueError(
                f"usage.cache_write_tokens_by_ttl adds up to {attributed} tokens, more than cache_write_tokens "
                f"({total}); the per-TTL counts must be parts of the total"
            )
        rest = 0 if total is None else total - attributed
        if rest:
            key = self.default_ttl or ""
            listed[key] = listed.get(key, 0) + rest
        return listed

    def missing(self, usage: Usage) -> list[str]:
        """The price keys this usage needs and the catalog does not know (empty: the cost can be computed)."""
        gaps = [gap for part in usage.compaction_iterations or () for gap in self.missing(part)]
        if usage.cache_read_tokens and self.cache_read is None:
            gaps.append("pricing.cache_read")
        for ttl in self.writes_by_ttl(usage):
            if ttl not in self.cache_write:
                gaps.append(f"pricing.cache_write[{ttl!r}]" if ttl else "llm.cache_ttls (writes name no TTL)")
        return gaps

    def cost(self, usage: Usage) -> float:
        """Dollars for one usage record (input_tokens is the whole prompt; missing cache counts are 0), with the
        vendor's compaction sampling it reports apart (`compaction_iterations`, not in its top-level counts).

        Raises ValueError when the counts contradict each other and LookupError (KeyError) naming the price
        that is unknown."""
        read = usage.cache_read_tokens or 0
        writes = self.writes_by_ttl(usage)
        written = sum(writes.values())
        if read + written > usage.input_tokens:
            raise ValueError(
                f"usage.cache_read_tokens + cache_write_tokens ({read} + {written}) exceed input_tokens "
                f"({usage.input_tokens}); input_tokens must count the whole prompt, cached parts included"
            )
        gaps = self.missing(usage)
        if gaps:
            raise KeyError(", ".join(gaps))
        dollars = (usage.input_tokens - read - written) * self.input + usage.output_tokens * self.output
        dollars += read * (self.cache_read or 0.0)
        dollars += sum(tokens * self.cache_write[ttl] for ttl, tokens in writes.items())
        return dollars / 1_000_000 + sum(self.cost(part) for part in usage.compaction_iterations or ())


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


def prices_from(pricing: Any, cache_ttls: Any) -> Prices | None:
    """Prices from a resolved `pricing` bag, or None when the input or output price is unknown."""
    bag = pricing if isinstance(pricing, Mapping) else {}
    base, out = _number(bag.get("input")), _number(bag.get("output"))
    if base is None or out is None:
        return None
    writes = bag.get("cache_write")
    known = {t: p for t, v in (writes.items() if isinstance(writes, Mapping) else ()) if (p := _number(v)) is not None}
    ttls = cache_ttls if isinstance(cache_ttls, list) and cache_ttls else None
    return Prices(
        input=base,
        output=out,
        cache_read=_number(bag.get("cache_read")),
        cache_write=known,
        default_ttl=ttls[0] if ttls and isinstance(ttls[0], str) else None,
    )
