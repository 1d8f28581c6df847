"""Reading a stored request body back: which wire wrote it, its prompt in the order the vendor reads it, and its
conversation as canonical blocks, all through the generated parsers (segue.generated.wire).

`segue runs explain` and the dashboard read `llm_interactions.provider_request`, the exact body a vendor received.
A body is recognised by its keys: the wire whose request envelope has every key the body has and the keys its SDK
type requires (Anthropic and Chat Completions bodies can look alike; tools with an `input_schema` settle it). A body
no wire wrote is segue's own canonical request (what `segue.testing.ScriptedProvider` records).

Reading is forgiving: a message or block the parsers cannot read becomes `Unknown` holding the raw JSON, so a
viewer can still show it; nothing here raises for a strange body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, get_args

import attrs
from cattrs.errors import BaseValidationError

from segue._core.contracts import ProviderRequest
from segue.generated import (
    ContentBlock,
    ExplainSection,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    UrlImageSource,
    get_converter,
)
from segue.generated.wire import anthropic, openai_chat, openai_responses, openrouter
from segue.wire.common import ASSISTANT, TOOL, USER, MalformedResponseError, Unknown, as_map

__all__ = [
    "BREAKPOINT_KEYS",
    "StoredMessage",
    "StoredRequest",
    "of_message",
    "read",
    "read_any_message",
    "read_message",
]

Block = ContentBlock | Unknown
#: The cache markers of every wire: they move between requests without changing the cached text.
BREAKPOINT_KEYS: frozenset[str] = (
    anthropic.BREAKPOINT_KEYS | openai_responses.BREAKPOINT_KEYS | openrouter.BREAKPOINT_KEYS
)

_MODEL, _TOOLS, _SYSTEM, _MESSAGES = get_args(ExplainSection)
_REQUEST = attrs.fields(ProviderRequest)
#: segue's own canonical request (the scripted provider's "wire"): ProviderRequest's fields, in prompt order.
_CANONICAL_PROMPT: tuple[tuple[str, ExplainSection], ...] = (
    (_REQUEST.model.name, _MODEL),
    (_REQUEST.tools.name, _TOOLS),
    (_REQUEST.system.name, _SYSTEM),
    (_REQUEST.stable_head.name, _SYSTEM),
    (_REQUEST.messages.name, _MESSAGES),
)


@attrs.frozen(kw_only=True)
class StoredMessage:
    """One message (or Responses input item) of a stored request.

    `role` is the role as sent (the vendor's word: developer, tool...), `kind` segue's (user, assistant, system,
    tool; None when unknown). `meta` is segue's own markers, present only in canonical bodies."""

    role: str
    kind: Role | None
    blocks: list[Block]
    raw: Any
    meta: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class StoredRequest:
    """A stored request body, read: its wire (None: segue's canonical request), its prompt parts in the order the
    vendor reads them as (key, section), and its conversation as sent (`items`, under `conversation_key`)."""

    wire: str | None
    prompt: tuple[tuple[str, ExplainSection], ...]
    conversation_key: str
    items: list[Any]

    def messages(self) -> list[StoredMessage]:
        return [read_message(item, self.wire) for item in self.items]


def read(body: Mapping[str, Any]) -> StoredRequest:
    fits = [_as(g, body) for g in _WIRES if g.REQUEST_REQUIRED <= set(body) <= g.REQUEST_KEYS]
    if len(fits) > 1 and fits[0].wire == anthropic.__wire__:
        # Anthropic and Chat Completions bodies can have the same keys: tools with an input_schema are Anthropic's,
        # else the wire whose parsers read more of the messages (Chat Completions when both read all).
        if not _anthropic_tools(body.get(_REQUEST.tools.name)) and _unread(fits[0]) >= _unread(fits[1]):
            fits.pop(0)
    return fits[0] if fits else _as(None, body)


#: The wires a stored body may come from, in the order a tie between them is settled.
_WIRES = (openai_responses, anthropic, openai_chat, openrouter)


def _as(g: Any, body: Mapping[str, Any]) -> StoredRequest:
    prompt = g.REQUEST_PROMPT if g is not None else _CANONICAL_PROMPT
    # The conversation is the last part in the messages section (settings such as Anthropic's tool_choice, which
    # invalidate the messages cache, come before it).
    key = next(k for k, section in reversed(prompt) if section == _MESSAGES)
    items = body.get(key)
    if isinstance(items, str):  # a Responses input given as one text
        items = [items]
    return StoredRequest(
        wire=None if g is None else g.__wire__,
        prompt=prompt,
        conversation_key=key,
        items=list(items) if isinstance(items, list) else [],
    )


def _unread(request: StoredRequest) -> int:
    return sum(isinstance(b, Unknown) for m in request.messages() for b in m.blocks)


def _anthropic_tools(tools: Any) -> bool:
    if not isinstance(tools, list) or not tools:
        return False
    try:
        for t in tools:
            anthropic.parse_tool(as_map(t, "stored tool"))
    except MalformedResponseError:
        return False
    return True


def read_message(item: Any, wire: str | None) -> StoredMessage:
    """One conversation item of a body `wire` wrote (None: a canonical message); never raises."""
    reader = _READERS.get(wire or "", _canonical)
    try:
        return reader(item)
    except (MalformedResponseError, BaseValidationError, TypeError, ValueError):
        return StoredMessage(role="?", kind=None, blocks=[Unknown(tag=None, raw=_raw(item))], raw=item)


def read_any_message(item: Any) -> StoredMessage:
    """A message of a body whose wire is not known: canonical if it is one, else read the way the Anthropic wire
    reads its turns (every wire spells a message's role, its text content and its text parts alike), keeping
    segue's own `meta` if the dict has it."""
    read = read_message(item, None)
    if read.kind is not None:
        return read
    meta = item.get(_META) if isinstance(item, Mapping) else None
    return attrs.evolve(read_message(item, anthropic.__wire__), meta=meta if isinstance(meta, Mapping) else None)


_META = attrs.fields(Message).meta.name


def of_message(m: Message) -> StoredMessage:
    """A canonical message as a stored one (a run's own traces are stored canonical)."""
    return StoredMessage(role=m.role, kind=m.role, blocks=list(m.content), raw=None, meta=m.meta)


def _raw(item: Any) -> Mapping[str, Any]:
    return item if isinstance(item, Mapping) else {"value": item}


def _canonical(item: Any) -> StoredMessage:
    return attrs.evolve(of_message(get_converter().structure(item, Message)), raw=item)


def _anthropic(item: Any) -> StoredMessage:
    m = anthropic.parse_message(as_map(item, "stored message"))
    return StoredMessage(
        role=m.role,
        kind=anthropic.STORED_ROLES.get(m.role),
        blocks=_blocks(m.content, anthropic.parse_input_block),
        raw=item,
    )


def _chat(item: Any) -> StoredMessage:
    m = openai_chat.parse_message(as_map(item, "stored message"))
    role = m.role or "?"
    if m.tool_call_id is not None and isinstance(m.content, str):
        blocks: list[Block] = [ToolResultBlock(tool_call_id=m.tool_call_id, content=m.content)]
    else:
        blocks = _blocks(m.content, _chat_part)
    for call in m.tool_calls or []:
        blocks.append(openai_chat.parse_tool_call(as_map(call, "stored tool call")))
    return StoredMessage(role=role, kind=openai_chat.STORED_ROLES.get(role), blocks=blocks, raw=item)


def _chat_part(d: Mapping[str, Any]) -> Block:
    part = openai_chat.parse_stored_part(d)
    return _image(part.url) if isinstance(part, openai_chat.ImagePart) else part


def _responses(item: Any) -> StoredMessage:
    if isinstance(item, str):  # an input given as one text: a user message
        return StoredMessage(role=USER, kind=USER, blocks=[TextBlock(text=item)], raw=item)
    d = as_map(item, "stored input item")
    it = openai_responses.parse_input_item(d)
    if isinstance(it, Unknown) and it.tag is None:  # an input message may leave its type out
        it = openai_responses.parse_output_message(d)
    if isinstance(it, openai_responses.OutputMessage):
        role = it.role or "?"
        blocks = _blocks(it.content, _responses_part)
        return StoredMessage(role=role, kind=openai_responses.STORED_ROLES.get(role), blocks=blocks, raw=item)
    if isinstance(it, openai_responses.FunctionCallOutput):
        content = it.output if isinstance(it.output, str) else _joined(_blocks(it.output, _responses_part))
        result = ToolResultBlock(tool_call_id=it.call_id, content=content)
        return StoredMessage(role=TOOL, kind=TOOL, blocks=[result], raw=item)
    return StoredMessage(role=ASSISTANT, kind=ASSISTANT, blocks=[it], raw=item)


def _responses_part(d: Mapping[str, Any]) -> Block:
    part = openai_responses.parse_input_part(d)
    return _image(part.image_url) if isinstance(part, openai_responses.InputImage) else part


def _image(url: str | None) -> Block:
    # The dashboard shows that an image was there, not the image: the URL (or data URL) is kept as it was sent.
    return ImageBlock(source=UrlImageSource(url=url or "?"))


def _blocks(content: Any, parse: Callable[[Mapping[str, Any]], Block]) -> list[Block]:
    if isinstance(content, str):
        return [TextBlock(text=content)]
    if not isinstance(content, list):
        return []
    out: list[Block] = []
    for raw in content:
        try:
            out.append(parse(as_map(raw, "stored block")))
        except MalformedResponseError:
            out.append(Unknown(tag=None, raw=_raw(raw)))
    return out


def _joined(blocks: list[Block]) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))


_READERS: dict[str, Callable[[Any], StoredMessage]] = {
    anthropic.__wire__: _anthropic,
    openai_chat.__wire__: _chat,
    openrouter.__wire__: _chat,
    openai_responses.__wire__: _responses,
}
