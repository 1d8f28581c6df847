"""SDK exceptions as ProviderErrors: the kind (what happened), the vendor's own message, what to do, and whether the
client would retry it.

Both official clients raise the same exception families (APIStatusError with its status and JSON body, timeouts,
connection errors, an error event inside a stream); the vendor's error object is read through the generated
`shared` wire mapping, so no vendor key is spelled here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from segue.errors import ProviderError, ProviderErrorKind
from segue.generated.wire import shared

#: How the vendors word a prompt longer than the context window (tests/providers/test_context_overflow.py quotes each):
#: OpenAI, vLLM's and OpenRouter's "maximum context length is N tokens", Anthropic's "prompt is too long: N tokens >
#: M maximum", llama.cpp's "the request exceeds the available context size", vLLM's "The decoder prompt (length N)
#: is longer than the maximum model length of M".
_CONTEXT = re.compile(
    r"context[ _-]?length|context window|prompt is too long|maximum context|too many (input )?tokens"
    r"|input is too long|reduce the length|exceeds? the (model'?s? )?(maximum|context)"
    r"|exceeds? the available context size|longer than the maximum model length",
    re.IGNORECASE,
)
#: Server errors saying it could not read what the model generated, which the same prompt generates again: llama.cpp's
#: 500s from common/chat.cpp (tests/providers/test_model_output_errors.py quotes them).
_MODEL_OUTPUT = re.compile(
    r"model produced output that does not match the expected|failed to parse tool call arguments", re.IGNORECASE
)
#: The statuses (besides 5xx) the official clients retry: 408, 409, 429 (their `_should_retry`).
_RETRIED = frozenset({408, 409, 429})
_ADVICE: dict[str, str] = {
    "rate_limit": "the vendor is throttling this key; retry later, lower concurrency, or add a fallback with Failover",
    "server": "the vendor failed or is overloaded; retry later or add a fallback with Failover",
    "timeout": "no answer in time after the client's retries; retry, or raise the client's timeout",
    "connection": "the vendor could not be reached; check network access and base_url",
    "context_overflow": "the prompt is longer than the model accepts: replay fewer runs (lower replay_last), "
    "trim history, or use a model with a larger context window",
    "bad_request": "do what the vendor's message says; to compare, the body of the last call that succeeded is in "
    "ProviderResponse.request_body (llm_interactions.provider_request)",
    "auth": "check the API key (the client's usual environment variable) or the client you passed",
    "stream": "the stream was malformed or cut off; retry the call",
    "model_output": "the server could not read what the model generated in its chat template's format (tool-call "
    "markup, usually), and the same prompt generates it again, so retrying does not help: serve a model whose "
    "template the server parses (llama.cpp: --jinja, or --chat-template-file with a tool-use template), offer "
    "fewer tools, or raise temperature; the call's request is stored with the run (llm_interactions)",
    "other": "see the vendor's message",
}
#: Advice for a status that says more than its kind. Vendors answer a model they do not serve (or a wrong path)
#: with a 404: Anthropic `not_found_error`, OpenAI `model_not_found`.
_STATUS_ADVICE: dict[int, str] = {
    404: "the vendor does not serve this model (or this path) to this key: check the model id "
    "(`segue catalog explain MODEL` shows what segue knows of it) and the client's base_url",
}


def retried(e: Exception, sdk: ModuleType) -> bool:
    """Whether a failure is one the official client would retry and the same request may yet pass: a connection
    error or timeout, or a 408, 409, 429 or 5xx the server did not mark `x-should-retry: false` (the SDKs obey it
    too), unless the server could not read what the model generated (the same prompt generates it again)."""
    if isinstance(e, sdk.APIStatusError):
        if e.response.headers.get("x-should-retry") == "false":
            return False
        if e.status_code not in _RETRIED and e.status_code < 500:
            return False
        return status_kind(e.status_code, vendor_message(e), e) != "model_output"
    return isinstance(e, (sdk.APIConnectionError, sdk.APITimeoutError))


def stream_error(vendor: str, e: Exception) -> ProviderError:
    return ProviderError(
        f"{vendor} stream could not be read: {e}. {_ADVICE['stream']}",
        vendor=vendor,
        kind="stream",
        vendor_message=str(e),
    )


def transport_error(vendor: str, e: Exception) -> ProviderError | None:
    """A failure while reading the stream body, after the SDK returned (httpx2 read errors are not wrapped)."""
    import httpx2

    if isinstance(e, httpx2.TimeoutException):
        kind: ProviderErrorKind = "timeout"
    elif isinstance(e, httpx2.TransportError):
        kind = "connection"
    else:
        return None
    return ProviderError(f"{vendor} {kind} error while streaming: {e}. {_ADVICE[kind]}", vendor=vendor, kind=kind)


def provider_error(e: Exception, vendor: str, sdk: ModuleType) -> ProviderError:
    """An SDK exception (raised after the client's own retries) as a ProviderError with the vendor's message."""
    message = vendor_message(e)
    status: int | None = getattr(e, "status_code", None)
    kind: ProviderErrorKind
    if isinstance(e, sdk.APITimeoutError):
        kind = "timeout"
    elif isinstance(e, sdk.APIConnectionError):
        kind = "connection"
    elif status is not None and status >= 400:
        kind = status_kind(status, message, e)
    else:  # an error event inside a stream (the HTTP status was 200): classify by the vendor's error type
        kind = _body_kind(e, message)
        status = None
    shown = f"HTTP {status} " if status is not None else ""
    advice = _STATUS_ADVICE.get(status, _ADVICE[kind]) if status is not None else _ADVICE[kind]
    return ProviderError(
        f"{vendor} {shown}{kind} error: {message.rstrip('. ')}. What to do: {advice}",
        vendor=vendor,
        kind=kind,
        status_code=status,
        vendor_message=message,
    )


def _error_object(e: Exception) -> Any:
    """The vendor's error object (or message string) in an SDK exception's body: inside `error` when the body wraps
    it, else the body itself (schemas/wire/shared.json); None without a JSON body."""
    body = getattr(e, "body", None)
    if isinstance(body, list) and len(body) == 1:  # Gemini's OpenAI-compatible endpoint: [{"error": {...}}]
        body = body[0]
    if not isinstance(body, Mapping):
        return None
    wrapped = shared.parse_envelope(body).error
    return body if wrapped is None else wrapped


def vendor_message(e: Exception) -> str:
    err = _error_object(e)
    if isinstance(err, Mapping):
        message = shared.parse_details(err).message
        if isinstance(message, str):
            return message
    if isinstance(err, str):
        return err
    return str(e)  # the SDKs' APIError says its message


def _code(e: Exception) -> str:
    """The vendor's error code, else its type: the first of them that is a known kind (llama.cpp's code is the
    HTTP status, 400, and its type says exceed_context_size_error)."""
    err = _error_object(e)
    if isinstance(err, Mapping):
        details = shared.parse_details(err)
        named = [str(v) for v in (details.code, details.type) if v]
        return next((n for n in named if n in _BODY_KINDS), named[0] if named else "")
    return ""  # the SDKs take an error's code from its body only


def status_kind(status: int, message: str, e: Exception) -> ProviderErrorKind:
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if (
        status == 413
        or _BODY_KINDS.get(_code(e)) == "context_overflow"
        or (status in (400, 422) and _CONTEXT.search(message))
    ):
        return "context_overflow"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "model_output" if _MODEL_OUTPUT.search(message) else "server"
    return "bad_request" if 400 <= status < 500 else "other"


#: The vendor's error type or code -> kind, for errors without a status (an error event inside a stream).
_BODY_KINDS: dict[str, ProviderErrorKind] = {**shared.ERROR_TYPES, **shared.ERROR_CODES}


def _body_kind(e: Exception, message: str) -> ProviderErrorKind:
    kind = _BODY_KINDS.get(_code(e), "stream")
    if kind == "bad_request" and _CONTEXT.search(message):
        return "context_overflow"
    return kind
