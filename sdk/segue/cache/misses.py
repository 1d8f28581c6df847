"""Why a request could not use the prompt cache, found from the request the vendor received, its usage and the
serving path's catalog numbers: a prompt below the model's minimum cacheable length, a breakpoint further from
the previous request's than the vendor looks back, a prefix-cache request without its routing key.

Each finding is a ProviderNote of its own kind (segue.cache.notes keeps each kind once per run), naming the number that
fell short, so a run that cached nothing says why on its result and in the log instead of only in
`segue runs explain`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from segue._core.contracts import ProviderNote
from segue.catalog import Resolved
from segue.generated import Usage
from segue.wire.anthropic import misses as anthropic
from segue.wire.openai_chat import misses as openai_chat
from segue.wire.openai_responses import misses as openai_responses
from segue.wire.openrouter import misses as openrouter


class WireMisses(Protocol):
    """What each wire's `misses` module (segue.wire.<vendor>.misses) reads from a request body it built."""

    def breakpoint_positions(self, body: Mapping[str, Any]) -> Sequence[int]:
        """The lookback position of each block carrying a cache breakpoint (empty: the wire has no block lookback)."""
        ...

    def lacks_routing_key(self, body: Mapping[str, Any]) -> bool:
        """Whether the body misses the key its prefix cache routes requests by (False: the wire routes by none)."""
        ...


#: Each wire's reader, by the catalog's `wire` name of a serving path (the `wire` enum of catalog.schema.json).
_WIRES: Mapping[str, WireMisses] = {
    "anthropic": anthropic,
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "openrouter": openrouter,
}


def cache_notes(
    path: Resolved, body: Mapping[str, Any], usage: Usage, previous: Mapping[str, Any] | None
) -> list[ProviderNote]:
    """What kept this request (`body`, served on `path`) from the cache. `previous` is the run's previous request
    body on the same path (None for its first)."""
    notes = []
    if path.cache_kind == "none":
        return []
    cached = bool(usage.cache_read_tokens) or bool(usage.cache_write_tokens)
    minimum = path.cache_min_tokens
    if minimum is not None and not cached and usage.input_tokens < minimum:
        notes.append(
            ProviderNote(
                kind="cache-below-minimum",
                message=f"a request's prompt of {usage.input_tokens:,} tokens is below {path.model}'s minimum "
                f"cacheable {minimum:,} tokens, so that request cached nothing (the catalog's llm.cache_min_tokens)",
                measured=usage.input_tokens,
                limit=minimum,
            )
        )
    wire = _WIRES.get(path.wire or "")
    if wire is None:  # a body no segue wire built (a scripted or custom driver): nothing to read in it
        return notes
    lookback = path.cache_lookback_blocks
    if path.cache_kind == "block" and lookback is not None and previous is not None:
        gap = _breakpoint_gap(wire.breakpoint_positions(previous), wire.breakpoint_positions(body))
        if gap is not None and gap >= lookback:
            notes.append(
                ProviderNote(
                    kind="cache-beyond-lookback",
                    message=f"the request's cache breakpoint is {gap} block positions after the previous request's, "
                    f"beyond {path.model}'s lookback of {lookback} (the catalog's llm.cache_lookback_blocks): the "
                    "previous request's cache entry is not found there",
                    measured=gap,
                    limit=lookback,
                )
            )
    if path.cache_kind == "prefix" and wire.lacks_routing_key(body):
        notes.append(
            ProviderNote(
                kind="cache-key-missing",
                message=f"the request to {path.label} carried no prompt_cache_key: a prefix cache routes requests "
                "by key, so without one they may reach cache nodes that do not hold the prefix",
            )
        )
    return notes


def _breakpoint_gap(before: Sequence[int], now: Sequence[int]) -> int | None:
    """Positions from the previous request's last breakpoint (`before`) to this request's first breakpoint at or
    after it (None: nothing to compare)."""
    if not before:
        return None
    start = before[-1]
    later = [p for p in now if p >= start]
    return later[0] - start if later else None
