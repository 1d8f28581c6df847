"""The vendors' own verdicts on a request's cache reuse (cache diagnostics), read as a typed CacheVerdict.

A request that names an earlier response gets the vendor's comparison of the two back:

- Anthropic (`diagnostics.previous_message_id` -> the response's `diagnostics`): the pinned SDK's `Message.diagnostics`
  is "`null` when the request did not supply `diagnostics`, or when it did and no prompt-cache divergence was
  detected", and its `cache_miss_reason` "`null` means diagnosis is still pending"; the reasons are the SDK's
  CacheMiss* types (`model_changed`, `system_changed`, `tools_changed`, `messages_changed` with
  `cache_missed_input_tokens`; `previous_message_not_found`; `unavailable`).
- OpenAI Responses (`prompt_cache_options.comparison_response_id` -> `prompt_cache_diagnostics`): the pinned SDK's
  PromptCacheDiagnostics is `cache_hit`, `cache_miss` (`reason`, `cache_missed_tokens`,
  `comparison_reusable_tokens`), `comparison_response_not_found` or `unavailable`.

An answer of any other shape is an `unknown` verdict carrying what came, never an error: diagnostics explain a
call, they never fail it. A pending Anthropic comparison stays `pending`, never read as unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segue.generated import CacheVerdict, CacheVerdictStatus
from segue.wire.common import Comparison

__all__ = ["ANTHROPIC_CHANGED", "OPENAI_REASONS", "anthropic_verdict", "openai_verdict"]

#: Anthropic's reasons that name a change, each with `cache_missed_input_tokens` (the pinned SDK's CacheMiss* types).
ANTHROPIC_CHANGED = frozenset({"model_changed", "system_changed", "tools_changed", "messages_changed"})
_ANTHROPIC_OTHER: dict[str, CacheVerdictStatus] = {
    "previous_message_not_found": "not_found",
    "unavailable": "unavailable",
}
#: OpenAI's cache_miss reasons (the pinned SDK's PromptCacheDiagnosticsCacheMiss.reason literal).
OPENAI_REASONS = frozenset(
    {
        "model_changed",
        "prompt_cache_key_changed",
        "tools_changed",
        "text_format_changed",
        "reasoning_effort_changed",
        "verbosity_changed",
        "context_compacted",
        "input_changed",
        "service_tier_changed",
    }
)
_OPENAI_OTHER: dict[str, CacheVerdictStatus] = {
    "cache_hit": "unchanged",
    "comparison_response_not_found": "not_found",
    "unavailable": "unavailable",
}


def _tokens(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _unknown(raw: Any, compared: str | None) -> CacheVerdict:
    return CacheVerdict(status="unknown", compared_with=compared, raw=raw if isinstance(raw, dict) else {"value": raw})


def anthropic_verdict(raw: Any, comparison: Comparison | None) -> CacheVerdict | None:
    """The verdict in a Messages response's `diagnostics` (None: the request did not ask, or asked with nothing to
    compare)."""
    if comparison is None or comparison.previous_id is None:
        return None
    compared = comparison.previous_id
    if raw is None:
        return CacheVerdict(status="unchanged", compared_with=compared)
    if not isinstance(raw, Mapping) or "cache_miss_reason" not in raw:
        return _unknown(raw, compared)
    reason = raw["cache_miss_reason"]
    if reason is None:
        return CacheVerdict(status="pending", compared_with=compared)
    kind = reason.get("type") if isinstance(reason, Mapping) else None
    if kind in _ANTHROPIC_OTHER:
        return CacheVerdict(status=_ANTHROPIC_OTHER[kind], compared_with=compared)
    if kind in ANTHROPIC_CHANGED:
        assert isinstance(reason, Mapping)
        missed = _tokens(reason.get("cache_missed_input_tokens"))
        return CacheVerdict(status="changed", reason=kind, missed_tokens=missed, compared_with=compared)
    return _unknown(dict(raw), compared)


def openai_verdict(raw: Any, comparison: Comparison | None) -> CacheVerdict | None:
    """The verdict in a Response's `prompt_cache_diagnostics` (None: the request did not ask). A request that asked
    and got nothing back is `unavailable`: the SDK says the field requests diagnostics "when the feature is
    enabled"."""
    if comparison is None or comparison.previous_id is None:
        return None
    compared = comparison.previous_id
    if raw is None:
        return CacheVerdict(status="unavailable", compared_with=compared)
    kind = raw.get("type") if isinstance(raw, Mapping) else None
    if kind in _OPENAI_OTHER:
        return CacheVerdict(status=_OPENAI_OTHER[kind], compared_with=compared)
    if kind == "cache_miss" and isinstance(raw, Mapping) and raw.get("reason") in OPENAI_REASONS:
        return CacheVerdict(
            status="changed",
            reason=str(raw["reason"]),
            missed_tokens=_tokens(raw.get("cache_missed_tokens")),
            reusable_tokens=_tokens(raw.get("comparison_reusable_tokens")),
            compared_with=compared,
        )
    return _unknown(dict(raw) if isinstance(raw, Mapping) else raw, compared)
