"""One rule for text in the run store, the same on SQLite and PostgreSQL.

PostgreSQL cannot hold a NUL character in a text column, and neither database driver can encode a lone surrogate
(what a JSON `"\\ud800"` escape decodes to). Inputs, model answers and tool results may contain either, and both
backends must store and return the same text. So every text column goes through `encode` on the way in and
`decode` on the way out:

- text without NUL or lone surrogates is stored as it is (nearly all text: existing rows need no migration);
- other text is stored as a marker followed by its JSON string literal with ASCII escapes (`\\u0000`, `\\ud800`),
  which either database holds, and which `decode` turns back into exactly the original string.

The marker is U+FDD0, a Unicode noncharacter: permanently reserved for a program's internal use, so it does not
occur at the start of real text. Text that does start with it is escaped the same way, which keeps the rule
reversible for every string.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import peewee as pw

if TYPE_CHECKING:  # the stubs make Peewee's fields generic; at run time they are plain classes
    _Field = pw.Field[Any]
    _Text = pw.TextField[Any]
    _Char = pw.CharField[Any]
else:
    _Field, _Text, _Char = pw.Field, pw.TextField, pw.CharField

MARK = "\ufdd0"


def encode(text: str) -> str:
    """The stored form of `text` (the text itself unless it holds NUL, a lone surrogate, or starts with MARK)."""
    if text.startswith(MARK) or not _storable(text):
        return MARK + json.dumps(text)
    return text


def _storable(text: str) -> bool:
    """No NUL and no lone surrogate, checked by C loops (request bodies run to megabytes): ASCII text has no
    surrogate; other text encodes to UTF-8 unless it holds one."""
    if text.isascii():
        return "\x00" not in text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # UTF-8 has no surrogates: a lone one is what fails here
        return False
    return "\x00" not in text


def decode(stored: str) -> str:
    """The text `encode` stored."""
    if stored.startswith(MARK):
        text: str = json.loads(stored[len(MARK) :])
        return text
    return stored


class _TextRule(_Field):
    """Applies the rule to a column's values (mixed into the text field types below)."""

    def db_value(self, value: Any) -> Any:
        value = super().db_value(value)  # type: ignore[no-untyped-call]
        return encode(value) if isinstance(value, str) else value

    def python_value(self, value: Any) -> Any:
        return decode(value) if isinstance(value, str) else value


class TextField(_TextRule, _Text):
    """A TEXT column whose values follow the store's text rule."""


class CharField(_TextRule, _Char):
    """A VARCHAR column whose values follow the store's text rule."""
