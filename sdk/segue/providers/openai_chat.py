"""OpenAIChatProvider: Chat Completions through the official `openai` client, for OpenAI and compatible servers."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from segue._core.contracts import ProviderRequest
from segue.generated import ModelSettings
from segue.providers._cache import BreakpointPaths
from segue.providers._common import Assembler, SdkDriver
from segue.providers._keys import require_credentials
from segue.providers._output import OutputPaths
from segue.wire.breakpoints import CHAT_TTLS, CacheMode, check_mode
from segue.wire.common import ParsedResponse, WireRequest
from segue.wire.openai_chat import request as wire
from segue.wire.openai_chat.stream import ChatStream

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from segue.catalog import Catalog


class ChatCompletionsDriver(SdkDriver):
    """The Chat Completions calls and stream assembly, shared by every driver on that wire (OpenRouter too)."""

    client: AsyncOpenAI

    def check_settings(self, settings: ModelSettings) -> None:
        """Refuse what the Chat Completions wire cannot take, and what the driver's serving path would drop (its
        catalog row's llm.tool_choice_forms); the run asks before anything is written."""
        wire.check_settings(settings)
        wire.check_path_settings(settings, self._path(self.model))

    def _path(self, model: str) -> wire.ChatPath:
        """What the model's serving path takes on this wire, from its catalog row (defaults without one)."""
        resolved = self.output.rows.resolve(model)
        if resolved is None:
            return wire.ChatPath(label=f"{self.vendor}/{model}")
        field = resolved.get("llm", "max_tokens_field")
        forms = resolved.get("llm", "tool_choice_forms")
        fresh = resolved.get("llm", "fresh_prompt_fields")
        return wire.ChatPath(
            max_tokens_field=field if isinstance(field, str) else None,
            tool_choice_forms=tuple(forms) if isinstance(forms, list) else None,
            fresh_fields=dict(fresh) if isinstance(fresh, dict) else {},
            label=resolved.label,
        )

    _route = "/chat/completions"

    def _plain_client(self) -> type:
        return self._sdk.AsyncOpenAI  # type: ignore[no-any-return]

    def _answer_types(self) -> tuple[Any, Any]:
        from openai import AsyncStream
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        return ChatCompletion, AsyncStream[ChatCompletionChunk]

    def _resource(self) -> Any:
        return self.client.chat.completions

    def _assembler(self) -> Assembler:
        return ChatStream()


#: OpenAI's own API host: a client for it (the SDK's default base URL) talks to the openai vendor.
OPENAI_HOST = "api.openai.com"
#: Azure OpenAI's endpoints (the openai SDK's AsyncAzureOpenAI: https://<resource>.openai.azure.com).
AZURE_HOSTS = (".openai.azure.com",)


def infer_vendor(model: str, base_url: str | None, client: AsyncOpenAI | None) -> str:
    """The catalog vendor of a driver built without `vendor=`: "openai" when the client talks to OpenAI's own API
    (the base URL given, else the client's, else OPENAI_BASE_URL, else the SDK's default), to Azure OpenAI, or to
    a host under the reserved `.invalid` domain (RFC 2606: never a server, so the client's transport answers in
    process, as segue's twin does, emulating OpenAI). Any other server is named by the app: its cache behaviour,
    pricing and what it takes (a named tool_choice, prompt_cache_key) are the catalog's answer for that vendor."""
    import httpx2

    url = base_url or (str(client.base_url) if client is not None else None) or os.environ.get("OPENAI_BASE_URL")
    host = httpx2.URL(url).host if url else OPENAI_HOST
    # Azure OpenAI serves OpenAI's models through the SDK's own Azure client, at <resource>.openai.azure.com.
    if host in (OPENAI_HOST, *AZURE_HOSTS) or host.endswith((".invalid", *AZURE_HOSTS)):
        return "openai"
    raise ValueError(
        f"OpenAIChatProvider({model!r}) talks to {url}, which is not OpenAI's API ({OPENAI_HOST}), so segue cannot "
        "tell which server it is: pass vendor= with the catalog vendor of that server, e.g. vendor='llamacpp' "
        "(llama.cpp's llama-server), vendor='vllm', vendor='cerebras' (docs/catalogs.md lists the vendors), or "
        "vendor='openai' for "
        "a proxy of OpenAI's own API. The vendor decides the cache behaviour, the price ($0 self-hosted) and what "
        "the request carries (OpenAI's prompt_cache_key is not sent to other servers)"
    )


