"""OpenRouter wire: the Chat Completions wire plus routing, compression and reasoning_details replay.

- `reasoning_details` come back as a list of typed entries; each becomes a ReasoningBlock holding the entry
  verbatim (`native`), and they are replayed unmodified, in order, on the assistant message next to its
  tool_calls (OpenRouter: "you cannot rearrange or modify the sequence").
- Context compression is turned off explicitly (`{"id": "context-compression", "enabled": false}` added to the
  app's own plugins) unless the app configured that plugin itself: account-default plugins apply to any request
  that does not name them, and a compressed middle would silently change the replayed prefix.
- `provider: {order, allow_fallbacks}` pins routing when the app asks for it.
- `session_id` is the request's cache key (the run's tenant, else its conversation; never per run, as
  `prompt_cache_key` on OpenAI): "When a session_id is present, OpenRouter uses it directly as the sticky routing
  key instead of deriving one from message hashing", and "sticky routing activates on any successful request —
  even before cache usage is observed"; without it sticky routing starts only after a request that used the cache
  and "Sticky sessions expire after 10 minutes of inactivity" (openrouter.ai/docs, prompt caching: provider sticky
  routing).
  At most 256 characters ("session_id must be at most 256 characters"): a longer key is cut to a stable hash.
- For `anthropic/*` models content goes as parts with per-block `cache_control`, on the same four positions
  as the Anthropic driver: system, stable head, last replayed message, last non-fragment message.
- Where the catalog says the upstream path is a breakpoint cache (`breakpoints`, OpenAI GPT-5.6 and later), the
  breakpoint positions of segue.wire.breakpoints get a block-level `cache_control: {"type": "ephemeral"}`, which
  OpenRouter "converts ... to the provider's native format" on "OpenAI models that support explicit prompt
  caching" (OpenRouter's cache-control docs; it forwards `prompt_cache_breakpoint` itself only on its Responses
  API), and the request carries `prompt_cache_options` as on Chat Completions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from segue._core.contracts import OutputFormat, ProviderRequest
from segue._support.readers import as_map
from segue.generated import ReasoningBlock
from segue.generated.wire import openai_chat as g_chat
from segue.generated.wire import openrouter as g
from segue.wire.breakpoints import BreakpointCache, boundaries
from segue.wire.common import ParsedResponse, WireRequest, breakpoint_blocks, writable
from segue.wire.openai_chat import request as chat

WIRE = "openrouter"
REASONING_VENDOR = "openrouter"
#: Top-level keys the OpenAI SDK's create() has no keyword for.
EXTRA_BODY = g.REQUEST_EXTRA
#: "session_id must be at most 256 characters" (openrouter.ai/docs, prompt caching).
MAX_SESSION_ID = 256


def build_request(
    request: ProviderRequest,
    *,
    model: str,
    provider_order: Sequence[str] | None,
    allow_fallbacks: bool,
    plugins: Sequence[Mapping[str, Any]] | None,
    reasoning: Mapping[str, Any] | None,
    cache_ttl: Literal["5m", "1h"] | None,
    breakpoints: BreakpointCache | None = None,
    stream: bool = False,
    output: OutputFormat | None = None,
) -> WireRequest:
    chat.refuse_prewarm(request, WIRE)
    settings = request.settings  # asked of this path before any row (segue.run.settings.check_paths)
    block_cache = model.startswith("anthropic/") and cache_ttl is not None
    parts = block_cache or breakpoints is not None
    messages, anchors = chat.build_messages(
        request.messages,
        replay=_replay,
        reasoning_vendor=REASONING_VENDOR,
        parts=parts,
        wire_prefix=request.wire_prefix,
    )
    fixed = chat.insert_system(messages, request, parts=parts)
    if block_cache:
        # 5m is OpenRouter's default TTL, so only 1h is spelled out.
        for block in breakpoint_blocks(fixed, anchors, request):
            g.cache_control(writable(messages, fixed, block), ttl="1h" if cache_ttl == "1h" else None)
    elif breakpoints is not None:
        for block in boundaries(fixed, anchors, request, breakpoints):
            g.cache_control(writable(messages, fixed, block))
    routing = None
    if provider_order or not allow_fallbacks:
        routing = g.routing(order=list(provider_order) if provider_order else None, allow_fallbacks=allow_fallbacks)
    body = g.request(
        model=model,
        messages=messages,
        tools=[g.tool(t) for t in request.tools] or None,
        response_format=chat.response_format(output) if output is not None else None,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        top_p=settings.top_p,
        stop=settings.stop,
        seed=settings.seed,
        tool_choice=chat.tool_choice(settings.tool_choice),
        parallel_tool_calls=settings.parallel_tool_calls if request.tools else None,
        provider=routing,
        plugins=with_compression_off(plugins),
        reasoning=with_effort(reasoning, settings.reasoning_effort),
        prompt_cache_options=chat.cache_options(breakpoints) if breakpoints is not None and not block_cache else None,
        session_id=session_id(request.cache_key),
        stream=stream,
    )
    return WireRequest(body=dict(body), extra_body=EXTRA_BODY, output_limit=settings.max_tokens)


def session_id(key: str | None) -> str | None:
    """OpenRouter's sticky routing key for a request's cache key (per tenant or conversation); a key over
    OpenRouter's 256 characters keeps its head and ends in a stable hash, so it still names the same one every
    time."""
    if not key:
        return None
    if len(key) <= MAX_SESSION_ID:
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return f"{key[: MAX_SESSION_ID - len(digest) - 1]}:{digest}"


def with_effort(reasoning: Mapping[str, Any] | None, effort: str | None) -> dict[str, Any] | None:
    """The driver's reasoning configuration with the run's reasoning_effort over its own (OpenRouter's
    reasoning.effort, openrouter.ai/docs reasoning tokens)."""
    if effort is None:
        return None if reasoning is None else dict(reasoning)
    return g.reasoning_effort(reasoning=reasoning or {}, effort=effort)


def with_compression_off(plugins: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """The app's plugins, plus context compression turned off unless the app configured it itself."""
    chosen = [dict(p) for p in plugins or ()]
    if not any(g.parse_plugin(p).id == g.COMPRESSION_PLUGIN for p in chosen):
        chosen.append(g.plugin(id=g.COMPRESSION_PLUGIN, enabled=False))
    return chosen


def _replay(block: ReasoningBlock) -> dict[str, Any] | None:
    if block.format != "openrouter.reasoning_details":
        return None  # plain `reasoning` text carries no signature: OpenRouter cannot take it back
    return g.replayed_reasoning(block)


def parse_response(data: Mapping[str, Any], *, model: str | None = None) -> ParsedResponse:
    return chat.parse_response(data, model=model, reasoning=reasoning_blocks)


def reasoning_blocks(message: g_chat.ChatMessage, model: str | None) -> list[ReasoningBlock]:
    """One block per reasoning_details entry (verbatim); plain `reasoning` text only when there are none."""
    if message.reasoning_details:
        return [
            g.parse_reasoning_detail(as_map(d, "openrouter reasoning_details entry"), model)
            for d in message.reasoning_details
        ]
    text = message.reasoning
    if isinstance(text, str) and text:
        return [ReasoningBlock(vendor=REASONING_VENDOR, model=model, format="openrouter.reasoning_text", text=text)]
    return []
