"""Anthropic Messages API bodies the SDK itself accepts: a response, the events that stream it, tool use."""

from __future__ import annotations

import json
from typing import Any

import httpx2
from anthropic.types import Message as SdkMessage

from segue.generated import ToolDefinition
from tests._support.vendor_http import json_response

MODEL = "claude-sonnet-4-6"


TOOLS = [
    ToolDefinition(
        name="run_query",
        description="Run a read-only SQL query.",
        parameters={"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
    )
]


def response(content: list[dict[str, Any]], *, stop: str = "end_turn", **extra: Any) -> dict[str, Any]:
    body = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 12,
            "output_tokens": 30,
            "cache_read_input_tokens": 1800,
            "cache_creation_input_tokens": 200,
            "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 0},
        },
        **extra,
    }
    SdkMessage.model_validate(body)  # fixtures must be what the SDK itself accepts
    return body


def tool_use(*calls: tuple[str, str, dict[str, Any]]) -> httpx2.Response:
    blocks = [{"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in calls]
    return json_response(response(blocks, stop="tool_use"))


def answer(text: str) -> httpx2.Response:
    return json_response(response([{"type": "text", "text": text}]))


def anthropic_events(blocks: list[dict[str, Any]], stop: str) -> list[tuple[str, Any]]:
    """The Messages API event sequence that streams `blocks` (text and tool_use), as (event name, data)."""
    start = response([], stop=stop)
    start.update(stop_reason=None)
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            events.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            head = {**block, "input": {}}
            events.append({"type": "content_block_start", "index": i, "content_block": head})
            delta = {"type": "input_json_delta", "partial_json": block["partial_json"]}
        events.append({"type": "content_block_delta", "index": i, "delta": delta})
        events.append({"type": "content_block_stop", "index": i})
    events.append(
        {
            "type": "message_delta",
            "delta": {"type": "message_delta", "stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 9},
        }
    )
    events.append({"type": "message_stop"})
    return [(e["type"], e) for e in events]


def streamed_tool_use(call_id: str, q: str) -> list[tuple[str, Any]]:
    block = {"type": "tool_use", "id": call_id, "name": "lookup", "partial_json": json.dumps({"q": q})}
    return anthropic_events([block], "tool_use")
