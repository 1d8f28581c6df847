"""Responses API input items given as `history=` (and a response's `output` items): `function_call`,
`function_call_output`, `reasoning` with its id, `input_image` parts. The dispatcher is segue.wire.history."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import attrs

from segue.errors import InputError
from segue.generated import ContentBlock, ImageBlock, TextBlock, ToolResultBlock
from segue.generated.wire import openai_responses
from segue.wire.history_parts import Side, output_text, url_image

if TYPE_CHECKING:
    from segue.wire.openai_responses.request import Phase

__all__ = ["TOOL_ITEMS", "image", "read_item", "with_phase"]

#: The input items that are not messages: each is one piece of an assistant turn or of a run of tool results.
TOOL_ITEMS = ("function_call", "function_call_output", "reasoning")


def read_item(item: Mapping[str, Any], where: str, left_out: list[str]) -> tuple[Side, list[ContentBlock], bool]:
    """An item of TOOL_ITEMS: its side, its blocks, and that it is a fragment of a turn (always)."""
    kind = item["type"]
    if kind == "function_call":
        return "assistant", [openai_responses.parse_function_call(item, None)], True
    if kind == "function_call_output":
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InputError(f"{where} is a function_call_output without a 'call_id'")
        output = output_text(item.get("output"), f"{where}.output")
        return "tool", [ToolResultBlock(tool_call_id=call_id, content=output)], True
    if not item.get("id"):
        left_out.append(f"{where} (an OpenAI reasoning item without its id)")
        return "assistant", [], True
    return "assistant", [openai_responses.parse_reasoning(item, None)], True


def image(part: Mapping[str, Any], where: str) -> ImageBlock:
    """An `input_image` part: its URL or data URL."""
    return url_image(part.get("image_url"), where)


def with_phase(item: Mapping[str, Any], blocks: list[ContentBlock], where: str) -> list[ContentBlock]:
    """An assistant message item's text blocks with its `phase`, so it is resent as given (the pinned SDK's
    EasyInputMessageParam.phase: "preserve and resend phase on all assistant messages")."""
    phase = item.get("phase")
    if phase is None:
        return blocks
    if phase not in openai_responses.PHASES:
        raise InputError(
            f"{where} has phase {phase!r}; an assistant message's phase is one of "
            f"{sorted(openai_responses.PHASES)} (as the Responses API returned it), or leave it out"
        )
    known = cast("Phase", phase)
    return [attrs.evolve(b, phase=known) if isinstance(b, TextBlock) else b for b in blocks]
