"""Errors the twin returns, rendered in the shape of the vendor whose endpoint was called."""

from __future__ import annotations

import json
from typing import Any, Literal

ErrorVendor = Literal["anthropic", "openai", "gemini"]

#: Google's status names per HTTP status (google.rpc.Code, as the Gemini API's error `status` spells them).
_GOOGLE_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
}

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    411: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    500: "api_error",
}


class TwinHTTPError(Exception):
    """A request the twin rejects; `body(vendor)` renders it as that vendor would.

    ``kind`` is the OpenAI ``type`` (and the Anthropic ``type`` when it differs from the status default);
    ``param``/``code`` are OpenAI-only fields.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str | None = None,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code

    def body(self, vendor: ErrorVendor) -> Any:
        if vendor == "anthropic":
            kind = self.kind or _ANTHROPIC_TYPES.get(self.status, "invalid_request_error")
            return {"type": "error", "error": {"type": kind, "message": self.message}}
        if vendor == "gemini":
            return self.google_body()
        kind = self.kind or ("server_error" if self.status >= 500 else "invalid_request_error")
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

    def google_body(self) -> list[dict[str, Any]]:
        """Gemini's OpenAI-compatible endpoint answers errors in Google's envelope, inside a list (as a captured
        answer shows: `[{"error": {"code": 400, "message": "...", "status": "INVALID_ARGUMENT"}}]`)."""
        status = _GOOGLE_STATUSES.get(self.status, "INTERNAL" if self.status >= 500 else "INVALID_ARGUMENT")
        return [{"error": {"code": self.status, "message": self.message, "status": status}}]

    def body_bytes(self, vendor: ErrorVendor) -> bytes:
        return json.dumps(self.body(vendor)).encode("utf-8")


def bad_request(message: str, *, param: str | None = None, code: str | None = None) -> TwinHTTPError:
    return TwinHTTPError(400, message, param=param, code=code)


def model_not_found(model: str, reason: str) -> TwinHTTPError:
    """The vendors' answer to a model they do not serve: a 404, `not_found_error` on Anthropic (captured body:
    `{"type":"error","error":{"type":"not_found_error","message":"model: sonnet4"}}`) and `invalid_request_error`
    with code `model_not_found` on OpenAI. The message is the twin's own and says what to do."""
    return TwinHTTPError(404, f"twin: cannot serve model {model!r}: {reason}", code="model_not_found")
