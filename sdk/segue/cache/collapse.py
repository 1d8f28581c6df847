"""A cache collapse, as it happens: a call that reads far less from the prompt cache than its plan expected.

The plan expects a request that continues an earlier response on the same vendor and model to read at least
what that response's request put in the cache or read from it (`ResponseRef.cached_tokens`): the conversation
only appends, so that prefix is still in front. The rule (segue's choice, documented in docs/replay.md):

    expected >= half of this request's prompt (EXPECTED_SHARE), and read < a tenth of it (READ_SHARE)

A call that expected little (a short conversation, a first request) never collapses; one that read some of what it
expected but not all is a partial miss for `segue runs explain`, not a collapse. The run says it once (the first
collapse): a CACHE_COLLAPSE run event, a warning on the `segue.cache` logger carrying the vendor's verdict, the
run's meta `segue.cache_collapse`, and a span event on the run's span.
"""

from __future__ import annotations

from segue.generated import CacheCollapse, CacheVerdict, ResponseRef, Usage

__all__ = ["EXPECTED_SHARE", "READ_SHARE", "collapse_of", "response_ref", "verdict_text"]

#: The plan expected at least this share of the prompt from the cache ...
EXPECTED_SHARE = 0.5
#: ... and the call read less than this share.
READ_SHARE = 0.1


def response_ref(response_id: str | None, vendor: str, model: str, usage: Usage) -> ResponseRef | None:
    """What a later request of the conversation names for diagnostics, and expects to read (None: no id)."""
    if not response_id:
        return None
    cached = (usage.cache_read_tokens or 0) + (usage.cache_write_tokens or 0)
    return ResponseRef(id=response_id, vendor=vendor, model=model, cached_tokens=cached)


def verdict_text(verdict: CacheVerdict | None) -> str:
    """The vendor's verdict in a few words, for messages and tables."""
    if verdict is None:
        return "not asked"
    if verdict.status == "changed":
        missed = f", ~{verdict.missed_tokens:,} tokens missed" if verdict.missed_tokens is not None else ""
        return f"{verdict.reason}{missed}"
    return {
        "unchanged": "no divergence from the previous request",
        "pending": "pending (the vendor had not finished comparing)",
        "not_found": "the vendor has no record of the previous response",
        "unavailable": "the vendor could not say",
        "unknown": "an answer segue does not know",
    }[verdict.status]


def collapse_of(
    previous: ResponseRef | None,
    *,
    vendor: str,
    model: str,
    usage: Usage,
    verdict: CacheVerdict | None,
    iteration: int,
) -> CacheCollapse | None:
    """The collapse this call is, by the rule above (None: it is not one)."""
    if previous is None or (previous.vendor, previous.model) != (vendor, model) or usage.cache_read_tokens is None:
        return None
    prompt = usage.input_tokens
    expected = min(previous.cached_tokens or 0, prompt)
    read = usage.cache_read_tokens
    if prompt <= 0 or expected < EXPECTED_SHARE * prompt or read >= READ_SHARE * prompt:
        return None
    message = (
        f"cache collapse on request {iteration}: read {read:,} of {prompt:,} prompt tokens from the cache where "
        f"{expected:,} were expected (the previous request cached them); the vendor says: {verdict_text(verdict)}"
    )
    return CacheCollapse(
        iteration=iteration,
        expected_tokens=expected,
        read_tokens=read,
        input_tokens=prompt,
        verdict=verdict,
        message=message,
    )
