"""A stored Responses API request read back: its input items as StoredMessages, through the generated parsers
(segue.generated.wire.openai_responses); the dispatcher is segue.wire.stored."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from segue._support.readers import Unknown, as_map
from segue.generated import TextBlock, ToolResultBlock
from segue.generated.wire import openai_responses
from segue.wire.common import ASSISTANT, TOOL, USER
from segue.wire.openai_responses.request import message_phase
from segue.wire.stored_message import Block, StoredMessage, image_of, joined, read_blocks

__all__ = ["read_message"]


def read_message(item: Any) -> StoredMessage:
    """One stored input item; raises on what the parsers cannot read (the dispatcher keeps it as Unknown)."""
    if isinstance(item, str):  # an input given as one text: a user message
        return StoredMessage(role=USER, kind=USER, blocks=[TextBlock(text=item)], raw=item)
    d = as_map(item, "stored input item")
    it = openai_responses.parse_input_item(d)
    if isinstance(it, Unknown) and it.tag is None:  # an input message may leave its type out
        it = openai_responses.parse_output_message(d)
    if isinstance(it, openai_responses.OutputMessage):
        role = it.role or "?"
        blocks = read_blocks(it.content, _part)
        phase = message_phase(it, [])  # an assistant message's phase, as it was resent
        if phase is not None:
            blocks = [attrs.evolve(b, phase=phase) if isinstance(b, TextBlock) else b for b in blocks]
        return StoredMessage(role=role, kind=openai_responses.STORED_ROLES.get(role), blocks=blocks, raw=item)
    if isinstance(it, openai_responses.FunctionCallOutput):
        content = it.output if isinstance(it.output, str) else joined(read_blocks(it.output, _part))
        result = ToolResultBlock(tool_call_id=it.call_id, content=content)
        return StoredMessage(role=TOOL, kind=TOOL, blocks=[result], raw=item)
    return StoredMessage(role=ASSISTANT, kind=ASSISTANT, blocks=[it], raw=item)


def _part(d: Mapping[str, Any]) -> Block:
    part = openai_responses.parse_input_part(d)
    return image_of(part.image_url) if isinstance(part, openai_responses.InputImage) else part
