"""Gemini's OpenAI-compatible Chat Completions (`POST /v1beta/openai/chat/completions`): thought signatures.

The rule (ai.google.dev/gemini-api/docs/thought-signatures): "When using Gemini 3 models, you must pass back
thought signatures during function calling, otherwise you will get a validation error (4xx status code)."
Gemini 3 "returns thought signatures for all model responses ... with a function call"; with parallel calls
"the first function call part returned by the model response will have a thought signature". Validation covers
the current turn only: the API looks back for the most recent user message with standard content (text, not a
function response); every model function call after it is part of the current turn, and "the first
functionCall part in each step of the current turn must include its thought_signature". On the OpenAI-compatible
endpoint the signature travels on the tool call as `extra_content.google.thought_signature`.

The twin issues a signature on the first tool call of every Gemini 3 answer and refuses a request whose current
turn replays a step without it, with the 400 a captured answer shows. It does not emulate Gemini's cache: the
answers report prompt tokens and no cached part (docs/twin.md).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from typing import Any

from segue._core.hashing import canonical_json
from segue_twin.errors import TwinHTTPError

VENDOR = "gemini"
#: The model family the rule binds: "When using Gemini 3 models".
SIGNED_PREFIX = "gemini-3"


def signs(model: str) -> bool:
    """Whether ``model`` issues and requires thought signatures on function calls (Gemini 3)."""
    return model.startswith(SIGNED_PREFIX)


def sign_calls(secret: bytes, model: str, calls: Sequence[dict[str, Any]]) -> None:
    """Put a thought signature on the first call of an answer (parallel calls: the first only), as Gemini 3 does.

    The value is opaque to clients (an HMAC over the model and the call); the twin checks only its presence.
    """
    if not calls or not signs(model):
        return
    first = calls[0]
    digest = hmac.new(secret, canonical_json({"model": model, "call": first}).encode("utf-8"), hashlib.sha256)
    signature = base64.b64encode(digest.digest()).decode("ascii")
    first["extra_content"] = {"google": {"thought_signature": signature}}


def check_signatures(model: str, messages: Sequence[Any]) -> None:
    """A 400 when a step of the current turn replays its first tool call without its thought signature."""
    if not signs(model):
        return
    start = _current_turn(messages)
    position = sum(1 for m in messages[:start] if isinstance(m, dict) and m.get("role") not in ("system", "developer"))
    for message in messages[start:]:
        if not isinstance(message, dict) or message.get("role") in ("system", "developer"):
            continue
        position += 1
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not isinstance(calls, list) or not calls or not isinstance(calls[0], dict):
            continue
        if not isinstance(_signature(calls[0]), str):
            function = calls[0].get("function")
            name = function.get("name") if isinstance(function, dict) else None
            raise missing_signature(str(name), position)


def missing_signature(name: str, position: int) -> TwinHTTPError:
    """The vendor's answer, as captured (discuss.ai.google.dev, 'OpenAI API compatibility broken due to
    thought_signature'); `position` is the message's place among the non-system messages, counted from 1 (the
    captured answer says "position 2" for a call right after the first user message)."""
    return TwinHTTPError(
        400,
        "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
        "correctly, and missing thought_signature may lead to degraded model performance. Additional data, "
        f"function call `default_api:{name}` , position {position}. please refer to "
        "https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
    )


def _current_turn(messages: Sequence[Any]) -> int:
    """Index of the most recent user message with standard content (the start of the current turn); 0 if none."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, dict) and message.get("role") == "user" and message.get("content"):
            return i
    return 0


def _signature(call: dict[str, Any]) -> object:
    extra = call.get("extra_content")
    google = extra.get("google") if isinstance(extra, dict) else None
    signature = google.get("thought_signature") if isinstance(google, dict) else None
    return signature or None
