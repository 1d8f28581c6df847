"""Cache diagnostics as the vendors document them: a request names an earlier response, the answer says where the
two first diverged.

Each answered request leaves a fingerprint (hashes and token counts, never the prompt), keyed by its response id:

- Anthropic keeps one only for a request that asks ("When the beta header is present, the API stores a lightweight
  fingerprint of each request, keyed by the response `id`"; the GA page: only for requests that include the
  `diagnostics` object). The comparison reports "the first point of divergence": the model (or `speed`: the
  pinned SDK's CacheMissModelChanged "whose `model` or `speed` differs"), then the prompt in the cache's order,
  tools, system, messages ("`tools`, `system`, and `messages` (in that order)", the prompt-caching page); messages
  only changed when an earlier entry differs, "instead of only having entries appended" (CacheMissMessagesChanged).
  Other prompt-affecting parameters such as `thinking` or `tool_choice` (and the effort, which the prompt-caching
  page lists with them) give `unavailable` (CacheMissUnavailable). A request the twin has no record of gives
  `previous_message_not_found`. No divergence: `diagnostics: null` ("`null` ... when it did and no prompt-cache
  divergence was detected"). "The comparison is about request structure, independent of whether the cache
  actually hit": an expired entry or a prompt below the minimum is no divergence.
- OpenAI compares with "a recent, completed response from the same organization", so every response leaves one;
  the reasons are the pinned SDK's PromptCacheDiagnosticsCacheMiss.reason values, checked in the order of that
  literal; no divergence is `cache_hit`, an unknown id `comparison_response_not_found`. Diagnostics are answered
  only where the catalog says the path has them (`llm.cache_diagnostics`: "GPT-5.6 and later supported models").

Missed tokens are the twin's count of the prompt after the divergence: Anthropic's of the previous request ("would
have been read from cache had the prefix matched the previous request"), OpenAI's of the current one ("input tokens
affected after the first detected divergence"), with the previous prefix that still matches as
`comparison_reusable_tokens`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from segue._core.tokens import count_json
from segue_twin._wire import ordered_json, strip_for_binding


@attrs.frozen(kw_only=True)
class Segment:
    """One part of the prompt: the reason a change there is reported as, its hash and its tokens."""

    reason: str
    digest: bytes
    tokens: int


@attrs.frozen(kw_only=True)
class Fingerprint:
    """What a comparison needs of one request: settings checked before the prompt, the prompt's segments in
    order, and settings checked after it (each setting: the reason a change is reported as, and its hash)."""

    before: tuple[tuple[str, bytes], ...]
    segments: tuple[Segment, ...]
    between: tuple[tuple[str, bytes], ...] = ()
    #: The segment index before which `between` is checked (Anthropic: the first message).
    between_at: int = 0

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.segments)


@attrs.frozen(kw_only=True)
class Divergence:
    reason: str
    #: Tokens of the prompt both share from the start.
    common_tokens: int


def _digest(value: Any) -> bytes:
    return hashlib.sha256(ordered_json(strip_for_binding(value))).digest()


def segment(reason: str, value: Any, tokens: int | None = None) -> Segment:
    cleaned = strip_for_binding(value)
    return Segment(reason=reason, digest=_digest(cleaned), tokens=count_json(cleaned) if tokens is None else tokens)


def setting(reason: str, value: Any) -> tuple[str, bytes]:
    return reason, _digest({"value": value})


def compare(previous: Fingerprint, current: Fingerprint) -> Divergence | None:
    """The first divergence of `current` from `previous` (None: `current` extends it)."""
    for (reason, before), (_, now) in zip(previous.before, current.before, strict=True):
        if before != now:
            return Divergence(reason=reason, common_tokens=0)
    common = 0
    for i, old in enumerate(previous.segments):
        if i == previous.between_at:
            for (reason, before), (_, now) in zip(previous.between, current.between, strict=True):
                if before != now:
                    return Divergence(reason=reason, common_tokens=common)
        new = current.segments[i] if i < len(current.segments) else None
        if new is None or new.digest != old.digest or new.reason != old.reason:
            first = min((s for s in (old, new) if s is not None), key=lambda s: _order(previous, s.reason))
            return Divergence(reason=first.reason, common_tokens=common)
        common += old.tokens
    if previous.between_at >= len(previous.segments):
        for (reason, before), (_, now) in zip(previous.between, current.between, strict=True):
            if before != now:
                return Divergence(reason=reason, common_tokens=common)
    return None


def _order(fingerprint: Fingerprint, reason: str) -> int:
    reasons = [s.reason for s in fingerprint.segments]
    return reasons.index(reason) if reason in reasons else len(reasons)


@attrs.define
class Fingerprints:
    """The fingerprints of answered requests, by response id."""

    by_id: dict[str, Fingerprint] = attrs.field(factory=dict)

    def remember(self, response_id: str, fingerprint: Fingerprint) -> None:
        self.by_id[response_id] = fingerprint

    def get(self, response_id: Any) -> Fingerprint | None:
        return self.by_id.get(response_id) if isinstance(response_id, str) else None


# -- Anthropic ------------------------------------------------------------------------------------------------


def anthropic_fingerprint(
    *,
    model: str,
    speed: Any,
    tools: Sequence[Any],
    system: Sequence[Any],
    messages: Sequence[Mapping[str, Any]],
    settings: Mapping[str, Any],
) -> Fingerprint:
    segments = [segment("tools_changed", t) for t in tools]
    segments += [segment("system_changed", b) for b in system]
    first_message = len(segments)
    segments += [segment("messages_changed", {"role": m["role"], "content": m["content"]}) for m in messages]
    return Fingerprint(
        before=(setting("model_changed", [model, speed]),),
        segments=tuple(segments),
        between=tuple(setting("unavailable", settings.get(k)) for k in sorted(settings)),
        between_at=first_message,
    )


def anthropic_answer(
    fingerprints: Fingerprints, requested: Mapping[str, Any], current: Fingerprint
) -> dict[str, Any] | None:
    """The response's `diagnostics` for a request whose `diagnostics` object is `requested`."""
    previous_id = requested.get("previous_message_id")
    if previous_id is None:
        return None
    previous = fingerprints.get(previous_id)
    if previous is None:
        return {"cache_miss_reason": {"type": "previous_message_not_found"}}
    found = compare(previous, current)
    if found is None:
        return None
    if found.reason == "unavailable":
        return {"cache_miss_reason": {"type": "unavailable"}}
    missed = max(previous.tokens - found.common_tokens, 0)
    return {"cache_miss_reason": {"type": found.reason, "cache_missed_input_tokens": missed}}


