"""The vendors' prompt-cache numbers, as data: one `CacheRules` per (vendor, model).

Defaults come from /work/shared/reference/wire-formats.md (Anthropic prompt caching:
https://platform.claude.com/docs/en/build-with-claude/prompt-caching; OpenAI prompt caching:
https://developers.openai.com/api/docs/guides/prompt-caching). The twin's logic reads only `CacheRules`
fields, so a catalog can later supply different numbers through `Twin(rules=...)` without code changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import attrs

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

#: Minimum cacheable prompt length per Anthropic model id (matched as the id or id + "-suffix", longest first).
ANTHROPIC_MIN_CACHEABLE: Mapping[str, int] = {
    "claude-opus-5": 512,
    "claude-opus-5-5": 512,
    "claude-fable-5": 512,
    "claude-fable-5-1": 512,
    "claude-mythos-5": 512,
    "claude-mythos-5-1": 512,
    "claude-opus-4-8": 1024,
    "claude-sonnet-5": 1024,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-4": 1024,
    "claude-opus-4-7": 2048,
    "claude-mythos-preview": 2048,
    "claude-3-5-haiku": 2048,
    "claude-haiku-3-5": 2048,
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
}
#: Used for Anthropic model ids missing from the table.
ANTHROPIC_DEFAULT_MIN_CACHEABLE = 1024

#: OpenAI (models before GPT-5.6): cached from 1024 tokens, then in 128-token steps.
OPENAI_MIN_CACHEABLE = 1024
OPENAI_INCREMENT = 128

#: OpenAI model-id prefixes that reason (emit reasoning items) unless reasoning.effort is "none".
OPENAI_REASONING_PREFIXES: tuple[str, ...] = ("gpt-5", "o1", "o3", "o4")


def _lookup(table: Mapping[str, int], model: str) -> int | None:
    for key in sorted(table, key=len, reverse=True):
        if model == key or model.startswith(key + "-"):
            return table[key]
    return None


def vendor_of(model: str) -> Vendor:
    """The vendor a bare model id belongs to (claude-* is Anthropic; everything else is OpenAI-style)."""
    return "anthropic" if model.startswith("claude") else "openai"


def rules_for(model: str, vendor: str | None = None) -> CacheRules:
    """The cache rules for ``model`` served by ``vendor`` (inferred from the id when None)."""
    chosen = vendor or vendor_of(model)
    if chosen == "anthropic":
        found = _lookup(ANTHROPIC_MIN_CACHEABLE, model)
        return CacheRules(
            style="block",
            min_cacheable_tokens=ANTHROPIC_DEFAULT_MIN_CACHEABLE if found is None else found,
            ttl_seconds=ANTHROPIC_TTLS,
            default_ttl="5m",
        )
    if chosen == "openai":
        return CacheRules(
            style="prefix",
            min_cacheable_tokens=OPENAI_MIN_CACHEABLE,
            increment_tokens=OPENAI_INCREMENT,
            ttl_seconds=OPENAI_TTLS,
            default_ttl="in_memory",
        )
    raise ValueError(f"unknown vendor {chosen!r}; expected 'anthropic' or 'openai'")


def openai_model_reasons(model: str) -> bool:
    """Whether an OpenAI model id reasons by default (o-series and GPT-5 family)."""
    return model.startswith(OPENAI_REASONING_PREFIXES)
