"""A stored request's message as the viewers read it (`StoredMessage`), and the forgiving block reading every wire's
stored-body reader (`wire/<vendor>/stored.py`) shares: a block the parsers cannot read becomes `Unknown` holding its
raw JSON, so a viewer can still show it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from segue._support.readers import Unknown, as_map, as_object
from segue.errors import MalformedResponseError
from segue.generated import ContentBlock, ImageBlock, Message, Role, TextBlock, UrlImageSource

__all__ = ["Block", "StoredMessage", "image_of", "joined", "of_message", "raw", "read_blocks"]

Block = ContentBlock | Unknown


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


def of_message(m: Message) -> StoredMessage:
    """A canonical message as a stored one (a run's own traces are stored canonical)."""
    return StoredMessage(role=m.role, kind=m.role, blocks=list(m.content), raw=None, meta=m.meta)


def raw(item: Any) -> Mapping[str, Any]:
    """An item as the JSON object an `Unknown` holds."""
    return as_object(item)


def image_of(url: str | None) -> Block:
    # The dashboard shows that an image was there, not the image: the URL (or data URL) is kept as it was sent.
    return ImageBlock(source=UrlImageSource(url=url or "?"))


def read_blocks(content: Any, parse: Callable[[Mapping[str, Any]], Block]) -> list[Block]:
    """A message's content (a text or a list of parts) as blocks; a part `parse` cannot read becomes `Unknown`."""
    if isinstance(content, str):
        return [TextBlock(text=content)]
    if not isinstance(content, list):
        return []
    out: list[Block] = []
    for part in content:
        try:
            out.append(parse(as_map(part, "stored block")))
        except MalformedResponseError:
            out.append(Unknown(tag=None, raw=raw(part)))
    return out


def joined(blocks: list[Block]) -> str:
    """The text blocks' texts, one per line."""
    return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
