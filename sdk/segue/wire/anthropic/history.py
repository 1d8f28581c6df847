"""Anthropic `MessageParam` blocks given as `history=` (and a response Message's): tool_use, tool_result, thinking
with its signature, redacted thinking with its data, images. The dispatcher is segue.wire.history."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segue.errors import InputError
from segue.generated import ContentBlock, ImageBlock, ToolResultBlock, UrlImageSource
from segue.generated.wire import anthropic
from segue.wire.history_parts import as_object, base64_source, output_text

__all__ = ["PART_KINDS", "image", "read_part", "tool_result"]

#: The assistant blocks this reader takes (the dispatcher checks their side first).
PART_KINDS = ("tool_use", "thinking", "redacted_thinking")


def read_part(part: Mapping[str, Any], model: str | None, where: str, left_out: list[str]) -> list[ContentBlock]:
    """An assistant block of PART_KINDS; thinking that cannot be replayed faithfully is left out (noted)."""
    kind = part.get("type")
    if kind == "tool_use":
        return [anthropic.parse_tool_use(part, model)]
    if kind == "thinking":
        if not part.get("signature"):
            left_out.append(f"{where} (Anthropic thinking without a signature cannot be verified)")
            return []
        return [anthropic.parse_thinking(part, model)]
    if not part.get("data"):
        left_out.append(f"{where} (redacted thinking without its data)")
        return []
    return [anthropic.parse_redacted_thinking(part, model)]


def tool_result(part: Mapping[str, Any], where: str) -> ToolResultBlock:
    """Anthropic `tool_result` (`tool_use_id`) or segue's own (`tool_call_id`)."""
    call_id = part.get("tool_use_id", part.get("tool_call_id"))
    if not isinstance(call_id, str) or not call_id:
        raise InputError(f"{where} is a tool_result without a 'tool_use_id'")
    error = part.get("is_error")
    return ToolResultBlock(
        tool_call_id=call_id,
        content=output_text(part.get("content"), f"{where}.content"),
        is_error=error if isinstance(error, bool) else None,
    )


def image(part: Mapping[str, Any], where: str) -> ImageBlock:
    """Anthropic's image block, which is also segue's: a url or base64 source."""
    source = as_object(part.get("source"), f"{where}.source")
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return ImageBlock(source=UrlImageSource(url=source["url"]))
    if source.get("type") == "base64":
        return ImageBlock(source=base64_source(source.get("media_type"), source.get("data"), where))
    raise InputError(f"{where} has a {source.get('type')!r} image source; segue takes 'url' and 'base64' images")
