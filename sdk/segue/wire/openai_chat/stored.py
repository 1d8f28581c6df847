"""A stored Chat Completions request read back: its messages as StoredMessages, through the generated parsers
(segue.generated.wire.openai_chat); the dispatcher is segue.wire.stored."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segue._support.readers import as_map
from segue.generated import ToolResultBlock
from segue.generated.wire import openai_chat
from segue.wire.stored_message import Block, StoredMessage, image_of, read_blocks

__all__ = ["read_message"]


def read_message(item: Any) -> StoredMessage:
    """One stored message; raises on what the parsers cannot read (the dispatcher keeps it as Unknown)."""
    m = openai_chat.parse_message(as_map(item, "stored message"))
    role = m.role or "?"
    if m.tool_call_id is not None and isinstance(m.content, str):
        blocks: list[Block] = [ToolResultBlock(tool_call_id=m.tool_call_id, content=m.content)]
    else:
        blocks = read_blocks(m.content, _part)
    for call in m.tool_calls or []:
        blocks.append(openai_chat.parse_tool_call(as_map(call, "stored tool call")))
    return StoredMessage(role=role, kind=openai_chat.STORED_ROLES.get(role), blocks=blocks, raw=item)


def _part(d: Mapping[str, Any]) -> Block:
    part = openai_chat.parse_stored_part(d)
    return image_of(part.url) if isinstance(part, openai_chat.ImagePart) else part
