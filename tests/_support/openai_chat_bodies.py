"""OpenAI Chat Completions bodies the SDK itself accepts."""

from __future__ import annotations

from typing import Any

from openai.types.chat import ChatCompletion


def completion(
    message: dict[str, Any], *, model: str = "gpt-4.1", finish: str = "stop", usage: Any = "default", **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish, "logprobs": None}
        ],
        **extra,
    }
    if usage == "default":
        usage = {
            "prompt_tokens": 2000,
            "completion_tokens": 20,
            "total_tokens": 2020,
            "prompt_tokens_details": {"cached_tokens": 1920},
        }
    if usage is not None:
        body["usage"] = usage
    ChatCompletion.model_validate(body)
    return body
