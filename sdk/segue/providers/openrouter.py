"""OpenRouterProvider: OpenRouter's Chat Completions endpoint through the official `openai` client."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from segue._core.contracts import ProviderRequest
from segue.providers._cache import BreakpointPaths
from segue.providers._keys import require_credentials
from segue.providers._output import OutputPaths
from segue.providers.openai_chat import ChatCompletionsDriver
from segue.wire.breakpoints import CHAT_TTLS, CacheMode, check_mode
from segue.wire.common import ParsedResponse, WireRequest
from segue.wire.openrouter import request as wire

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from segue.catalog import Catalog

BASE_URL = "https://openrouter.ai/api/v1"


class OpenRouterProvider(ChatCompletionsDriver):
    """Any OpenRouter model, with routing pinned when asked and context compression off unless asked for.

    - `provider_order` / `allow_fallbacks`: sent as `provider: {order, allow_fallbacks}` (note: OpenRouter's
      sticky cache routing is not used when an order is set).
    - `plugins`: the app's plugins, sent as given, plus `{"id": "context-compression", "enabled": false}` unless
      the app configured that plugin itself, so an account default cannot compress the replayed conversation.
    - `reasoning`: OpenRouter's reasoning configuration ({"effort": ...} or {"max_tokens": ...}), sent as is.
      `reasoning_details` are kept verbatim and replayed unmodified.
    - `cache_ttl`: for `anthropic/*` models, per-block cache_control on system, stable head, last replayed and
      last message ("5m" default, "1h", or None for none).
    - `cache_mode` ("implicit", the default, or "explicit"): where the catalog says the upstream path is a
      breakpoint cache (`llm.cache_kind: "breakpoint"` on the model's openrouter row, e.g. openai/gpt-5.6-*),
      block-level `cache_control` (which OpenRouter converts to OpenAI's breakpoints) on segue's boundaries and
      `prompt_cache_options` with Chat Completions' 30m TTL; `cache_ttl=None` sends no cache markers of either
      kind. `catalog` answers (default: `Catalog.load()` on first use).
    - `client`: an `openai.AsyncOpenAI` for OpenRouter; by default one is built from OPENROUTER_API_KEY.
    """

    vendor = "openrouter"
    reasoning_vendor = wire.REASONING_VENDOR

    def __init__(
        self,
        model: str,
        *,
        provider_order: Sequence[str] | None = None,
        allow_fallbacks: bool = True,
        plugins: Sequence[Mapping[str, Any]] | None = None,
        reasoning: Mapping[str, Any] | None = None,
        cache_ttl: Literal["5m", "1h"] | None = "5m",
        cache_mode: CacheMode = "implicit",
        catalog: Catalog | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        import openai

        check_mode(cache_mode)

        if cache_ttl not in ("5m", "1h", None):
            raise ValueError(f"cache_ttl must be '5m', '1h' or None, got {cache_ttl!r}")
        if isinstance(provider_order, str):
            raise ValueError(f"provider_order must be a list of provider names, got the string {provider_order!r}")
        self.model = model
        self.provider_order = list(provider_order) if provider_order is not None else None
        self.allow_fallbacks = allow_fallbacks
        self.plugins = [dict(p) for p in plugins] if plugins is not None else None
        self.reasoning = dict(reasoning) if reasoning is not None else None
        self.cache_ttl = cache_ttl
        self.cache = BreakpointPaths(self.vendor, catalog, mode=cache_mode, ttl=CHAT_TTLS[0])
        self.output = OutputPaths(self.cache.rows)
        # Anthropic models bind replayed reasoning signatures to the prefix, as on Anthropic's own API.
        self.requires_stable_reasoning_prefix = model.startswith("anthropic/")
        if client is None:
            require_credentials(
                "OpenRouterProvider",
                model,
                self.vendor,
                ("OPENROUTER_API_KEY",),
                client=f"openai.AsyncOpenAI(base_url={BASE_URL!r}, api_key=...)",
            )
            client = openai.AsyncOpenAI(base_url=BASE_URL, api_key=os.environ["OPENROUTER_API_KEY"])
        self.client = client
        self._sdk = openai

    def _wire(self, request: ProviderRequest, *, stream: bool) -> WireRequest:
        model = self._model(request)
        request, output = self.output.split(request, model)
        return wire.build_request(
            request,
            model=model,
            output=output,
            provider_order=self.provider_order,
            allow_fallbacks=self.allow_fallbacks,
            plugins=self.plugins,
            reasoning=self.reasoning,
            cache_ttl=self.cache_ttl,
            breakpoints=None if self.cache_ttl is None else self.cache.for_model(model),
            stream=stream,
        )

    def _parse(self, data: Mapping[str, Any], request: ProviderRequest, w: WireRequest) -> ParsedResponse:
        return wire.parse_response(data, model=self._model(request))
