"""OpenAI Responses API bodies the SDK itself accepts."""

from __future__ import annotations

from typing import Any

from openai.types.responses import Response

MODEL = "gpt-5.5"


def response(output: list[dict[str, Any]], *, status: str = "completed", **extra: Any) -> dict[str, Any]:
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1767225600,
        "model": MODEL,
        "status": status,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 2000,
            "input_tokens_details": {"cached_tokens": 1536, "cache_write_tokens": 0},
            "output_tokens": 40,
            "output_tokens_details": {"reasoning_tokens": 24},
            "total_tokens": 2040,
        },
        **extra,
    }
    Response.model_validate(body)
    return body


def text_output(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
