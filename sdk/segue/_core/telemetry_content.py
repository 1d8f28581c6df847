"""Message contents as the GenAI conventions shape them on spans (opt-in content capture): the `{role, parts}`
messages of `gen_ai.input.messages` / `gen_ai.output.messages`, and JSON text that fits an attribute.

A part is the conventions' own: `text`, `tool_call` (id, name, arguments), `tool_call_response` (id, response),
`reasoning`, and images as `uri` or `blob`. Content over CONTENT_LIMIT characters is cut inside its strings, so
the attribute stays valid JSON and says where it was cut.
"""

from __future__ import annotations

import json
from typing import Any

from segue.generated import ImageBlock, Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock

#: Span attributes hold strings, numbers, booleans and arrays of them: structured content goes as JSON text, at
#: most this many characters (its longest strings cut, with CUT_MARKER, so the JSON stays valid).
CONTENT_LIMIT = 1_000_000
CUT_MARKER = "…[segue: cut from {total} characters]"


def semconv_message(m: Message) -> dict[str, Any]:
    """A canonical message in the conventions' input/output message shape ({role, parts})."""
    parts: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, TextBlock):
            parts.append({"type": "text", "content": b.text})
        elif isinstance(b, ToolCallBlock):
            parts.append({"type": "tool_call", "id": b.id, "name": b.name, "arguments": b.arguments})
        elif isinstance(b, ToolResultBlock):
            parts.append({"type": "tool_call_response", "id": b.tool_call_id, "response": b.content})
        elif isinstance(b, ReasoningBlock):
            if b.text:
                parts.append({"type": "reasoning", "content": b.text})
        elif isinstance(b, ImageBlock):
            source = b.source
            if source.type == "url":
                parts.append({"type": "uri", "modality": "image", "uri": source.url})
            else:
                parts.append(
                    {"type": "blob", "modality": "image", "mime_type": source.media_type, "content": source.data}
                )
    return {"role": m.role, "parts": parts}


def content_json(value: Any, limit: int = CONTENT_LIMIT) -> str:
    """JSON text of at most `limit` characters that stays valid JSON: over the limit, the longest strings inside
    are cut (each with CUT_MARKER) until it fits; a value whose structure alone is over it becomes one marker."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    for _ in range(64):
        if len(text) <= limit:
            return text
        value = _cut_longest(value, len(text) - limit)
        if value is None:
            break
        text = json.dumps(value, ensure_ascii=False, default=str)
    return json.dumps(CUT_MARKER.format(total=len(text)), ensure_ascii=False)


def _cut_longest(value: Any, excess: int) -> Any:
    """`value` with its longest string shortened by `excess` characters (and a marker); None: no string to cut."""
    longest: list[Any] = [None, -1, ""]  # container, key, text

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, item in items:
            if isinstance(item, str) and len(item) > len(longest[2]):
                longest[:] = [node, key, item]
            else:
                walk(item)

    copy = json.loads(json.dumps(value, ensure_ascii=False, default=str))
    if isinstance(copy, str):
        return cut_text(copy, max(0, len(copy) - excess)) if len(copy) > 0 else None
    walk(copy)
    container, key, text = longest
    if container is None or not text:
        return None
    container[key] = cut_text(text, max(0, len(text) - excess))
    return copy


def cut_text(text: str, limit: int) -> str:
    """`text` within `limit` characters, its end replaced by CUT_MARKER when it is longer."""
    if len(text) <= limit:
        return text
    marker = CUT_MARKER.format(total=len(text))
    return text[: max(0, limit - len(marker))] + marker
