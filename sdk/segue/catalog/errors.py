"""Catalog errors, the file-format version table, and small helpers shared by loading and resolution."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any, Final, TypeVar

from segue._support.hooks import UNSET
from segue.errors import SegueError
from segue.generated import LeftOutModel, Model, ModelType, ModelVendor, Vendor

KeyPath = tuple[str, ...]
_T = TypeVar("_T")


_CATALOG_ENV = "SEGUE_CATALOG_PATH"
_KINDS: Final = ("model_types", "models", "vendors", "model_vendors", "left_out")
_ROW_TYPES: Final[dict[str, type]] = {
    "model_types": ModelType,
    "models": Model,
    "vendors": Vendor,
    "model_vendors": ModelVendor,
    "left_out": LeftOutModel,
}


class CatalogError(SegueError, ValueError):
    """A catalog file, row or lookup is wrong. `.file` and `.pointer` (JSON pointer) locate it; `.expected`
    says what would have been right. `.more` holds further problems found in the same load."""

    def __init__(self, message: str, *, file: str | None, pointer: str = "", expected: str = "") -> None:
        super().__init__(message)
        self.file = file
        self.pointer = pointer
        self.expected = expected
        self.more: list[CatalogError] = []

    def __str__(self) -> str:
        return str(self.args[0])


class CatalogLookupError(CatalogError, KeyError):
    """An unknown vendor, an ambiguous or malformed model name, or a price the catalog does not know, asked of a
    loaded catalog (also a KeyError)."""


def _error(file: str | None, pointer: str, expected: str, got: Any = UNSET, hint: str = "") -> CatalogError:
    where = f"{file}#{pointer}" if file is not None else (pointer or "catalog")
    got_text = "" if got is UNSET else f", got {got!r}"
    return CatalogError(
        f"{where}: expected {expected}{got_text}" + (f"; {hint}" if hint else ""),
        file=file,
        pointer=pointer,
        expected=expected,
    )


def _close(word: str, choices: Iterable[str], cutoff: float = 0.5) -> str:
    near = difflib.get_close_matches(word, sorted(set(choices)), n=3, cutoff=cutoff)
    return f"did you mean {', '.join(repr(n) for n in near)}?" if near else ""


def _ptr(*parts: str | int) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)
