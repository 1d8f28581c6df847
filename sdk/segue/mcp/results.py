"""An MCP `tools/call` result as the tool result the model sees.

- Text content becomes the result text (parts joined by newlines). Structured content is used as JSON text only
  when the server sent no text: the MCP spec asks servers that return structured content to send its serialized
  JSON as text too, so the text is the same data and the model sees it once.
- Images in a type every vendor accepts (JPEG, PNG, GIF, WebP) are shown to the model right after the tool
  results, as image blocks of the same turn, which all three wire formats carry (segue.tools.ToolOutput). Other
  images, audio and binary resources are named in the text instead: a model cannot read them from a tool result.
- Text resources are inlined; resource links are named with their URI.
- `isError` results become error results.
"""

from __future__ import annotations

import json
from typing import Any

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


def tool_output(result: CallToolResult) -> ToolOutput:
    texts: list[str] = []
    images: list[ImageBlock] = []
    for part in result.content:
        if isinstance(part, TextContent):
            texts.append(part.text)
        elif isinstance(part, ImageContent):
            texts.append(_image(part.data, part.mime_type, images))
        elif isinstance(part, AudioContent):
            texts.append(f"[audio ({part.mime_type}) left out: segue does not send audio in tool results]")
        elif isinstance(part, ResourceLink):
            texts.append(f"[resource link: {part.name} <{part.uri}>]")
        elif isinstance(part, EmbeddedResource):
            texts.append(_resource(part.resource, images))
        else:  # a content type newer than this mapping: say so rather than drop it silently
            texts.append(f"[{getattr(part, 'type', type(part).__name__)} content left out]")
    if not any(isinstance(p, TextContent) for p in result.content) and result.structured_content is not None:
        texts.insert(0, json.dumps(result.structured_content, ensure_ascii=False))
    return ToolOutput(content="\n".join(texts), is_error=bool(result.is_error), images=tuple(images))


def _image(data: str, mime_type: str, images: list[ImageBlock]) -> str:
    if mime_type not in IMAGE_TYPES:
        return f"[{mime_type} image left out: models take {', '.join(IMAGE_TYPES)}]"
    media_type: Any = mime_type
    images.append(ImageBlock(source=Base64ImageSource(media_type=media_type, data=data)))
    return f"[image {len(images)}: {mime_type}, shown after the tool results]"


def _resource(resource: TextResourceContents | BlobResourceContents, images: list[ImageBlock]) -> str:
    if isinstance(resource, TextResourceContents):
        return resource.text
    mime = resource.mime_type or "application/octet-stream"
    if mime in IMAGE_TYPES:
        return _image(resource.blob, mime, images)
    return f"[binary resource {resource.uri} ({mime}) left out]"
