"""Chat Completions messages given as `history=` (and a response's `choices[0].message`): `role: "tool"` results,
assistant `tool_calls`, `image_url` parts. The dispatcher is segue.wire.history."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segue._support.readers import Unknown
from segue.errors import InputError
from segue.generated import ContentBlock, ImageBlock, ToolResultBlock
from segue.generated.wire import openai_chat
from segue.wire.history_parts import as_object, output_text, url_image

__all__ = ["image", "tool_calls", "tool_message"]


def tool_message(item: Mapping[str, Any], where: str) -> ToolResultBlock:
    """A `role: "tool"` message as the result of the call it names."""
    call_id = item.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise InputError(
            f"{where} has role 'tool' but no 'tool_call_id'; a Chat Completions tool message names the call it "
            "answers, and segue's own tool messages hold tool_result blocks"
        )
    return ToolResultBlock(tool_call_id=call_id, content=output_text(item.get("content"), f"{where}.content"))


def tool_calls(item: Mapping[str, Any], model: str | None, where: str) -> list[ContentBlock]:
    """An assistant message's `tool_calls`, function calls only."""
    out: list[ContentBlock] = []
    for j, call in enumerate(item.get("tool_calls") or []):
        parsed = openai_chat.parse_tool_call_entry(as_object(call, f"{where}.tool_calls[{j}]"), model)
        if isinstance(parsed, Unknown):
            raise InputError(f"{where}.tool_calls[{j}] is not a function call; segue replays only those")
        out.append(parsed)
    return out


def image(part: Mapping[str, Any], where: str) -> ImageBlock:
    """An `image_url` part: its URL or data URL."""
    return url_image(as_object(part.get("image_url"), f"{where}.image_url").get("url"), where)
