"""The web streams' final event carries the vendor's cache verdict ahead of the cache share, where a run has one
(RunResult.cache_verdict: the first request the vendor did not find unchanged)."""

from __future__ import annotations

from segue.apps.protocol.web import AgUiEncoder, final_metadata
from segue.generated import CacheVerdict, RunEvent, RunResult, Usage


def _result(verdict: CacheVerdict | None) -> RunResult:
    return RunResult(
        run_id="r1",
        status="success",
        answer="42",
        usage=Usage(input_tokens=100, output_tokens=2, cache_read_tokens=0),
        iterations=1,
        cache_verdict=verdict,
        cached_share=0.0,
    )


def test_the_finish_metadata_leads_with_the_vendors_verdict() -> None:
    verdict = CacheVerdict(status="changed", reason="system_changed", missed_tokens=1_242, compared_with="msg_1")
    shown = final_metadata(_result(verdict))
    keys = list(shown)
    assert keys.index("cache_verdict") < keys.index("cached_share")
    assert shown["cache_verdict"] == {
        "status": "changed",
        "reason": "system_changed",
        "missed_tokens": 1_242,
        "compared_with": "msg_1",
    }
    assert "cache_verdict" not in final_metadata(_result(None))
    finished = AgUiEncoder("t", "c").event(
        RunEvent(type="RUN_COMPLETED", run_id="r1", iteration=1, result=_result(verdict), meta={})
    )
    assert finished[-1]["metadata"]["cache_verdict"]["reason"] == "system_changed"
