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

The shapes are read through the generated wire parsers (schemas/wire/anthropic.json `diagnostics`,
`cache_miss_reason`, CACHE_CHANGED, CACHE_VERDICTS; schemas/wire/openai_responses.json `prompt_cache_diagnostics`,
CACHE_MISS, CACHE_MISS_REASONS, CACHE_VERDICTS). An answer of any other shape is an `unknown` verdict carrying what
came, never an error: diagnostics explain a call, they never fail it. A pending Anthropic comparison stays
`pending`, never read as unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segue._support.readers import as_object
from segue.errors import MalformedResponseError
from segue.generated import CacheVerdict
from segue.generated.wire import anthropic as a
from segue.generated.wire import openai_responses as o
from segue.wire.common import Comparison

__all__ = ["anthropic_verdict", "openai_verdict"]


def _unknown(raw: Any, compared: str) -> CacheVerdict:
    return CacheVerdict(status="unknown", compared_with=compared, raw=dict(as_object(raw)))


def anthropic_verdict(raw: Any, comparison: Comparison | None) -> CacheVerdict | None:
    """The verdict in a Messages response's `diagnostics` (None: the request did not ask, or asked with nothing to
    compare)."""
    if comparison is None or comparison.previous_id is None:
        return None
    compared = comparison.previous_id
    if raw is None:
        return CacheVerdict(status="unchanged", compared_with=compared)
    try:
        diagnostics = a.parse_diagnostics(raw) if isinstance(raw, Mapping) else None
        reason = a.parse_cache_miss_reason(diagnostics.reason) if diagnostics and diagnostics.reason else None
    except MalformedResponseError:
        return _unknown(raw, compared)
    if diagnostics is None:
        return _unknown(raw, compared)
    if reason is None:
        return CacheVerdict(status="pending", compared_with=compared)
    kind = reason.kind or ""
    if kind in a.CACHE_VERDICTS:
        return CacheVerdict(status=a.CACHE_VERDICTS[kind], compared_with=compared)
    if kind in a.CACHE_CHANGED:
        missed = _tokens(reason.missed_tokens)
        return CacheVerdict(status="changed", reason=kind, missed_tokens=missed, compared_with=compared)
    return _unknown(raw, compared)


def openai_verdict(raw: Any, comparison: Comparison | None) -> CacheVerdict | None:
    """The verdict in a Response's `prompt_cache_diagnostics` (None: the request did not ask). A request that asked
    and got nothing back is `unavailable`: the SDK says the field requests diagnostics "when the feature is
    enabled"."""
    if comparison is None or comparison.previous_id is None:
        return None
    compared = comparison.previous_id
    if raw is None:
        return CacheVerdict(status="unavailable", compared_with=compared)
    try:
        found = o.parse_prompt_cache_diagnostics(raw) if isinstance(raw, Mapping) else None
    except MalformedResponseError:
        return _unknown(raw, compared)
    if found is None or found.kind is None:
        return _unknown(raw, compared)
    if found.kind in o.CACHE_VERDICTS:
        return CacheVerdict(status=o.CACHE_VERDICTS[found.kind], compared_with=compared)
    if found.kind == o.CACHE_MISS and found.reason in o.CACHE_MISS_REASONS:
        return CacheVerdict(
            status="changed",
            reason=found.reason,
            missed_tokens=_tokens(found.missed_tokens),
            reusable_tokens=_tokens(found.reusable_tokens),
            compared_with=compared,
        )
    return _unknown(raw, compared)


def _tokens(value: int | None) -> int | None:
    return value if value is not None and value >= 0 else None
