"""`history=` in the ecosystem's own shapes: vendor SDK message dicts (and SDK objects) -> canonical Messages.

Accepted, item by item (any mix):

- segue `Message` objects and their JSON (kept exactly, `meta` included);
- `{"role": "user" | "assistant", "content": str}`, the shape every SDK and framework shares;
- Anthropic `MessageParam` (text, image, tool_use, tool_result, thinking, redacted_thinking blocks), including a
  response `Message` or its `model_dump()`;
- OpenAI Chat Completions `ChatCompletionMessageParam` (text / image parts, assistant `tool_calls` and `refusal`,
  `role: "tool"` results), including a response's `choices[0].message` or its `model_dump()`;
- OpenAI Responses input items (messages, `function_call`, `function_call_output`, `reasoning`), including the
  items of a response's `output`.

Items that split one turn are joined: an assistant turn's Responses items (reasoning, message, function_call) and
a run of tool results (Chat `tool` messages, Responses `function_call_output` items) each become one message.
Other items are never merged, so the caller's alternation rules see the turns as given.

Reasoning never becomes text. It is kept, as a ReasoningBlock in its vendor's format, only where segue's wire
replays it faithfully to that vendor: Anthropic thinking with its signature and redacted thinking with its data,
OpenAI reasoning items with their id (and `encrypted_content` when present), OpenRouter `reasoning_details`.
Anything else (thinking without a signature, a reasoning item without an id, Chat Completions `reasoning` /
`reasoning_content`, which that API never takes back) is left out and logged once on the `segue.history` logger.
Fields with no place in a segue message (ids, statuses, `cache_control`, citations, annotations, names) are
dropped; content segue cannot hold (documents, audio, files, server tools, stored item references) is an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeAlias

import attrs
from cattrs import transform_error
from cattrs.errors import BaseValidationError, CattrsError

from segue.errors import InputError
from segue.generated import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    get_converter,
)
from segue.wire.anthropic import history as anthropic_history
from segue.wire.history_parts import TEXT_PARTS, Side, as_object
from segue.wire.openai_chat import history as chat_history
from segue.wire.openai_responses import history as responses_history
from segue.wire.openrouter import history as openrouter_history

log = logging.getLogger("segue.history")


class SdkMessage(Protocol):
    """A vendor SDK's response object (a pydantic model): read through its `model_dump()`."""

    def model_dump(self) -> dict[str, Any]: ...


#: One `history=` item, as type checkers see it: a segue Message, any message dict (the SDKs' TypedDicts such as
#: Anthropic `MessageParam` or OpenAI `ChatCompletionMessageParam` included), or an SDK response object.
HistoryItem: TypeAlias = Message | Mapping[str, Any] | SdkMessage

ACCEPTED = (
    "history= takes segue Messages (or their JSON), {'role': 'user' | 'assistant', 'content': str}, Anthropic "
    "MessageParam dicts, OpenAI Chat Completions messages and OpenAI Responses input items (or the SDKs' response "
    "objects and their model_dump())"
)


@attrs.frozen(kw_only=True)
class _Piece:
    """What one history item became: a message, and whether it is a fragment of a turn (joined with its like)."""

    message: Message
    index: int
    fragment: bool = False


def history_messages(history: Sequence[Any]) -> tuple[list[Message], list[int]]:
    """The canonical messages of ``history`` and, for each, the index of the item it starts at."""
    left_out: list[str] = []
    pieces = [_piece(item, i, left_out) for i, item in enumerate(history)]
    if left_out:
        log.warning(
            "history: %d reasoning item(s) left out, because segue cannot replay them faithfully: %s",
            len(left_out),
            "; ".join(left_out),
        )
    messages: list[Message] = []
    starts: list[int] = []
    after_fragment = False
    for piece in pieces:
        last = messages[-1] if messages else None
        if last is not None and last.role == piece.message.role and (piece.fragment or after_fragment):
            messages[-1] = attrs.evolve(last, content=[*last.content, *piece.message.content])
        else:
            messages.append(piece.message)
            starts.append(piece.index)
        after_fragment = piece.fragment
    return messages, starts


def _piece(item: Any, i: int, left_out: list[str]) -> _Piece:
    if isinstance(item, Message):
        return _Piece(message=item, index=i)
    dump: Callable[..., Any] | None = getattr(item, "model_dump", None)
    if not isinstance(item, Mapping) and callable(dump):
        item = dump(mode="json", exclude_none=True)  # an SDK response object
    where = f"history[{i}]"
    if not isinstance(item, Mapping):
        raise InputError(f"{where} is a {type(item).__name__}, not a message; {ACCEPTED}")
    if isinstance(item.get("content"), list) and "role" in item:
        try:
            return _Piece(message=get_converter().structure(item, Message), index=i)  # segue's own JSON
        except (CattrsError, ValueError, TypeError):
            pass  # a vendor shape: read below, where a real problem gets a precise message
    with _reading(where):
        role, blocks, fragment = _read(item, where, left_out)
    if role != "assistant" and any(isinstance(b, ToolResultBlock) for b in blocks):
        role = "tool"
    return _Piece(message=Message(role=role, content=blocks), index=i, fragment=fragment)


