"""AnthropicProvider: the Messages API through the official `anthropic` client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from segue._core.contracts import ProviderRequest
from segue.providers._cache import CatalogRows
from segue.providers._common import Assembler, SdkDriver
from segue.providers._keys import require_credentials
from segue.providers._output import OutputPaths
from segue.wire import anthropic as wire
from segue.wire.common import ParsedResponse, WireRequest
from segue.wire.streams import AnthropicStream

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

    from segue.catalog import Catalog


def without_sdk_spans(client: AsyncAnthropic) -> AsyncAnthropic:
    """The client with its own OpenTelemetry spans off (the SDK emits one per API call, with the call's usage,
    which segue's `chat` span carries already), keeping the rest of its option: trace-context propagation, as the
    client resolved it from the environment. An SDK without the option is returned as it is."""
    option = getattr(client, "open_telemetry", None)
    if not isinstance(option, Mapping) or not isinstance(option.get("traces"), Mapping):
        return client
    off: Any = {**option, "traces": {**option["traces"], "enabled": False}}
    return client.with_options(open_telemetry=off)


class AnthropicProvider(SdkDriver):
    """Claude models over the Messages API.

    - `cache_ttl`: "5m" (default) or "1h" for the four cache breakpoints (system, stable head, last replayed
      message, last message); None sends no cache_control.
    - `thinking`: Anthropic's own thinking configuration, sent as is, e.g. {"type": "enabled",
      "budget_tokens": 2048} or {"type": "adaptive"}. Thinking blocks are replayed verbatim; with replayed
      thinking on the wire segue asks for block binding with prefix_mismatch_behavior="drop_block" and reports
      each block the vendor's `input_transformations` says it dropped. With thinking off (None or disabled) no
      thinking is replayed (`reasoning_vendor` is None), because a stale block could not be dropped.
    - `catalog`: the `segue.catalog.Catalog` that answers which models take structured output natively
      (`llm.structured_output`; default: `Catalog.load()` on first use).
    - `client`: an `anthropic.AsyncAnthropic`; by default one is built from ANTHROPIC_API_KEY. With neither that
      nor ANTHROPIC_AUTH_TOKEN / ANTHROPIC_BASE_URL set, building the driver raises ProviderError (kind "auth"),
      which names the variable and the offline way: `client=Twin().anthropic_client()` (segue.twin).
      A client segue builds emits no OpenTelemetry spans of its own (segue's `chat` span is the request's); a
      client the app passes keeps its option (docs/observability.md: the SDK's own spans).
    """

    vendor = "anthropic"
    requires_stable_reasoning_prefix = True

    def __init__(
        self,
        model: str,
        *,
        cache_ttl: wire.CacheTTL | None = "5m",
        thinking: Mapping[str, Any] | None = None,
        max_tokens: int = 4096,
        catalog: Catalog | None = None,
        client: AsyncAnthropic | None = None,
    ) -> None:
        import anthropic

        if cache_ttl not in ("5m", "1h", None):
            raise ValueError(f"cache_ttl must be '5m', '1h' or None, got {cache_ttl!r}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens!r}")
        self.model = model
        self.cache_ttl = cache_ttl
        self.thinking = dict(thinking) if thinking is not None else None
        self.reasoning_vendor = wire.REASONING_VENDOR if wire.thinking_on(self.thinking) else None
        self.max_tokens = max_tokens
        if client is None:
            require_credentials(
                "AnthropicProvider",
                model,
                self.vendor,
                ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"),
                client="anthropic.AsyncAnthropic(api_key=...)",
            )
            client = without_sdk_spans(anthropic.AsyncAnthropic())
        self.client = client
        self.output = OutputPaths(CatalogRows(self.vendor, catalog))
        self._sdk = anthropic

    def _wire(self, request: ProviderRequest, *, stream: bool) -> WireRequest:
        model = self._model(request)
        request, output = self.output.split(request, model)
        return wire.build_request(
            request,
            model=model,
            output=output,
            max_tokens=request.max_tokens or self.max_tokens,
            cache_ttl=self.cache_ttl,
            thinking=self.thinking,
            stream=stream,
        )

    def _parse(self, data: Mapping[str, Any], request: ProviderRequest, w: WireRequest) -> ParsedResponse:
        return wire.parse_response(data, model=self._model(request), binding=w.binding, origins=w.origins)

    async def _post(self, kwargs: dict[str, Any]) -> Any:
        return await self.client.messages.with_raw_response.create(**kwargs)

    async def _open_stream(self, kwargs: dict[str, Any]) -> Any:
        return await self.client.messages.create(**kwargs)

    def _assembler(self) -> Assembler:
        return AnthropicStream()
