"""OpenAIResponsesProvider: the Responses API through the official `openai` client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from segue._core.contracts import ProviderRequest
from segue.generated import ModelSettings
from segue.providers._cache import BreakpointPaths, check_path_context, comparison
from segue.providers._common import Assembler, SdkDriver
from segue.providers._keys import require_credentials
from segue.providers._output import OutputPaths
from segue.wire.breakpoints import RESPONSES_TTLS, CacheMode, CacheTTL, check_mode, check_ttl
from segue.wire.common import ParsedResponse, WireRequest
from segue.wire.openai_responses import request as wire
from segue.wire.openai_responses.stream import ResponsesStream

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from segue.catalog import Catalog


class OpenAIResponsesProvider(SdkDriver):
    """OpenAI models over the Responses API, stateless by default (`store=False`).

    - `reasoning`: OpenAI's own reasoning configuration, e.g. {"effort": "medium", "summary": "auto"}. When set,
      `include=["reasoning.encrypted_content"]` asks for the encrypted reasoning, and reasoning items are
      replayed in their original position (before the function_call they led to).
    - `cache_key_prefix`: combined with the request's cache key (per user or customer, never per run) into
      `prompt_cache_key`, so one customer's requests route to the same cache.
    - `cache_mode` ("implicit", the default, or "explicit") and `cache_ttl` ("30m", the default, or "12h"): on
      serving paths the catalog marks as breakpoint caches (`llm.cache_kind: "breakpoint"`, GPT-5.6 and later),
      sent as `prompt_cache_options`, with `prompt_cache_breakpoint` on segue's boundaries (system prompt, stable
      head, last replayed message, newest message; never the trailing runtime-state fragment). Implicit mode
      lets OpenAI add its own breakpoint at the end of the latest message; explicit writes only segue's. Other
      paths cache prefixes automatically and get neither.
    - `catalog`: the `segue.catalog.Catalog` that answers which paths are breakpoint caches (default:
      `Catalog.load()` on first use).
    - `client`: an `openai.AsyncOpenAI`; by default one is built from OPENAI_API_KEY. With neither that nor
      OPENAI_BASE_URL set, building the driver raises ProviderError (kind "auth"), which names the variable and
      the offline way: `client=Twin().openai_client()` (segue_twin).

    `ProviderRequest(prewarm=True)` sends `prompt_cache_options.prewarm` (breakpoint caches only): the prompt is
    cached, nothing is generated.
    """

    vendor = "openai"
    requires_stable_reasoning_prefix = False
    reasoning_vendor = wire.REASONING_VENDOR

    def __init__(
        self,
        model: str,
        *,
        cache_key_prefix: str | None = None,
        reasoning: Mapping[str, Any] | None = None,
        store: bool = False,
        cache_mode: CacheMode = "implicit",
        cache_ttl: CacheTTL = "30m",
        catalog: Catalog | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        import openai

        check_mode(cache_mode)
        check_ttl(cache_ttl, RESPONSES_TTLS, "Responses")
        self.model = model
        self.cache_key_prefix = cache_key_prefix
        self.reasoning = dict(reasoning) if reasoning is not None else None
        self.store = store
        self.cache = BreakpointPaths(self.vendor, catalog, mode=cache_mode, ttl=cache_ttl)
        self.output = OutputPaths(self.cache.rows)
        if client is None:
            require_credentials(
                "OpenAIResponsesProvider",
                model,
                self.vendor,
                ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
                client="openai.AsyncOpenAI(api_key=...)",
            )
            client = openai.AsyncOpenAI()
        self.client = client
        self._sdk = openai

    def check_settings(self, settings: ModelSettings) -> None:
        wire.check_settings(settings)
        check_path_context(self.output.rows, self.model, settings, wire.WIRE)

    def _wire(self, request: ProviderRequest, *, stream: bool) -> WireRequest:
        model = self._model(request)
        request, output = self.output.split(request, model)
        return wire.build_request(
            request,
            model=model,
            output=output,
            reasoning=self.reasoning,
            store=self.store,
            cache_key_prefix=self.cache_key_prefix,
            breakpoints=self.cache.for_model(model),
            stream=stream,
            comparison=comparison(self.cache.rows, model, request, opt_in=False),
        )

    def _parse(self, data: Mapping[str, Any], request: ProviderRequest, w: WireRequest) -> ParsedResponse:
        return wire.parse_response(data, model=self._model(request), comparison=w.comparison)

    _route = "/responses"

    def _plain_client(self) -> type:
        return self._sdk.AsyncOpenAI  # type: ignore[no-any-return]

    def _answer_types(self) -> tuple[Any, Any]:
        from openai import AsyncStream
        from openai.types.responses import Response, ResponseStreamEvent

        return Response, AsyncStream[ResponseStreamEvent]

    def _resource(self) -> Any:
        return self.client.responses

    def _assembler(self) -> Assembler:
        return ResponsesStream()
