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
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal, Protocol, TypeAlias

import attrs
from cattrs import transform_error
from cattrs.errors import BaseValidationError, CattrsError

from segue.errors import InputError
from segue.generated import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UrlImageSource,
    get_converter,
)
from segue.generated.wire import anthropic as anthropic_wire
from segue.generated.wire import openai_chat as chat_wire
from segue.generated.wire import openai_responses as responses_wire
from segue.generated.wire import openrouter as openrouter_wire
from segue.wire.common import Unknown

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
Side = Literal["user", "assistant", "tool"]
_TEXT_PARTS = ("text", "input_text", "output_text")
_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_DATA_URL = re.compile(r"data:(?P<media>[\w/+.-]+);base64,(?P<data>.+)", re.S)
_RESPONSES_TOOL_ITEMS = ("function_call", "function_call_output", "reasoning")


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
    if kind in _RESPONSES_TOOL_ITEMS:
        return _responses_item(item, where, left_out)
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
        return "tool", [_chat_tool_result(item, where)], True
    if role not in ("user", "assistant", "tool"):
        raise InputError(f"{where} has role {role!r}; expected 'user', 'assistant' or 'tool'. {ACCEPTED}")
    side: Side = "user" if role == "tool" else role  # a segue tool message: its tool_result blocks make it one
    _refuse(item, where, ("function_call", "audio"))
    blocks: list[ContentBlock] = []
    if side == "assistant":
        blocks += _chat_reasoning(item, where, left_out)
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
        for j, call in enumerate(item.get("tool_calls") or []):
            parsed = chat_wire.parse_tool_call_entry(_map(call, f"{where}.tool_calls[{j}]"), model)
            if isinstance(parsed, Unknown):
                raise InputError(f"{where}.tool_calls[{j}] is not a function call; segue replays only those")
            blocks.append(parsed)
    return side, blocks, kind == "message" and side == "assistant"


def _part(part: Any, side: Side, model: str | None, where: str, left_out: list[str]) -> list[ContentBlock]:
    part = _map(part, where)
    kind = part.get("type")
    if kind in _TEXT_PARTS:
        text = part.get("text")
        if not isinstance(text, str):
            raise InputError(f"{where} is a {kind!r} part without a string 'text'")
        return [TextBlock(text=text)] if text else []
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return [TextBlock(text=part["refusal"])]
    if kind in ("image", "image_url", "input_image"):
        return [_image(part, where)]
    if kind in ("tool_use", "tool_call", "thinking", "redacted_thinking", "reasoning") and side != "assistant":
        raise InputError(f"{where} is a {kind!r} block in a {side} message; it belongs in an assistant message")
    if kind == "tool_use":
        return [anthropic_wire.parse_tool_use(part, model)]
    if kind == "tool_call":
        return [get_converter().structure(part, ToolCallBlock)]
    if kind == "reasoning":
        return [get_converter().structure(part, ReasoningBlock)]
    if kind == "thinking":
        if not part.get("signature"):
            left_out.append(f"{where} (Anthropic thinking without a signature cannot be verified)")
            return []
        return [anthropic_wire.parse_thinking(part, model)]
    if kind == "redacted_thinking":
        if not part.get("data"):
            left_out.append(f"{where} (redacted thinking without its data)")
            return []
        return [anthropic_wire.parse_redacted_thinking(part, model)]
    if kind == "tool_result":
        if side == "assistant":
            raise InputError(f"{where} is a tool_result block in an assistant message; results come from the user")
        return [_tool_result(part, where)]
    raise InputError(
        f"{where} is a {kind!r} part, which segue's messages cannot hold (they hold text, images, tool calls and "
        "results, and reasoning); leave it out or pass its text"
    )


def _tool_result(part: Mapping[str, Any], where: str) -> ToolResultBlock:
    """Anthropic `tool_result` (`tool_use_id`) or segue's own (`tool_call_id`)."""
    call_id = part.get("tool_use_id", part.get("tool_call_id"))
    if not isinstance(call_id, str) or not call_id:
        raise InputError(f"{where} is a tool_result without a 'tool_use_id'")
    error = part.get("is_error")
    return ToolResultBlock(
        tool_call_id=call_id,
        content=_output_text(part.get("content"), f"{where}.content"),
        is_error=error if isinstance(error, bool) else None,
    )


