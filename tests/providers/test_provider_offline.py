"""No silent stand-in: a driver with no key and no client refuses; the twin serves only a client the app passes,
and every call it answers is recorded as the twin's.

A driver that found no key used to talk to segue's twin on its own, so a deployment that lost its key recorded
`success` runs with made-up answers, priced as the vendor's. Now building the driver raises a ProviderError that
names the variable to set and the explicit offline way (`client=Twin().anthropic_client()`), before any agent (so
any run row) exists; the twin marks its answers with a header
(segue._core.contracts.TWIN_HEADER) that the drivers record.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from segue import Agent, RunStore
from segue._core.contracts import TWIN_HEADER, ProviderRequest, StreamDone
from segue.demo import shop_db as sample_db
from segue.errors import ProviderError
from segue.generated import Message, TextBlock
from segue.providers import AnthropicProvider, OpenAIChatProvider, OpenAIResponsesProvider, OpenRouterProvider
from segue_twin import TWIN_BASE_URL, Twin
from segue_twin import TWIN_HEADER as TWINS_OWN_HEADER
from tests._support.vendor_http import Recorder, anthropic_client, openai_client

VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENROUTER_API_KEY",
)
TOOLS = [sample_db.list_tables, sample_db.describe_table, sample_db.run_query]


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def _base_url(provider: Any) -> str:
    return str(provider.client.base_url).rstrip("/")


@pytest.mark.parametrize(
    ("build", "variable", "offline"),
    [
        (lambda: AnthropicProvider("claude-sonnet-4-6"), "ANTHROPIC_API_KEY", "client=Twin().anthropic_client()"),
        (lambda: OpenAIResponsesProvider("gpt-5.5"), "OPENAI_API_KEY", "client=Twin().openai_client()"),
        (lambda: OpenAIChatProvider("gpt-4.1-mini"), "OPENAI_API_KEY", "client=Twin().openai_client()"),
        (lambda: OpenRouterProvider("anthropic/claude-sonnet-4.6"), "OPENROUTER_API_KEY", "does not emulate"),
    ],
    ids=["anthropic", "openai-responses", "openai-chat", "openrouter"],
)
def test_a_driver_without_a_key_or_client_refuses_naming_the_variable_and_the_offline_way(
    build: Callable[[], Any], variable: str, offline: str
) -> None:
    with pytest.raises(ProviderError) as caught:
        build()
    message = str(caught.value)
    assert caught.value.kind == "auth"
    assert f"set {variable}" in message and "has no API key" in message, message
    assert offline in message and "from segue.twin import Twin" in message, message


def test_the_refusal_comes_before_any_row(tmp_path: Any) -> None:
    """The driver refuses when it is built, so no agent exists to write a run: the store stays empty."""
    store = RunStore(f"sqlite:///{tmp_path}/runs.db")
    try:
        with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY"):
            Agent(AnthropicProvider("claude-sonnet-4-6"), "You answer.", TOOLS, store)
        assert store.tenants() == []  # no run of any tenant
    finally:
        store.close()


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


def test_an_openai_key_keeps_the_sdk_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert _base_url(OpenAIResponsesProvider("gpt-5.5")) == "https://api.openai.com/v1"
    assert _base_url(OpenAIChatProvider("gpt-4.1-mini")) == "https://api.openai.com/v1"


def test_an_openai_base_url_without_a_key_gets_the_sdks_own_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """OPENAI_BASE_URL says the app means some server: the SDK's credentials error, never the twin."""
    import openai

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(openai.OpenAIError, match="OPENAI_API_KEY"):
        OpenAIResponsesProvider("gpt-5.5")


def test_a_self_hosted_base_url_needs_no_key() -> None:
    provider = OpenAIChatProvider("llama-3", base_url="http://127.0.0.1:8000/v1", vendor="vllm")
    assert _base_url(provider) == "http://127.0.0.1:8000/v1"


def test_building_drivers_imports_nothing_of_the_twin() -> None:
    """The runtime no longer reaches for the twin: only an app that passes a twin client imports it."""
    code = (
        "import os, sys\n"
        "os.environ['ANTHROPIC_API_KEY'] = os.environ['OPENAI_API_KEY'] = 'sk-test'\n"
        "from segue import Agent\n"
        "from segue.providers import AnthropicProvider, OpenAIResponsesProvider, OpenAIChatProvider\n"
        "for p in (AnthropicProvider('claude-sonnet-4-6'), OpenAIResponsesProvider('gpt-5.5'),"
        " OpenAIChatProvider('gpt-4.1-mini')):\n"
        "    Agent(p, 'You answer.', [])\n"
        "print(sorted(m for m in sys.modules if m == 'segue.twin' or m.startswith('segue.twin.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_twin_marks_every_answer_with_the_header_the_drivers_read() -> None:
    assert TWINS_OWN_HEADER == TWIN_HEADER  # two names, one header: the twin imports no driver code
    twin = Twin()
    body = json.dumps(
        {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    ).encode()
    headers = {"x-api-key": "k", "content-type": "application/json", "anthropic-version": "2023-06-01"}
    ok = twin.handle("POST", "/v1/messages", headers, body)
    refused = twin.handle("POST", "/v1/messages", {"content-type": "application/json"}, body)  # no key: a 401
    assert ok.status == 200 and refused.status == 401
    assert all(dict(r.headers).get(TWIN_HEADER) == "emulated" for r in (ok, refused))


def _drivers(twin: Twin) -> list[Any]:
    return [
        AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()),
        OpenAIResponsesProvider("gpt-5.5", client=twin.openai_client()),
        OpenAIChatProvider("gpt-4.1-mini", client=twin.openai_client()),
    ]


def _ask(text: str = "hi") -> ProviderRequest:
    return ProviderRequest(system="You answer.", messages=[Message(role="user", content=[TextBlock(text=text)])])


async def test_each_driver_records_an_answer_of_the_twin_as_the_twins_called_or_streamed() -> None:
    for provider in _drivers(Twin()):
        assert (await provider.complete(_ask())).served_by == "twin", provider
        done = [e async for e in provider.stream(_ask()) if isinstance(e, StreamDone)]
        assert [d.response.served_by for d in done] == ["twin"], provider


def _without_the_mark(twin: Twin) -> Recorder:
    """The twin's exact answers with its header taken off: what a vendor would send."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        got = twin.handle(request.method, request.url.path, dict(request.headers), request.content)
        headers = [(k, v) for k, v in got.headers if k != TWIN_HEADER]
        return httpx2.Response(got.status, headers=headers, content=got.body)

    return Recorder(*[answer] * 4)


async def test_the_same_answer_without_the_header_is_recorded_as_the_vendors() -> None:
    twin = Twin()
    providers = [
        AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(_without_the_mark(twin))),
        OpenAIResponsesProvider("gpt-5.5", client=openai_client(_without_the_mark(twin), f"{TWIN_BASE_URL}/v1")),
    ]
    for provider in providers:
        assert (await provider.complete(_ask())).served_by == "vendor", provider
