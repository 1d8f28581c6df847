"""What every vendor's `history=` reader (`wire/<vendor>/history.py`) shares: objects checked with the item's
place named, tool-result text, images by URL or data URL. The dispatcher is segue.wire.history."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from segue.errors import InputError
from segue.generated import Base64ImageSource, ImageBlock, UrlImageSource

__all__ = ["TEXT_PARTS", "Side", "as_object", "base64_source", "output_text", "url_image"]

Side = Literal["user", "assistant", "tool"]
#: The text part tags of every SDK's message shapes.
TEXT_PARTS = ("text", "input_text", "output_text")
_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_DATA_URL = re.compile(r"data:(?P<media>[\w/+.-]+);base64,(?P<data>.+)", re.S)


def as_object(value: Any, where: str) -> Mapping[str, Any]:
    """`value` if it is a JSON object, else an InputError naming `where`."""
    if not isinstance(value, Mapping):
        raise InputError(f"{where} must be an object, got {type(value).__name__}")
    return value


def output_text(content: Any, where: str) -> str:
    """A tool result's content as text: a string, or text parts joined with newlines."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise InputError(f"{where} must be a string or a list of text parts, got {type(content).__name__}")
    texts = []
    for j, part in enumerate(content):
        part = as_object(part, f"{where}[{j}]")
        if part.get("type") not in TEXT_PARTS or not isinstance(part.get("text"), str):
            raise InputError(
                f"{where}[{j}] is a {part.get('type')!r} part; segue keeps tool results as text, so pass text parts"
            )
        texts.append(part["text"])
    return "\n".join(texts)


def url_image(url: Any, where: str) -> ImageBlock:
    """An image given by URL (the OpenAI shapes): a data URL becomes a base64 image."""
    if not isinstance(url, str) or not url:
        raise InputError(f"{where} has no image URL (a file_id image cannot be replayed; pass the URL or data URL)")
    data = _DATA_URL.fullmatch(url)
    if data:
        return ImageBlock(source=base64_source(data["media"], data["data"], where))
    return ImageBlock(source=UrlImageSource(url=url))


def base64_source(media_type: Any, data: Any, where: str) -> Base64ImageSource:
    if media_type not in _IMAGE_TYPES or not isinstance(data, str) or not data:
        raise InputError(f"{where}: a base64 image needs data and a media type of {', '.join(_IMAGE_TYPES)}")
    return Base64ImageSource(media_type=media_type, data=data)