def _chat_tool_result(item: Mapping[str, Any], where: str) -> ToolResultBlock:
    call_id = item.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise InputError(
            f"{where} has role 'tool' but no 'tool_call_id'; a Chat Completions tool message names the call it "
            "answers, and segue's own tool messages hold tool_result blocks"
        )
    return ToolResultBlock(tool_call_id=call_id, content=_output_text(item.get("content"), f"{where}.content"))


def _output_text(content: Any, where: str) -> str:
    """A tool result's content as text: a string, or text parts joined with newlines."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise InputError(f"{where} must be a string or a list of text parts, got {type(content).__name__}")
    texts = []
    for j, part in enumerate(content):
        part = _map(part, f"{where}[{j}]")
        if part.get("type") not in _TEXT_PARTS or not isinstance(part.get("text"), str):
            raise InputError(
                f"{where}[{j}] is a {part.get('type')!r} part; segue keeps tool results as text, so pass text parts"
            )
        texts.append(part["text"])
    return "\n".join(texts)


def _image(part: Mapping[str, Any], where: str) -> ImageBlock:
    kind = part["type"]
    if kind == "image":  # Anthropic's block, which is also segue's
        source = _map(part.get("source"), f"{where}.source")
        if source.get("type") == "url" and isinstance(source.get("url"), str):
            return ImageBlock(source=UrlImageSource(url=source["url"]))
        if source.get("type") == "base64":
            return ImageBlock(source=_base64(source.get("media_type"), source.get("data"), where))
        raise InputError(f"{where} has a {source.get('type')!r} image source; segue takes 'url' and 'base64' images")
    url = _map(part.get("image_url"), f"{where}.image_url").get("url") if kind == "image_url" else part.get("image_url")
    if not isinstance(url, str) or not url:
        raise InputError(f"{where} has no image URL (a file_id image cannot be replayed; pass the URL or data URL)")
    data = _DATA_URL.fullmatch(url)
    if data:
        return ImageBlock(source=_base64(data["media"], data["data"], where))
    return ImageBlock(source=UrlImageSource(url=url))


def _base64(media_type: Any, data: Any, where: str) -> Base64ImageSource:
    if media_type not in _IMAGE_TYPES or not isinstance(data, str) or not data:
        raise InputError(f"{where}: a base64 image needs data and a media type of {', '.join(_IMAGE_TYPES)}")
    return Base64ImageSource(media_type=media_type, data=data)


def _responses_item(item: Mapping[str, Any], where: str, left_out: list[str]) -> tuple[Side, list[ContentBlock], bool]:
    kind = item["type"]
    if kind == "function_call":
        return "assistant", [responses_wire.parse_function_call(item, None)], True
    if kind == "function_call_output":
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InputError(f"{where} is a function_call_output without a 'call_id'")
        output = _output_text(item.get("output"), f"{where}.output")
        return "tool", [ToolResultBlock(tool_call_id=call_id, content=output)], True
    if not item.get("id"):
        left_out.append(f"{where} (an OpenAI reasoning item without its id)")
        return "assistant", [], True
    return "assistant", [responses_wire.parse_reasoning(item, None)], True


def _chat_reasoning(item: Mapping[str, Any], where: str, left_out: list[str]) -> list[ContentBlock]:
    """OpenRouter `reasoning_details` replay verbatim; plain `reasoning` / `reasoning_content` text never does."""
    details = item.get("reasoning_details")
    if isinstance(details, list) and details:
        return [
            openrouter_wire.parse_reasoning_detail(_map(d, f"{where}.reasoning_details[{j}]"), None)
            for j, d in enumerate(details)
        ]
    if any(isinstance(item.get(key), str) and item[key] for key in ("reasoning", "reasoning_content")):
        left_out.append(f"{where} (Chat Completions reasoning text, which that API never takes back)")
    return []


def _refuse(item: Mapping[str, Any], where: str, keys: Sequence[str]) -> None:
    for key in keys:
        if item.get(key) is not None:
            raise InputError(f"{where} has {key!r}, which segue cannot replay; leave it out of history")


def _map(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(f"{where} must be an object, got {type(value).__name__}")
    return value
