"""AnthropicProvider: the Messages API through the official `anthropic` client."""

from __future__ import annotations

import typing
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs

from segue._core.contracts import ProviderRequest
from segue.errors import WireError
from segue.generated import ModelSettings
from segue.providers._cache import AUTO, AutoTTLPaths, CatalogRows, check_path_context, comparison
from segue.providers._common import Assembler, SdkDriver
from segue.providers._keys import require_credentials
from segue.providers._output import OutputPaths
from segue.wire.anthropic import request as wire
from segue.wire.anthropic.request import thinking_kind
from segue.wire.anthropic.stream import AnthropicStream
from segue.wire.common import ParsedResponse, WireRequest
from segue.wire.settings import TOOL_CHOICE_MODES

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


_FIELDS = attrs.fields(ModelSettings)
#: The ModelSettings fields in Anthropic's cached prefix.
PREFIX_SETTINGS = (_FIELDS.tool_choice, _FIELDS.parallel_tool_calls, _FIELDS.reasoning_effort, _FIELDS.context_editing)


class AnthropicProvider(SdkDriver):
    """Claude models over the Messages API.

    - `cache_ttl`: "5m" (default) or "1h" for the four cache breakpoints (system, stable head, last replayed
      message, last message); None sends no cache_control. "auto" chooses per run from the conversation's pauses
      and the catalog's prices for the path (segue.cache.ttl; docs/replay.md, "Cache TTL"), one lifetime for every
      breakpoint of a request, and records the choice as the run's `ttl-chosen` note.
    - `thinking`: Anthropic's own thinking configuration, sent as is, e.g. {"type": "enabled",
      "budget_tokens": 2048} or {"type": "adaptive"}. Thinking blocks are replayed verbatim; with replayed
      thinking on the wire segue asks for block binding with prefix_mismatch_behavior="drop_block" and reports
      each block the vendor's `input_transformations` says it dropped. With thinking off (None or disabled) no
      thinking is replayed (`reasoning_vendor` is None), because a stale block could not be dropped.
    - `max_tokens`: what a request sends when its model_settings set none (the API requires one); None (the
      default): the catalog's `llm.default_max_tokens` for the path (4096 in the packaged catalog).
    - `catalog`: the `segue.catalog.Catalog` that answers which models take structured output natively
      (`llm.structured_output`) and the default max_tokens (default: `Catalog.load()` on first use).
    - `client`: an `anthropic.AsyncAnthropic`; by default one is built from ANTHROPIC_API_KEY. With neither that
      nor ANTHROPIC_AUTH_TOKEN / ANTHROPIC_BASE_URL set, building the driver raises ProviderError (kind "auth"),
      which names the variable and the offline way: `client=Twin().anthropic_client()` (segue_twin).
      A client segue builds emits no OpenTelemetry spans of its own (segue's `chat` span is the request's); a
      client the app passes keeps its option (docs/observability.md: the SDK's own spans).
    """

    vendor = "anthropic"
    requires_stable_reasoning_prefix = True
    #: Settings that are part of the cached prefix (the prompt-caching page: a tool_choice change invalidates the
    #: messages cache, an effort change the system cache; context editing is "Applied before the prompt reaches
    #: Claude", the context-editing page, so it changes what the model saw), so replay compares them (cause settings).
    prefix_settings = tuple(f.name for f in PREFIX_SETTINGS)
    #: Set per driver from `thinking` (None with thinking off).
    reasoning_vendor: str | None = None

    def __init__(
        self,
        model: str,
        *,
        cache_ttl: wire.CacheTTL | Literal["auto"] | None = "5m",
        thinking: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        catalog: Catalog | None = None,
        client: AsyncAnthropic | None = None,
    ) -> None:
        import anthropic

        if cache_ttl not in ("5m", "1h", AUTO, None):
            raise ValueError(f"cache_ttl must be '5m', '1h', 'auto' or None, got {cache_ttl!r}")
        if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
            raise ValueError(f"max_tokens must be a whole number >= 1 or None, got {max_tokens!r}")
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
        self.auto_ttl = AutoTTLPaths(self.output.rows) if cache_ttl == AUTO else None
        if self.auto_ttl is not None:
            self.auto_ttl.check(model, typing.get_args(wire.CacheTTL))
        self._sdk = anthropic

    def check_settings(self, settings: ModelSettings) -> None:
        wire.check_settings(settings)
        check_path_context(self.output.rows, self.model, settings, wire.WIRE)
        auto, _, none = TOOL_CHOICE_MODES
        forced = settings.tool_choice not in (None, auto, none)
        if forced and wire.thinking_on(self.thinking):
            # The extended thinking page: with thinking, only tool_choice auto or none is taken.
            raise WireError(
                f"model_settings.tool_choice={settings.tool_choice!r} forces a tool, which Anthropic refuses with "
                "thinking on (extended thinking page: tool_choice any or tool is not supported with thinking); use "
                "tool_choice='auto', or turn thinking off for this agent"
            )

    def default_max_tokens(self, model: str) -> int:
        """The max_tokens sent when the request's settings set none (the Messages API requires one): the driver's
        own `max_tokens`, else the catalog's `llm.default_max_tokens` for the path."""
        if self.max_tokens is not None:
            return self.max_tokens
        resolved = self.output.rows.resolve(model)
        found = resolved.default_max_tokens if resolved is not None else None
        if found is None:
            raise WireError(
                f"no max_tokens for {model!r} on anthropic, whose API requires one: pass model_settings="
                "ModelSettings(max_tokens=...) or AnthropicProvider(max_tokens=...), or set llm.default_max_tokens "
                "in a catalog layer"
            )
        return found

    def _wire(self, request: ProviderRequest, *, stream: bool) -> WireRequest:
        model = self._model(request)
        request, output = self.output.split(request, model)
        ttl, note = (
            self.auto_ttl.choose(model, request.pauses, typing.get_args(wire.CacheTTL))
            if self.auto_ttl is not None
            else (self.cache_ttl, None)
        )
        path = self.output.rows.resolve(model)
        built = wire.build_request(
            request,
            model=model,
            output=output,
            max_tokens=request.settings.max_tokens or self.default_max_tokens(model),
            cache_ttl=ttl,  # type: ignore[arg-type]  # checked against wire.CacheTTL by AutoTTLPaths
            thinking=self.thinking,
            stream=stream,
            comparison=comparison(self.output.rows, model, request, opt_in=True),
            lookback_blocks=path.cache_lookback_blocks if path is not None else None,
            max_breakpoints=path.cache_max_breakpoints if path is not None else None,
        )
        return built if note is None else attrs.evolve(built, notes=[*built.notes, note])

    def _parse(self, data: Mapping[str, Any], request: ProviderRequest, w: WireRequest) -> ParsedResponse:
        return wire.parse_response(
            data, model=self._model(request), binding=w.binding, origins=w.origins, comparison=w.comparison
        )

    _route = "/v1/messages"

    def _plain_client(self) -> type:
        return self._sdk.AsyncAnthropic  # type: ignore[no-any-return]

    def _answer_types(self) -> tuple[Any, Any]:
        # The beta types, a superset of the others: a stream may carry beta blocks and deltas (a compaction block,
        # context_management on message_delta), which the plain types would read as something else.
        from anthropic import AsyncStream
        from anthropic.types.beta import BetaMessage, BetaRawMessageStreamEvent

        return BetaMessage, AsyncStream[BetaRawMessageStreamEvent]

    def _resource(self) -> Any:
        return self.client.messages

    def _post_options(self, wire: WireRequest, *, model: str, stream: bool) -> dict[str, Any]:
        """What the SDK's messages.create adds to a call besides its body, read from the pinned SDK's own tables:
        its deprecation warnings (a deprecated model; `thinking.type=enabled` on a model that wants adaptive), and
        for a call that does not stream on the default timeout a timeout sized to max_tokens, or its "Streaming is
        required" error for a call that may run past ten minutes."""
        options = super()._post_options(wire, model=model, stream=stream)
        # The SDK publishes none of these tables, nor the timeout rule: only messages.create reads them, and segue
        # posts its own bytes (tests/providers/test_anthropic_sdk_tables.py holds that there is no public way).
        from anthropic._constants import MODEL_NONSTREAMING_TOKENS
        from anthropic._data import DEPRECATED_MODELS, MODELS_TO_WARN_WITH_THINKING_ENABLED

        if model in MODELS_TO_WARN_WITH_THINKING_ENABLED and thinking_kind(self.thinking) == "enabled":
            warnings.warn(
                f"Using Claude with {model} and 'thinking.type=enabled' is deprecated; use 'thinking.type=adaptive' "
                "(https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking)",
                UserWarning,
                stacklevel=2,
            )
        if model in DEPRECATED_MODELS:
            warnings.warn(
                f"The model '{model}' is deprecated and will reach end-of-life on {DEPRECATED_MODELS[model]}; "
                "migrate to a newer model (https://docs.anthropic.com/en/docs/resources/model-deprecations)",
                DeprecationWarning,
                stacklevel=2,
            )

        if not stream and self.client.timeout == self._sdk.DEFAULT_TIMEOUT and wire.output_limit is not None:
            limit = MODEL_NONSTREAMING_TOKENS.get(model)
            options["timeout"] = self.client._calculate_nonstreaming_timeout(wire.output_limit, limit)
        return options

    def _assembler(self) -> Assembler:
        return AnthropicStream()
