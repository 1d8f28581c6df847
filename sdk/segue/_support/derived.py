"""Hand-written, read-only attributes of generated types (a schema's `x-python-base` names the class here that a
generated class derives from): what a user asks of a value that its fields hold but do not say in one piece.

Each base holds no fields and no state (`__slots__ = ()`), so the generated class stays the schema's own:
structured, unstructured, compared and shown (repr) by its fields alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath
from typing import Protocol


class _PriceSource(Protocol):
    """The fields of the generated PriceSource that the long form reads."""

    @property
    def model(self) -> str: ...
    @property
    def vendor(self) -> str | None: ...
    @property
    def file(self) -> str | None: ...
    @property
    def pointer(self) -> str | None: ...
    @property
    def note(self) -> str | None: ...
    @property
    def self_hosted(self) -> bool | None: ...


class CostSources:
    """RunCost's `sources`: where each serving path's prices came from, in the long form."""

    __slots__ = ()
    prices: Sequence[_PriceSource]

    @property
    def sources(self) -> list[str]:
        """One line per serving path that priced the run: the path, the catalog file's name with the JSON pointer
        of its pricing, and that row's notes (the sources of its numbers and the date they were read); "no catalog
        entry" when the catalog had none. What `segue runs show --sources` prints; the repr shows only the short
        reference."""
        return [
            f"{p.model}{'@' + p.vendor if p.vendor else ''}: {where}{', self-hosted' if p.self_hosted else ''}"
            f"{f' ({p.note})' if p.note else ''}"
            for p in self.prices
            # A run recorded before sources were short kept an absolute path: only its name leaves the process.
            for where in [f"{PurePath(p.file).name}#{p.pointer or ''}" if p.file else "no catalog entry"]
        ]
