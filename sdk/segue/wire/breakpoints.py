"""Breakpoint caching on the OpenAI wires (GPT-5.6 and later): where `prompt_cache_breakpoint` goes, and the options.

A breakpoint cache (catalog `llm.cache_kind: "breakpoint"`) reads only at breakpoints an earlier request wrote
("Marks the exact end of a reusable prompt prefix", the pinned openai SDK's `PromptCacheBreakpoint`). Without
explicit markers the only breakpoint is the implicit one at the end of the latest eligible message, so a new
conversation never reads the shared tools and instructions, and a replaced runtime-state fragment moves it on every
iteration. segue therefore marks its own logical boundaries, the same ones the Anthropic driver marks: the end of
the system prompt, the end of the stable head, the last replayed message and the newest message, never the
trailing runtime-state fragment, keeping the latest `max_breakpoints` (the catalog's writes per request).

Only the parts of input messages (user, system, developer) and of tool outputs take a breakpoint; assistant output
does not, so a boundary on an assistant message moves back to the nearest earlier eligible part.

Nothing here knows a model: the driver asks the catalog whether the serving path is a breakpoint cache and hands
the answer (`BreakpointCache`) to the wire, which marks the `boundaries` (`mark`; OpenRouter writes its own
block-level marker there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, get_args

import attrs

from segue._core.contracts import ProviderRequest
from segue.generated import Message
from segue.generated.wire import openai_chat, openai_responses
from segue.wire.common import ASSISTANT, breakpoint_blocks, writable

CacheMode = Literal["implicit", "explicit"]
MODES: tuple[CacheMode, ...] = get_args(CacheMode)
#: `prompt_cache_options.ttl` values of the Responses API (the pinned SDK's `PromptCacheOptions.ttl` literal).
CacheTTL = Literal["30m", "12h"]
RESPONSES_TTLS: tuple[CacheTTL, ...] = get_args(CacheTTL)
#: Chat Completions: "Defaults to `30m`, which is currently the only supported value" (its `PromptCacheOptions`).
CHAT_TTLS: tuple[CacheTTL, ...] = ("30m",)
#: What a request uses a breakpoint cache by: the markers on parts and the request's cache options.
_CACHE_KEYS = openai_responses.BREAKPOINT_KEYS | openai_chat.BREAKPOINT_KEYS | {openai_responses.CACHE_OPTIONS_KEY}


@attrs.frozen(kw_only=True)
class BreakpointCache:
    """How one request uses a breakpoint cache: the driver's mode and TTL, the catalog's writes per request."""

    mode: CacheMode
    ttl: CacheTTL
    max_breakpoints: int


def check_mode(mode: object) -> None:
    """Validate a driver's `cache_mode` at construction, naming the value and the choices."""
    if mode not in MODES:
        raise ValueError(
            f"cache_mode must be 'implicit' (OpenAI adds one breakpoint at the end of the latest message, segue "
            f"marks the rest) or 'explicit' (only segue's breakpoints are written), got {mode!r}"
        )


def check_ttl(ttl: object, ttls: tuple[str, ...], api: str) -> None:
    """Validate a driver's `cache_ttl` at construction against the TTLs the API takes."""
    if ttl not in ttls:
        choices = " or ".join(repr(t) for t in ttls)
        raise ValueError(f"cache_ttl must be {choices} on the {api} API, got {ttl!r}")


def eligible_anchors(messages: list[Message], anchors: list[Any]) -> list[Any]:
    """`anchors` with assistant messages' parts removed: assistant output cannot carry a breakpoint."""
    return [None if m.role == ASSISTANT else a for m, a in zip(messages, anchors, strict=True)]


def boundaries(fixed: list[Any], anchors: list[Any], request: ProviderRequest, cache: BreakpointCache) -> list[Any]:
    """The parts that get a breakpoint: `fixed` (the system / stable-head parts), the last replayed and the newest
    eligible part before any trailing fragment; the latest `max_breakpoints` of them."""
    marks = breakpoint_blocks(fixed, eligible_anchors(request.messages, anchors), request)
    return marks[-cache.max_breakpoints :] if cache.max_breakpoints > 0 else []


def mark(
    items: list[Any],
    fixed: list[Any],
    anchors: list[Any],
    request: ProviderRequest,
    cache: BreakpointCache,
    marker: Callable[[Any], None],
) -> None:
    """Put the wire's breakpoint `marker` (its generated `prompt_cache_breakpoint`) on segue's boundaries (see
    `boundaries`) in the request's `items` (copied on write: segue.wire.common.writable)."""
    for part in boundaries(fixed, anchors, request, cache):
        marker(writable(items, fixed, part))


def implicit_only(body: Any) -> Any:
    """A copy of a request body without `prompt_cache_options` and `prompt_cache_breakpoint`: the same request as a
    driver that sends no breakpoints would make (the vendor then uses its implicit breakpoint only). For
    side-by-side measurements."""
    if isinstance(body, dict):
        return {k: implicit_only(v) for k, v in body.items() if k not in _CACHE_KEYS}
    if isinstance(body, list):
        return [implicit_only(v) for v in body]
    return body
