"""The Provider protocol declares every attribute segue reads of a provider (issue 42, item 4): the optional ones
with their defaults on the protocol, so the runtime reads them plainly and never with getattr."""

from __future__ import annotations

import ast
from collections.abc import AsyncIterator

import pytest

from segue import Agent
from segue._core.contracts import PROVIDER_MEMBERS, Provider, ProviderRequest, ProviderResponse, StreamEvent
from segue.generated import ModelSettings
from segue.providers import AnthropicProvider, Failover, OpenAIChatProvider
from segue.providers.base import members, serving_path, settings_checks
from segue.testing import ScriptedProvider, text
from segue_twin import Twin
from tests._support.environment import REPO


class _Shaped:
    """A provider by shape only, with just the members every provider must define."""

    vendor, model, requires_stable_reasoning_prefix = "acme", "acme-1", False

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        raise AssertionError("never called")

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        raise AssertionError("never called")


class _Subclass(_Shaped, Provider):
    """The same, subclassing Provider: it inherits the optional members' defaults."""


def test_a_provider_by_shape_must_define_every_member_and_is_told_which_it_lacks() -> None:
    with pytest.raises(TypeError) as refused:
        Agent(_Shaped(), "p")
    message = str(refused.value)
    for name in ("providers", "prefix_settings", "reasoning_vendor", "check_settings", "default_max_tokens"):
        assert name in message
    assert "subclass segue.providers.Provider" in message
    with pytest.raises(TypeError, match="Failover members must implement"):
        Failover([_Shaped()])


def test_a_subclass_inherits_the_defaults_segue_assumed_before_they_were_declared() -> None:
    provider = _Subclass()
    Agent(provider, "p")  # accepted
    assert members(provider) == [provider]
    assert provider.reasoning_vendor == "acme"  # its own vendor's reasoning goes back
    assert list(provider.prefix_settings) == []
    assert provider.default_max_tokens("acme-1") is None
    check = settings_checks(provider)
    assert len(check) == 1 and check[0](ModelSettings(seed=1)) is None  # takes any setting


def test_the_drivers_declare_what_they_override() -> None:
    twin = Twin()
    thinking = AnthropicProvider(
        "claude-sonnet-4-6", thinking={"type": "adaptive"}, max_tokens=512, client=twin.anthropic_client()
    )
    plain = AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client())
    chat = OpenAIChatProvider("gpt-5.4-mini", client=twin.openai_client())
    assert (thinking.reasoning_vendor, plain.reasoning_vendor, chat.reasoning_vendor) == ("anthropic", None, None)
    assert thinking.default_max_tokens("claude-sonnet-4-6") == 512
    assert "tool_choice" in thinking.prefix_settings and list(chat.prefix_settings) == []
    chain = Failover([plain, ScriptedProvider.of(text("hi"), vendor="scripted")])
    assert members(chain) == chain.providers and chain.reasoning_vendor is None  # the primary's
    assert serving_path(chain, vendor="scripted").reasoning_vendor == "scripted"


def test_the_runtime_reads_no_provider_member_with_getattr() -> None:
    """`getattr(x, "<a Provider member>", ...)` anywhere in sdk/segue/ would be an attribute the protocol does not
    promise; each is declared on Provider instead."""
    found = []
    for path in sorted((REPO / "sdk" / "segue").rglob("*.py")):
        if "generated" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"getattr", "hasattr"}
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in PROVIDER_MEMBERS
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.args[1].value}")
    assert found == []
    assert {"providers", "reasoning_vendor", "default_max_tokens", "prefix_settings"} <= set(PROVIDER_MEMBERS)
