"""A stored Anthropic Messages request read back: its messages as StoredMessages, through the generated parsers
(segue.generated.wire.anthropic); the dispatcher is segue.wire.stored."""

from __future__ import annotations

from typing import Any

from segue._support.readers import as_map
from segue.errors import MalformedResponseError
from segue.generated.wire import anthropic
from segue.wire.stored_message import StoredMessage, read_blocks

__all__ = ["has_tools", "read_message"]


def read_message(item: Any) -> StoredMessage:
    """One stored message; raises on what the parsers cannot read (the dispatcher keeps it as Unknown)."""
    m = anthropic.parse_message(as_map(item, "stored message"))
    return StoredMessage(
        role=m.role,
        kind=anthropic.STORED_ROLES.get(m.role),
        blocks=read_blocks(m.content, anthropic.parse_input_block),
        raw=item,
    )


def has_tools(tools: Any) -> bool:
    """Whether a body's tools are Anthropic's (each with an `input_schema`): what tells an Anthropic body from a Chat
    Completions body with the same keys."""
    if not isinstance(tools, list) or not tools:
        return False
    try:
        for t in tools:
            anthropic.parse_tool(as_map(t, "stored tool"))
    except MalformedResponseError:
        return False
    return True
