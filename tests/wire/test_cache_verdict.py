"""Reading the vendors' cache verdicts (segue.wire.cache_verdict): every shape the pinned SDKs define, pending kept as
pending, and any other shape recorded as `unknown`, never an error."""

from __future__ import annotations

import typing

from anthropic.types import CacheMissReason
from openai.types.responses.response import PromptCacheDiagnosticsCacheMiss

from segue.generated import CacheVerdict
from segue.generated.wire import anthropic as a
from segue.generated.wire import openai_responses as o
from segue.wire.cache_verdict import anthropic_verdict, openai_verdict
from segue.wire.common import Comparison

ASKED = Comparison(previous_id="msg_1")


def test_the_reasons_are_the_pinned_sdks() -> None:
    """Anthropic's CacheMissReason union and OpenAI's PromptCacheDiagnosticsCacheMiss.reason literal."""
    members = typing.get_args(typing.get_args(CacheMissReason)[0])
    kinds = {typing.get_args(m.model_fields["type"].annotation)[0] for m in members}
    assert kinds == a.CACHE_CHANGED | set(a.CACHE_VERDICTS)
    assert (
        set(typing.get_args(PromptCacheDiagnosticsCacheMiss.model_fields["reason"].annotation)) == o.CACHE_MISS_REASONS
    )


def test_anthropic() -> None:
    """Message.diagnostics: "`null` when the request did not supply `diagnostics`, or when it did and no prompt-cache
    divergence was detected"; Diagnostics.cache_miss_reason: "`null` means diagnosis is still pending"."""
    assert anthropic_verdict(None, None) is None
    assert anthropic_verdict(None, Comparison(previous_id=None)) is None, "opted in, nothing compared"
    assert anthropic_verdict(None, ASKED) == CacheVerdict(status="unchanged", compared_with="msg_1")
    assert anthropic_verdict({"cache_miss_reason": None}, ASKED) == CacheVerdict(
        status="pending", compared_with="msg_1"
    )
    changed = {"cache_miss_reason": {"type": "tools_changed", "cache_missed_input_tokens": 812}}
    assert anthropic_verdict(changed, ASKED) == CacheVerdict(
        status="changed", reason="tools_changed", missed_tokens=812, compared_with="msg_1"
    )
    missing = {"cache_miss_reason": {"type": "previous_message_not_found"}}
    assert anthropic_verdict(missing, ASKED) == CacheVerdict(status="not_found", compared_with="msg_1")
    odd = {"cache_miss_reason": {"type": "weather_changed"}}
    assert anthropic_verdict(odd, ASKED) == CacheVerdict(status="unknown", compared_with="msg_1", raw=odd)
    assert anthropic_verdict("nonsense", ASKED) == CacheVerdict(
        status="unknown", compared_with="msg_1", raw={"value": "nonsense"}
    )
    bad_tokens = {"cache_miss_reason": {"type": "system_changed", "cache_missed_input_tokens": "many"}}
    found = anthropic_verdict(bad_tokens, ASKED)
    assert found is not None and (found.status, found.raw) == ("unknown", bad_tokens)


def test_openai() -> None:
    """PromptCacheDiagnostics: cache_hit, cache_miss (reason, cache_missed_tokens, comparison_reusable_tokens),
    comparison_response_not_found, unavailable."""
    asked = Comparison(previous_id="resp_1")
    assert openai_verdict({"type": "cache_hit"}, asked) == CacheVerdict(status="unchanged", compared_with="resp_1")
    miss = {"type": "cache_miss", "reason": "input_changed", "cache_missed_tokens": 40, "comparison_reusable_tokens": 9}
    assert openai_verdict(miss, asked) == CacheVerdict(
        status="changed", reason="input_changed", missed_tokens=40, reusable_tokens=9, compared_with="resp_1"
    )
    assert openai_verdict({"type": "comparison_response_not_found"}, asked) == CacheVerdict(
        status="not_found", compared_with="resp_1"
    )
    assert openai_verdict(None, asked) == CacheVerdict(status="unavailable", compared_with="resp_1")
    odd = {"type": "cache_miss", "reason": "moon_phase_changed"}
    assert openai_verdict(odd, asked) == CacheVerdict(status="unknown", compared_with="resp_1", raw=odd)
    assert openai_verdict({"type": "cache_hit"}, None) is None
