"""Reading a stored request body back: which wire wrote it, its prompt in the order the vendor reads it, and its
conversation as canonical blocks, all through the generated parsers (segue.generated.wire). This module dispatches;
each vendor's message reader is its package's `stored` module (`wire/<vendor>/stored.py`).

`segue runs explain` and the dashboard read `llm_interactions.provider_request`, the exact body a vendor received.
A call records its vendor (the catalog vendor id), not its wire, and the vendor does not decide the wire: the
Chat Completions driver serves any vendor id, "openai" (whose catalog wire is Responses) by default. So a body is
recognised by its keys: the wire whose request envelope has every key the body has and the keys its SDK type
requires (Anthropic and Chat Completions bodies can look alike; tools with an `input_schema` settle it). A body no
wire wrote is segue's own canonical request (what `segue.testing.ScriptedProvider` records).

Reading is forgiving: a message or block the parsers cannot read becomes `Unknown` holding the raw JSON, so a
viewer can still show it; nothing here raises for a strange body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, get_args

import attrs
from cattrs.errors import BaseValidationError

from segue._core.contracts import ProviderRequest
from segue._support.readers import Unknown
from segue.errors import MalformedResponseError
from segue.generated import ExplainSection, Message, get_converter
from segue.generated.wire import anthropic, openai_chat, openai_responses, openrouter
from segue.wire.anthropic import stored as anthropic_stored
from segue.wire.openai_chat import stored as chat_stored
from segue.wire.openai_responses import stored as responses_stored
from segue.wire.openrouter import stored as openrouter_stored
from segue.wire.stored_message import StoredMessage, of_message, raw

__all__ = [
    "BREAKPOINT_KEYS",
    "StoredRequest",
    "read",
    "read_any_message",
    "read_message",
]

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
        if not anthropic_stored.has_tools(body.get(_REQUEST.tools.name)) and _unread(fits[0]) >= _unread(fits[1]):
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


def read_message(item: Any, wire: str | None) -> StoredMessage:
    """One conversation item of a body `wire` wrote (None: a canonical message); never raises."""
    reader = _READERS.get(wire or "", _canonical)
    try:
        return reader(item)
    except (MalformedResponseError, BaseValidationError, TypeError, ValueError):
        return StoredMessage(role="?", kind=None, blocks=[Unknown(tag=None, raw=raw(item))], raw=item)


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


def _canonical(item: Any) -> StoredMessage:
    return attrs.evolve(of_message(get_converter().structure(item, Message)), raw=item)


_READERS: dict[str, Callable[[Any], StoredMessage]] = {
    anthropic.__wire__: anthropic_stored.read_message,
    openai_chat.__wire__: chat_stored.read_message,
    openrouter.__wire__: openrouter_stored.read_message,
    openai_responses.__wire__: responses_stored.read_message,
}
