"""An MCP `tools/call` result as the tool result the model sees.

- Text content becomes the result text (parts joined by newlines). Structured content is used as JSON text only
  when the server sent no text: the MCP spec asks servers that return structured content to send its serialized
  JSON as text too, so the text is the same data and the model sees it once.
- Images in a type every vendor accepts (JPEG, PNG, GIF, WebP) are shown to the model right after the tool
  results, as image blocks of the same turn, which all three wire formats carry (segue.tools.ToolOutput). Other
  images, audio and binary resources are named in the text instead: a model cannot read them from a tool result.
- Images count against `max_result_chars` by the length of their base64 data, after the result's text: in order,
  an image is kept while the text and the images kept so far stay within the limit; one that does not fit is
  left out and named in the text with its size and the limit. A result is stored, and replayed into every later
  request of a conversation, so an unbounded image would grow both without end.
- Text resources are inlined; resource links are named with their URI.
- `isError` results become error results.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from segue.generated import Base64ImageSource, ImageBlock
from segue.tools import ToolOutput

#: The image types Anthropic, OpenAI Responses and Chat Completions all take (segue.generated.Base64ImageSource).
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def tool_output(result: CallToolResult, max_chars: int) -> ToolOutput:
    """The result as the model sees it; `max_chars` is the tool's max_result_chars."""
    parts: list[str | _Image] = []
    for part in result.content:
        if isinstance(part, TextContent):
            parts.append(part.text)
        elif isinstance(part, ImageContent):
            parts.append(_image(part.data, part.mime_type))
        elif isinstance(part, AudioContent):
            parts.append(f"[audio ({part.mime_type}) left out: segue does not send audio in tool results]")
        elif isinstance(part, ResourceLink):
            parts.append(f"[resource link: {part.name} <{part.uri}>]")
        elif isinstance(part, EmbeddedResource):
            parts.append(_resource(part.resource))
        else:  # a content type newer than this mapping: say so rather than drop it silently
            parts.append(f"[{getattr(part, 'type', type(part).__name__)} content left out]")
    if not any(isinstance(p, TextContent) for p in result.content) and result.structured_content is not None:
        parts.insert(0, json.dumps(result.structured_content, ensure_ascii=False))
    budget = max_chars - sum(len(p) for p in parts if isinstance(p, str))
    texts: list[str] = []
    images: list[ImageBlock] = []
    for p in parts:
        if isinstance(p, str):
            texts.append(p)
        elif len(p.data) <= budget:
            budget -= len(p.data)
            media_type: Any = p.mime_type
            images.append(ImageBlock(source=Base64ImageSource(media_type=media_type, data=p.data)))
            texts.append(f"[image {len(images)}: {p.mime_type}, shown after the tool results]")
        else:
            texts.append(
                f"[{p.mime_type} image of {len(p.data):,} characters (base64) left out: a result's text and images "
                f"together are limited to max_result_chars={max_chars:,}]"
            )
    return ToolOutput(content="\n".join(texts), is_error=bool(result.is_error), images=tuple(images))


@attrs.frozen
class _Image:
    mime_type: str
    data: str


def _image(data: str, mime_type: str) -> str | _Image:
    if mime_type not in IMAGE_TYPES:
        return f"[{mime_type} image left out: models take {', '.join(IMAGE_TYPES)}]"
    return _Image(mime_type, data)


def _resource(resource: TextResourceContents | BlobResourceContents) -> str | _Image:
    if isinstance(resource, TextResourceContents):
        return resource.text
    mime = resource.mime_type or "application/octet-stream"
    if mime in IMAGE_TYPES:
        return _image(resource.blob, mime)
    return f"[binary resource {resource.uri} ({mime}) left out]"
