"""Why a request could not use the prompt cache, found from the request the vendor received, its usage and the
serving path's catalog numbers: a prompt below the model's minimum cacheable length, a breakpoint further from
the previous request's than the vendor looks back, a prefix-cache request without its routing key.

Each finding is a ProviderNote of its own kind (segue.cache.notes keeps each kind once per run), naming the number that
fell short, so a run that cached nothing says why on its result and in the log instead of only in
`segue runs explain`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from segue._core.contracts import ProviderNote
from segue._core.identity import IdentityMemo
from segue.catalog import Resolved
from segue.generated import Usage

#: Anthropic's lookback counts content blocks: "The system only checks up to 20 blocks before each explicit
#: `cache_control` breakpoint" (prompt caching page), each tool_use and each tool_result being one block.
_MARKER = "cache_control"


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
    lookback = path.cache_lookback_blocks
    if path.cache_kind == "block" and lookback is not None and previous is not None:
        gap = _breakpoint_gap(previous, body)
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
    if path.cache_kind == "prefix" and path.wire == "openai_responses" and not body.get("prompt_cache_key"):
        notes.append(
            ProviderNote(
                kind="cache-key-missing",
                message=f"the request to {path.label} carried no prompt_cache_key: a prefix cache routes requests "
                "by key, so without one they may reach cache nodes that do not hold the prefix",
            )
        )
    return notes


def _positions(body: Mapping[str, Any]) -> tuple[int, list[int]]:
    """(lookback positions of the messages' content, the position of each block with a cache marker)."""
    found = _LAST_BODY.get(body)  # this request's body is the next request's `previous`
    return found if found is not None else _LAST_BODY.put(body, _count_positions(body))


#: The last body counted -> its _positions.
_LAST_BODY: IdentityMemo[tuple[int, list[int]]] = IdentityMemo(1)


def _count_positions(body: Mapping[str, Any]) -> tuple[int, list[int]]:
    count = 0
    marks: list[int] = []
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else ():
        n, own = _message_positions(message)
        marks.extend(count + p for p in own)
        count += n
    return count, marks


#: A wire message -> its _message_positions. The requests of a run share the wire messages of its replayed prefix
#: (a marker is set on a copy), so each is counted once per run, not once per request twice.
_SEEN: IdentityMemo[tuple[int, list[int]]] = IdentityMemo(16_384)


def _message_positions(message: Any) -> tuple[int, list[int]]:
    """One message's (content blocks, the positions of its marked blocks counted as if it opened the body)."""
    found = _SEEN.get(message)
    if found is not None:
        return found
    content = message.get("content") if isinstance(message, dict) else None
    blocks: Sequence[Any] = content if isinstance(content, list) else [content]
    marks = [i for i, block in enumerate(blocks, start=1) if isinstance(block, dict) and block.get(_MARKER)]
    return _SEEN.put(message, (len(blocks), marks))


def _breakpoint_gap(previous: Mapping[str, Any], body: Mapping[str, Any]) -> int | None:
    """Positions from the previous request's last message breakpoint to this request's first breakpoint at or
    after it (None: nothing to compare)."""
    _, before = _positions(previous)
    _, now = _positions(body)
    if not before:
        return None
    start = before[-1]
    later = [p for p in now if p >= start]
    return later[0] - start if later else None
