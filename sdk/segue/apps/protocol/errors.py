"""The error responses of the protocol: a code from the method table, a message and typed `data`.

A session answers with the codes of the protocol version it speaks: an error whose code changed since keeps the
code that version used (`LEGACY_CODES`, generated from the schema's `legacy_codes`).
"""

from __future__ import annotations

from typing import Any

from segue.generated import get_converter
from segue.generated.protocol_methods import LEGACY_CODES, PROTOCOL_VERSION, ErrorCode


class RpcError(Exception):
    """An error response: a code from the method table, a message, and `data` (a generated attrs object)."""

    def __init__(self, code: ErrorCode, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self, version: str = PROTOCOL_VERSION) -> dict[str, Any]:
        """The error object, with the code a session speaking `version` knows it by."""
        error: dict[str, Any] = {"code": wire_code(self.code, version), "message": self.message}
        if self.data is not None:
            error["data"] = get_converter().unstructure(self.data)
        return error


def wire_code(code: ErrorCode, version: str) -> int:
    """The code a session speaking `version` receives for `code` (an error whose code changed keeps its old one)."""
    return LEGACY_CODES.get(code, {}).get(version, int(code))
