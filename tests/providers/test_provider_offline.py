"""A driver built without `client=` and without its vendor's key talks to segue's twin, and says so once.

The README promises that everything runs with no API key; the docs' examples build drivers the normal way
(`AnthropicProvider("claude-sonnet-4-6")`), so the fallback lives in the drivers. A key or a base-URL variable
keeps the SDK's own client; OpenRouter, which the twin does not emulate, still refuses without its key.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from segue import Agent
from segue.demo import shop_db as sample_db
from segue.errors import ProviderError
from segue.providers import (
    AnthropicProvider,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    OpenRouterProvider,
    _offline,
)
from segue_twin import TWIN_BASE_URL

VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENROUTER_API_KEY",
)


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_offline, "_twin", None)
    monkeypatch.setattr(_offline, "_warned", set())


def _base_url(provider: Any) -> str:
    return str(provider.client.base_url).rstrip("/")


async def test_without_a_key_the_drivers_share_one_twin_and_warn_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="segue.providers")
    first = AnthropicProvider("claude-sonnet-4-6")
    second = AnthropicProvider("claude-haiku-4-5")
    gpt = OpenAIResponsesProvider("gpt-5.5")
    chat = OpenAIChatProvider("gpt-4.1-mini")
    assert _base_url(first) == _base_url(second) == TWIN_BASE_URL
    assert _base_url(gpt) == _base_url(chat) == f"{TWIN_BASE_URL}/v1"
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings  # once per key variable, not once per driver
    assert "ANTHROPIC_API_KEY is not set" in warnings[0] and "AnthropicProvider('claude-sonnet-4-6')" in warnings[0]
    assert "OPENAI_API_KEY is not set" in warnings[1] and "offline twin" in warnings[1]

    tools = [sample_db.list_tables, sample_db.describe_table, sample_db.run_query]
    for provider in (first, gpt, chat):
        result = await Agent(provider, "You answer questions about the shop database.", tools).run(
            "Which tables are there?"
        )
        assert result.status == "success"
        assert result.answer is not None and "customers" in result.answer
    twin = _offline.offline_twin("AnthropicProvider", "claude-sonnet-4-6", "ANTHROPIC_API_KEY", "Anthropic")
    paths = {exchange.path for exchange in twin.exchanges}
    assert paths == {"/v1/messages", "/v1/responses", "/v1/chat/completions"}  # one twin served all three


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
        ("ANTHROPIC_AUTH_TOKEN", "token"),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/"),
    ],
)
def test_an_anthropic_key_or_base_url_keeps_the_sdk_client(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    assert _base_url(AnthropicProvider("claude-sonnet-4-6")) != TWIN_BASE_URL
    assert _offline._twin is None


def test_an_openai_key_keeps_the_sdk_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert _base_url(OpenAIResponsesProvider("gpt-5.5")) == "https://api.openai.com/v1"
    assert _base_url(OpenAIChatProvider("gpt-4.1-mini")) == "https://api.openai.com/v1"
    assert _offline._twin is None


def test_an_openai_base_url_without_a_key_gets_the_sdks_own_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """OPENAI_BASE_URL says the app means some server: the SDK's credentials error, not a silent twin."""
    import openai

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(openai.OpenAIError, match="OPENAI_API_KEY"):
        OpenAIResponsesProvider("gpt-5.5")
    assert _offline._twin is None


def test_a_self_hosted_base_url_is_never_replaced_by_the_twin() -> None:
    provider = OpenAIChatProvider("llama-3", base_url="http://127.0.0.1:8000/v1", vendor="vllm")
    assert _base_url(provider) == "http://127.0.0.1:8000/v1"
    assert _offline._twin is None


def test_openrouter_without_its_key_still_refuses() -> None:
    with pytest.raises(ProviderError, match="OPENROUTER_API_KEY"):
        OpenRouterProvider("anthropic/claude-sonnet-4.6")