# -- OpenAI ---------------------------------------------------------------------------------------------------


def openai_fingerprint(
    *,
    model: str,
    cache_key: Any,
    service_tier: Any,
    tools: Any,
    text_format: Any,
    effort: Any,
    verbosity: Any,
    prompt: Sequence[Any],
) -> Fingerprint:
    return Fingerprint(
        before=(
            setting("model_changed", model),
            setting("prompt_cache_key_changed", cache_key),
            setting("tools_changed", tools),
            setting("text_format_changed", text_format),
            setting("reasoning_effort_changed", effort),
            setting("verbosity_changed", verbosity),
            setting("service_tier_changed", service_tier),
        ),
        segments=tuple(segment("input_changed", piece) for piece in prompt),
    )


def openai_answer(fingerprints: Fingerprints, comparison_id: str, current: Fingerprint) -> dict[str, Any]:
    """The response's `prompt_cache_diagnostics` for a request naming `comparison_id`."""
    previous = fingerprints.get(comparison_id)
    if previous is None:
        return {"type": "comparison_response_not_found"}
    found = compare(previous, current)
    if found is None:
        return {"type": "cache_hit"}
    return {
        "type": "cache_miss",
        "reason": found.reason,
        "cache_missed_tokens": max(current.tokens - found.common_tokens, 0),
        "comparison_reusable_tokens": found.common_tokens,
    }
