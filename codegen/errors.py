"""The one error codegen raises for bad schemas: it names the file, the JSON pointer and the reason."""

from __future__ import annotations


class SchemaError(Exception):
    def __init__(self, file: str, pointer: str, reason: str) -> None:
        self.file = file
        self.pointer = pointer or "/"
        self.reason = reason
        super().__init__(f"{file}#{self.pointer}: {reason}")
