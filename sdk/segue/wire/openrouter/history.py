"""OpenRouter's `reasoning_details` on an assistant message given as `history=`: replayed verbatim; the plain
`reasoning` / `reasoning_content` text of Chat Completions servers never is. The dispatcher is segue.wire.history."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segue.generated import ContentBlock
from segue.generated.wire import openrouter
from segue.wire.history_parts import as_object

__all__ = ["reasoning"]


def reasoning(item: Mapping[str, Any], where: str, left_out: list[str]) -> list[ContentBlock]:
    """An assistant message's reasoning: OpenRouter `reasoning_details` kept; reasoning text left out (noted)."""
    details = item.get("reasoning_details")
    if isinstance(details, list) and details:
        return [
            openrouter.parse_reasoning_detail(as_object(d, f"{where}.reasoning_details[{j}]"), None)
            for j, d in enumerate(details)
        ]
    if any(isinstance(item.get(key), str) and item[key] for key in ("reasoning", "reasoning_content")):
        left_out.append(f"{where} (Chat Completions reasoning text, which that API never takes back)")
    return []