@contextmanager
def _reading(where: str) -> Iterator[None]:
    """A parser's error (the generated vendor parsers and cattrs name the field) as an InputError naming ``where``."""
    try:
        yield
    except InputError:
        raise
    except (CattrsError, ValueError, TypeError, KeyError) as e:
        detail = "; ".join(transform_error(e)) if isinstance(e, BaseValidationError) else str(e)
        raise InputError(f"{where} could not be read ({detail}); {ACCEPTED}") from None


def _read(item: Mapping[str, Any], where: str, left_out: list[str]) -> tuple[Side, list[ContentBlock], bool]:
    kind = item.get("type")
    if kind in responses_history.TOOL_ITEMS:
        return responses_history.read_item(item, where, left_out)
    if kind == "item_reference":
        raise InputError(f"{where} is an item_reference, which segue cannot resolve: pass the item itself")
    if kind not in (None, "message"):
        raise InputError(
            f"{where} is a {kind!r} item, which segue cannot replay (it keeps text, images, function calls and their "
            f"outputs, and reasoning); {ACCEPTED}"
        )
    role = item.get("role")
    if role is None:
        raise InputError(
            f"{where} is not a message: it has neither a 'role' nor a Responses item 'type' (keys: "
            f"{sorted(map(str, item))}); {ACCEPTED}"
        )
    if role in ("system", "developer"):
        raise InputError(
            f"{where} has role {role!r}; put system text in the agent's prompt instead: segue keeps the system "
            "prompt first and stable, so the prompt cache can reuse it"
        )
    if role == "tool" and ("tool_call_id" in item or not isinstance(item.get("content"), list)):
        return "tool", [chat_history.tool_message(item, where)], True
    if role not in ("user", "assistant", "tool"):
        raise InputError(f"{where} has role {role!r}; expected 'user', 'assistant' or 'tool'. {ACCEPTED}")
    side: Side = "user" if role == "tool" else role  # a segue tool message: its tool_result blocks make it one
    _refuse(item, where, ("function_call", "audio"))
    blocks: list[ContentBlock] = []
    if side == "assistant":
        blocks += openrouter_history.reasoning(item, where, left_out)
    model = item.get("model") if isinstance(item.get("model"), str) else None
    content = item.get("content")
    if isinstance(content, str):
        blocks += [TextBlock(text=content)] if content else []
    elif isinstance(content, list):
        for j, part in enumerate(content):
            with _reading(f"{where}.content[{j}]"):
                blocks += _part(part, side, model, f"{where}.content[{j}]", left_out)
    elif content is not None:
        raise InputError(f"{where}.content must be a string or a list of parts, got {type(content).__name__}")
    if side == "assistant":
        if isinstance(item.get("refusal"), str) and item["refusal"]:
            blocks.append(TextBlock(text=item["refusal"]))
        blocks += chat_history.tool_calls(item, model, where)
        blocks = responses_history.with_phase(item, blocks, where)
    return side, blocks, kind == "message" and side == "assistant"


def _part(part: Any, side: Side, model: str | None, where: str, left_out: list[str]) -> list[ContentBlock]:
    part = as_object(part, where)
    kind = part.get("type")
    if kind in TEXT_PARTS:
        text = part.get("text")
        if not isinstance(text, str):
            raise InputError(f"{where} is a {kind!r} part without a string 'text'")
        return [TextBlock(text=text)] if text else []
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return [TextBlock(text=part["refusal"])]
    if kind in _IMAGES:
        return [_IMAGES[kind](part, where)]
    if kind in ("tool_use", "tool_call", "thinking", "redacted_thinking", "reasoning") and side != "assistant":
        raise InputError(f"{where} is a {kind!r} block in a {side} message; it belongs in an assistant message")
    if kind in anthropic_history.PART_KINDS:
        return anthropic_history.read_part(part, model, where, left_out)
    if kind == "tool_call":
        return [get_converter().structure(part, ToolCallBlock)]
    if kind == "reasoning":
        return [get_converter().structure(part, ReasoningBlock)]
    if kind == "tool_result":
        if side == "assistant":
            raise InputError(f"{where} is a tool_result block in an assistant message; results come from the user")
        return [anthropic_history.tool_result(part, where)]
    raise InputError(
        f"{where} is a {kind!r} part, which segue's messages cannot hold (they hold text, images, tool calls and "
        "results, and reasoning); leave it out or pass its text"
    )


#: Each SDK's image part, by its tag (segue's own image block is Anthropic's).
_IMAGES: dict[str, Callable[[Mapping[str, Any], str], ImageBlock]] = {
    "image": anthropic_history.image,
    "image_url": chat_history.image,
    "input_image": responses_history.image,
}


def _refuse(item: Mapping[str, Any], where: str, keys: Sequence[str]) -> None:
    for key in keys:
        if item.get(key) is not None:
            raise InputError(f"{where} has {key!r}, which segue cannot replay; leave it out of history")
