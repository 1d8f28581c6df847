"""A mistyped model id warns when the agent is built (issue 30 item 4), with the catalog's "did you mean".

Before, `Agent(AnthropicProvider("claude-sonet-4-6", ...))` ran from the vendor's defaults, unpriced, and the typo
showed only in each run's `cost.missing`.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from segue import Agent, RunStore
from segue.errors import SegueWarning, UnknownModelWarning
from segue.providers import AnthropicProvider, Failover, OpenAIChatProvider
from segue.testing import ScriptedProvider, text
from segue.twin import Twin


@pytest.fixture(scope="module")
def twin() -> Twin:
    return Twin()


def _warnings(build: object) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert callable(build)
        build()
    return [w for w in caught if issubclass(w.category, SegueWarning)]


def test_a_likely_typo_warns_at_construction_with_the_catalogs_suggestion(twin: Twin) -> None:
    with pytest.warns(UnknownModelWarning) as caught:
        Agent(AnthropicProvider("claude-sonet-4-6", client=twin.anthropic_client()), "You help.")
    (warning,) = caught.list
    message = str(warning.message)
    assert message.startswith("model 'claude-sonet-4-6' at anthropic: not in the catalog")
    assert "did you mean 'claude-sonnet-4-6'? The agent runs it" in message and "no price" in message
    assert "?." not in message  # issue 40 item 8: the question mark ends the sentence
    assert warning.filename == __file__, "the warning points at the line that built the agent"
    assert issubclass(UnknownModelWarning, UserWarning)


def test_listed_models_new_ids_and_test_doubles_do_not_warn(twin: Twin) -> None:
    assert _warnings(lambda: Agent(AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()))) == []
    # An id the catalog does not know and finds close to nothing (a self-hosted fine-tune) is not a typo.
    hosted = OpenAIChatProvider("shop-finetune-7b", vendor="vllm", base_url="http://127.0.0.1:9/v1", client=None)
    assert _warnings(lambda: Agent(hosted)) == []
    # A vendor the catalog does not list (a test double, an app's own driver) has no catalog to ask.
    assert _warnings(lambda: Agent(ScriptedProvider.of(text("hi")))) == []


def test_a_failover_member_with_a_typo_is_named(twin: Twin) -> None:
    good = AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client())
    typo = OpenAIChatProvider("gpt-5.5-mni", client=twin.openai_client())
    (warning,) = _warnings(lambda: Agent(Failover([good, typo])))
    assert str(warning.message).startswith("model 'gpt-5.5-mni' at openai: ") and "did you mean" in str(warning.message)


async def test_as_an_error_it_stops_the_agent_before_any_run(twin: Twin, tmp_path: Path) -> None:
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnknownModelWarning)
            with pytest.raises(UnknownModelWarning, match="did you mean 'claude-sonnet-4-6'"):
                Agent(AnthropicProvider("claude-sonet-4-6", client=twin.anthropic_client()), "You help.", [], store)
        assert store.list_runs(limit=5) == []
    finally:
        store.close()
