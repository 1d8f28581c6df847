"""The sample run database of tests/_support/sample_runs.py and its schema validator."""

from __future__ import annotations

import pytest
from jsonschema import ValidationError

from segue import RunStore
from tests._support.sample_runs import SampleRuns, validate


def test_sample_conversation_is_chained_and_cached(runs: SampleRuns) -> None:
    store = RunStore(runs.url)
    try:
        second = store.get_run(runs.second)
        third = store.get_run(runs.third)
        assert second is not None and third is not None
        assert second.continued_from == runs.first and third.continued_from == runs.second
        assert third.replay is not None and third.replay.runs_text == [runs.first]
        # The second run's first request extends the first run's last one: most of it is read from the cache.
        usage = second.llm_interactions[0].usage
        assert usage.cache_read_tokens is not None and usage.cache_read_tokens > usage.input_tokens // 2
        assert store.get_run(runs.other_tenant) is None
        assert store.get_run(runs.other_tenant, tenant_id="globex") is not None
    finally:
        store.close()


def test_validate_rejects_what_the_schema_forbids() -> None:
    with pytest.raises(ValidationError):
        validate({"run_id": "x", "status": "bogus"}, "RunSummary")
