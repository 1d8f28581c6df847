"""What explains a miss besides segue's own comparison of the bodies: the vendor's verdict, which comes first, and
the causes segue stored (a prompt below the cache minimum, this request's or the previous one's).

The vendor's verdict (LlmInteraction.cache_verdict, segue.wire.cache_verdict) is compared with segue's own cause
(segue.cache.explain): `agree` when both say the same, `disagree` when they differ (both are shown, side by side),
`open` when the vendor could not say. A vendor comparison is about the request's structure: "The comparison is
about request structure, independent of whether the cache actually hit" (Anthropic's cache-diagnostics page), so
an unchanged verdict agrees with a clean extension, and an expired entry or a prompt below the minimum is left to
segue's stored causes.
"""

from __future__ import annotations

from segue.cache.collapse import verdict_text
from segue.generated import (
    CacheVerdict,
    ExplainCause,
    IterationExplanation,
    RunDetail,
    RunNote,
    Usage,
    VerdictAgreement,
)

__all__ = ["agreement", "below_minimum", "stored_cause", "verdict_line"]

#: The vendors' reasons each of segue's causes matches (Anthropic's and OpenAI's words; OpenAI has no separate
#: system part: its instructions and input are both `input_changed` in the twin and, as far as the docs say, the
#: vendor's).
MATCHING: dict[str, frozenset[str]] = {
    "model": frozenset({"model_changed"}),
    "tools": frozenset({"tools_changed"}),
    "system": frozenset({"system_changed", "input_changed"}),
    "messages": frozenset({"messages_changed", "input_changed", "context_compacted"}),
    "window": frozenset({"messages_changed", "input_changed"}),
    "fragment": frozenset({"messages_changed", "input_changed"}),
}
_CLEAN: frozenset[ExplainCause] = frozenset({"extends", "first"})


def agreement(cause: ExplainCause, verdict: CacheVerdict | None) -> VerdictAgreement | None:
    """How segue's `cause` compares with the vendor's verdict (None: no verdict)."""
    if verdict is None:
        return None
    if verdict.status == "unchanged":
        return "agree" if cause in _CLEAN else "disagree"
    if verdict.status == "changed":
        return "agree" if verdict.reason in MATCHING.get(cause, frozenset()) else "disagree"
    return "open"


def verdict_line(it: IterationExplanation, *, with_reason: bool = True) -> str | None:
    """The vendor's verdict first, then segue's own cause and whether it agrees (None: no verdict). Without
    `with_reason`, only the verdict and the agreement (a caller that prints segue's reason on its own line)."""
    verdict = it.vendor_verdict
    if verdict is None:
        return None
    said = f"the vendor says: {verdict_text(verdict)}"
    word = {"agree": "segue agrees", "disagree": "segue disagrees, it found"}.get(it.agreement or "", "segue")
    if not with_reason:
        return f"{said} ({word.split(',')[0]})" if it.agreement != "open" else said
    return f"{said}; {word}: {it.reason}"


#: What the vendors leave open when an intact prefix reads nothing and segue found no cause of its own.
VENDOR_OPEN = "the entry may have expired, been evicted, or lived on another cache node"


def below_minimum(run: RunDetail | None) -> RunNote | None:
    """The run's stored cache-below-minimum note with its numbers (None for runs recorded before they were kept)."""
    notes = run.meta.segue_notes if run is not None and run.meta is not None else None
    return next((n for n in notes or () if n.kind == "cache-below-minimum" and n.limit is not None), None)


def _uncached_below(usage: Usage, below: RunNote | None) -> bool:
    cached = bool(usage.cache_read_tokens) or bool(usage.cache_write_tokens)
    return below is not None and below.limit is not None and not cached and usage.input_tokens < below.limit


def stored_cause(
    cause: ExplainCause,
    usage: Usage,
    below: RunNote | None,
    before: Usage | None = None,
    before_below: RunNote | None = None,
) -> str | None:
    """The stored cause of a request that cached nothing, its numbers first, then what the vendor leaves open.
    `before`: the usage of the request this one continues, whose own prompt may have been below the minimum
    (`before_below`: its run's note, default `below`); then nothing was written for this one to read."""
    previous_below = before_below if before_below is not None else below
    if _uncached_below(usage, below):
        assert below is not None and below.limit is not None
        stated = (
            f"{usage.input_tokens:,} tokens, below the {below.limit:,}-token minimum the catalog gives for this "
            "model (llm.cache_min_tokens), so the vendor cached nothing"
        )
        return f"{stated}; beyond that the vendor leaves open: {VENDOR_OPEN}" if cause == "extends" else stated
    if cause != "extends":
        return None
    if usage.cache_read_tokens is None:
        return "the vendor did not report cache reads for this request"
    if usage.cache_read_tokens == 0 and before is not None and _uncached_below(before, previous_below):
        assert previous_below is not None and previous_below.limit is not None
        return (
            f"nothing to read: the previous request ({before.input_tokens:,} tokens) was below the "
            f"{previous_below.limit:,}-"
            "token minimum the catalog gives for this model (llm.cache_min_tokens), so the vendor wrote nothing "
            "for this one to read"
        )
    if usage.cache_read_tokens == 0:
        return f"the prefix was intact but nothing was read from the cache and segue recorded no cause: {VENDOR_OPEN}"
    return None
