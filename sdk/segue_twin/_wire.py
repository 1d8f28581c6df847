"""Small helpers shared by the twin's endpoints: JSON normalisation, SSE framing, deterministic ids."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from segue._core.tokens import count_tokens

#: Characters per streamed text delta. Fixed so streamed bodies are deterministic.
DELTA_CHARS = 24


def strip_for_binding(obj: Any) -> Any:
    """A copy without ``cache_control`` keys or None values, at any depth.

    Moving a cache breakpoint, or a client writing ``"citations": null`` for an absent field, must not change
    what a signature or a cache key is computed over.
    """
    if isinstance(obj, dict):
        return {k: strip_for_binding(v) for k, v in obj.items() if k != "cache_control" and v is not None}
    if isinstance(obj, list):
        return [strip_for_binding(v) for v in obj]
    return obj


def ordered_json(obj: Any) -> bytes:
    """Compact JSON keeping key order: what a byte-prefix cache sees (key order matters to vendors' caches)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sse(event: str | None, data: Any) -> bytes:
    """One server-sent event; ``data`` is JSON-encoded unless it is already a str."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def pieces(text: str, size: int = DELTA_CHARS) -> Iterator[str]:
    """Deterministic delta chunks of ``text`` (nothing for the empty string)."""
    for start in range(0, len(text), size):
        yield text[start : start + size]


class IdFactory:
    """Seeded per-prefix counters: the n-th id with a prefix is always the same for a given seed."""

    def __init__(self, seed: int = 0) -> None:
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        self._seed = seed
        self._counters: dict[str, int] = {}

    def next(self, prefix: str) -> str:
        n = self._counters.get(prefix, 0) + 1
        self._counters[prefix] = n
        return f"{prefix}_{self._seed:04x}{n:08d}"


def truncate_to_tokens(text: str, tokens: int) -> str:
    """The longest prefix of ``text`` that counts at most ``tokens`` (output cut at a max-tokens limit)."""
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if count_tokens(text[:mid]) <= tokens:
            low = mid
        else:
            high = mid - 1
    return text[:low]
