"""What an OpenRouter request body tells segue.cache.misses. OpenRouter serves a block cache only for `anthropic/*`
models, whose messages carry Anthropic's per-block `cache_control` where segue.wire.anthropic puts it, so their
breakpoints are counted as Anthropic's lookback counts them; OpenRouter routes by no key segue checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segue.wire.anthropic.misses import breakpoint_positions

__all__ = ["breakpoint_positions", "lacks_routing_key"]


def lacks_routing_key(body: Mapping[str, Any]) -> bool:
    return False
