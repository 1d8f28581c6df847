"""What a Chat Completions request body tells segue.cache.misses: nothing. Its prefix cache has no block lookback,
and segue checks no routing key on it (the key is optional there and sent only to OpenAI itself)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["breakpoint_positions", "lacks_routing_key"]


def breakpoint_positions(body: Mapping[str, Any]) -> list[int]:
    return []


def lacks_routing_key(body: Mapping[str, Any]) -> bool:
    return False
