"""The one table of provider kinds: which driver class serves each, where it lives, the environment variables that
hold its key, the config options that apply to it, and the kind that serves it on the twin.

`segue.providers` loads its drivers lazily from this table and `segue serve`'s config (segue.apps.protocol.config)
checks options and keys against it; schemas/serve.schema.json's `ProviderKind` lists the same kinds
(tests/providers/test_registry.py). Adding a vendor adds one row here (docs/architecture.md, "Adding a vendor").
Nothing here imports a driver or a vendor SDK; the option names are the generated ProviderConfig's fields.
"""

from __future__ import annotations

import attrs

from segue.generated.serve import ProviderConfig


@attrs.frozen(kw_only=True)
class ProviderKind:
    #: The name `segue serve`'s config gives the kind (`provider.kind`).
    kind: str
    #: The class `segue.providers` exports for it, and the module that defines it (loaded on first use).
    driver: str
    module: str
    #: Variables that give the driver its credentials or endpoint: with none set (and no base_url or api_key_env in
    #: the config), `segue serve` refuses the kind and names the first one.
    key_variables: tuple[str, ...] = ()
    #: Options of the config's `provider` object, beyond kind and model, that apply to this kind.
    options: frozenset[str] = frozenset()
    #: The kind that serves this vendor on segue's offline twin, if there is one (what a refused config suggests).
    twin_kind: str | None = None
    #: A kind that runs on the twin: the server gives its driver the twin's client.
    on_twin: bool = False


#: The options are ProviderConfig's fields (schemas/serve.schema.json), named through the generated type.
_F = attrs.fields(ProviderConfig)
_ANTHROPIC_OPTIONS = frozenset({_F.thinking.name, _F.max_tokens.name, _F.cache_ttl.name})
_RESPONSES_OPTIONS = frozenset({_F.cache_ttl.name, _F.cache_mode.name, _F.reasoning.name})

#: Every kind, in the order the config's error messages list them.
KINDS: tuple[ProviderKind, ...] = (
    ProviderKind(
        kind="anthropic",
        driver="AnthropicProvider",
        module="segue.providers.anthropic",
        key_variables=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"),
        options=_ANTHROPIC_OPTIONS | {_F.base_url.name, _F.api_key_env.name},
        twin_kind="twin-anthropic",
    ),
    ProviderKind(
        kind="twin-anthropic",
        driver="AnthropicProvider",
        module="segue.providers.anthropic",
        options=_ANTHROPIC_OPTIONS,
        on_twin=True,
    ),
    ProviderKind(
        kind="openai_responses",
        driver="OpenAIResponsesProvider",
        module="segue.providers.openai_responses",
        key_variables=("OPENAI_API_KEY", "OPENAI_BASE_URL"),
        options=_RESPONSES_OPTIONS | {_F.base_url.name, _F.api_key_env.name},
        twin_kind="twin-openai",
    ),
    ProviderKind(
        kind="twin-openai",
        driver="OpenAIResponsesProvider",
        module="segue.providers.openai_responses",
        options=_RESPONSES_OPTIONS,
        on_twin=True,
    ),
    ProviderKind(
        kind="openai_chat",
        driver="OpenAIChatProvider",
        module="segue.providers.openai_chat",
        key_variables=("OPENAI_API_KEY", "OPENAI_BASE_URL"),
        options=frozenset({_F.cache_mode.name, _F.vendor.name, _F.base_url.name, _F.api_key_env.name}),
        twin_kind="twin-openai",
    ),
    ProviderKind(
        kind="openrouter",
        driver="OpenRouterProvider",
        module="segue.providers.openrouter",
        options=frozenset({_F.cache_ttl.name, _F.cache_mode.name, _F.reasoning.name, _F.api_key_env.name}),
    ),
    ProviderKind(
        kind="scripted", driver="ScriptedProvider", module="segue.testing", options=frozenset({_F.replies.name})
    ),
)

BY_KIND: dict[str, ProviderKind] = {k.kind: k for k in KINDS}
#: Every option some kind takes, in the order the config checks them.
_CHECKED = (_F.replies, _F.thinking, _F.max_tokens, _F.cache_ttl, _F.cache_mode, _F.reasoning, _F.vendor, _F.base_url)
OPTIONS: tuple[str, ...] = tuple(f.name for f in (*_CHECKED, _F.api_key_env))

#: The classes `segue.providers` loads on first use: every kind's driver, and Failover (not a kind: it composes
#: other drivers). ScriptedProvider stays in segue.testing.
LAZY: dict[str, str] = {
    **{k.driver: k.module for k in KINDS if k.module.startswith("segue.providers.")},
    "Failover": "segue.providers.failover",
}


def kinds_taking(option: str) -> tuple[str, ...]:
    """The kinds a provider config option applies to, in KINDS order."""
    return tuple(k.kind for k in KINDS if option in k.options)
