"""Vendor drivers and the provider protocol.

    from segue.providers import AnthropicProvider, OpenAIResponsesProvider, OpenAIChatProvider, OpenRouterProvider
    from segue.providers import Failover

The drivers load on first use, so `import segue.providers` never imports the `anthropic` or `openai` SDKs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from segue._core.contracts import (
    FRAGMENT_META_KEY,
    REPLAYED_META_KEY,
    Provider,
    ProviderRequest,
    ProviderResponse,
    StreamDelta,
    StreamDone,
    StreamEvent,
)
from segue.providers.registry import LAZY

if TYPE_CHECKING:
    from segue.providers.anthropic import AnthropicProvider
    from segue.providers.failover import Failover
    from segue.providers.openai_chat import OpenAIChatProvider
    from segue.providers.openai_responses import OpenAIResponsesProvider
    from segue.providers.openrouter import OpenRouterProvider

__all__ = [
    "FRAGMENT_META_KEY",
    "REPLAYED_META_KEY",
    "AnthropicProvider",
    "Failover",
    "OpenAIChatProvider",
    "OpenAIResponsesProvider",
    "OpenRouterProvider",
    "Provider",
    "ProviderRequest",
    "ProviderResponse",
    "StreamDelta",
    "StreamDone",
    "StreamEvent",
]


def __getattr__(name: str) -> Any:
    module = LAZY.get(name)  # class name -> module, from the one table of provider kinds
    if module is None:
        raise AttributeError(f"module 'segue.providers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