class OpenAIChatProvider(ChatCompletionsDriver):
    """Chat Completions: OpenAI itself, or vLLM, SGLang, llama.cpp, Cerebras... at `base_url`.

    - `vendor`: the catalog vendor id of the serving path ("openai", "vllm", "llamacpp", "cerebras", ...), which
      decides the catalog rows (cache behaviour, pricing, what the path takes) that apply. Left out, it is
      "openai" for a client of OpenAI's own API and a ValueError for any other base URL (`infer_vendor`).
    - Reasoning comes back as `reasoning` (or the older `reasoning_content`) and is kept for display; Chat
      Completions has no way to replay it, so it is not sent back.
    - Cached tokens come from `usage.prompt_tokens_details` or llama.cpp's `timings.cache_n`; when a server
      reports neither, cache_read_tokens is None (unknown), not 0.
    - `cache_mode` ("implicit", the default, or "explicit"): on serving paths the catalog marks as breakpoint
      caches (`llm.cache_kind: "breakpoint"`, GPT-5.6 and later), sent as `prompt_cache_options` with the 30m TTL
      (the only one Chat Completions offers), with `prompt_cache_breakpoint` on segue's boundaries (system prompt,
      stable head, last replayed message, newest message; never the trailing runtime-state fragment). `catalog`
      answers which paths those are (default: `Catalog.load()` on first use).
    - `client`: an `openai.AsyncOpenAI`; by default one is built for `base_url` with OPENAI_API_KEY (local
      servers without authentication need no key). With no `base_url` and neither OPENAI_API_KEY nor
      OPENAI_BASE_URL set, building the driver raises ProviderError (kind "auth"), which names the variable and
      the offline way: `client=Twin().openai_client()` (segue_twin).
    """

    requires_stable_reasoning_prefix = False
    #: Chat Completions cannot take reasoning back, so replayed runs' reasoning is dropped (cause reasoning-off).
    reasoning_vendor = None

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        vendor: str | None = None,
        cache_mode: CacheMode = "implicit",
        catalog: Catalog | None = None,
        client: AsyncOpenAI | None = None,
    ) -> None:
        import openai

        check_mode(cache_mode)
        if vendor is None:
            vendor = infer_vendor(model, base_url, client)
        if not vendor:
            raise ValueError("vendor must name the catalog vendor of the serving path, e.g. 'openai' or 'vllm'")
        self.model = model
        self.vendor = vendor
        self.cache = BreakpointPaths(vendor, catalog, mode=cache_mode, ttl=CHAT_TTLS[0])
        if client is None and base_url is None:
            require_credentials(
                "OpenAIChatProvider",
                model,
                "openai",
                ("OPENAI_API_KEY", "OPENAI_BASE_URL"),
                client="openai.AsyncOpenAI(api_key=...)",
            )
        self.output = OutputPaths(self.cache.rows)
        if client is None:
            # Self-hosted servers usually run without authentication; the client still insists on some key.
            key = os.environ.get("OPENAI_API_KEY") or ("unused" if base_url else None)
            client = openai.AsyncOpenAI(base_url=base_url, api_key=key)
        self.client = client
        self._sdk = openai

    def _wire(self, request: ProviderRequest, *, stream: bool) -> WireRequest:
        model = self._model(request)
        request, output = self.output.split(request, model)
        return wire.build_request(
            request,
            model=model,
            vendor=self.vendor,
            breakpoints=self.cache.for_model(model),
            stream=stream,
            output=output,
            path=self._path(model),
        )

    def _parse(self, data: Mapping[str, Any], request: ProviderRequest, w: WireRequest) -> ParsedResponse:
        return wire.parse_response(data, model=self._model(request), tools_offered=bool(request.tools))
