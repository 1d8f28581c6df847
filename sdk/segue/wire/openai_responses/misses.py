"""What an OpenAI Responses request body tells segue.cache.misses: whether it carries the `prompt_cache_key` a
prefix cache routes requests by. Its cache has no block lookback."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segue.generated.wire import openai_responses as g

__all__ = ["breakpoint_positions", "lacks_routing_key"]


def breakpoint_positions(body: Mapping[str, Any]) -> list[int]:
    return []


def lacks_routing_key(body: Mapping[str, Any]) -> bool:
    return not body.get(g.CACHE_KEY)
