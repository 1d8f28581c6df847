"""The validators generated classes check their own fields with: a schema's type, bounds, enum and pattern, said
once, as lsprotocol's generated attrs classes do.

codegen (codegen/pytypes.py) turns each property's schema into one `field(...)` over a tree of shapes
(`integer(minimum=1)`, `list_of(string(min_len=1))`, `one_of(...)`), so constructing a class with a bad value
raises FieldError naming the class, the field (the item's index inside a list), what it must be and the value:
`ReplayKnobs.replay_step must be a whole number >= 1 (how many runs the window moves at once), got 0 (int)`.
The schema's `title` on a property is the gloss in parentheses. JSON's rules, not Python's: a bool is not a
number, a number is finite, and an int field given 3.0 is told to pass 3. Objects and unions of objects are
checked by their own classes when constructed (and by the converter when structured), not again here.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from segue.errors import FieldError

#: What a shape says of a value: None when it fits, else the problem, worded for the label (`stop[1]`).
Problem = Callable[[str, Any], str | None]
_MAX_FLOAT = sys.float_info.max


@attrs.frozen
class Shape:
    """What one value must be: `expected` in words (`a whole number >= 1`), `problem(label, value)` the check.

    `fits(value)`, when given, answers True only for values `problem` passes, without building a label: the way
    most values go, so constructing a class costs one call per field (`problem` still decides the rest)."""

    expected: str
    problem: Problem
    fits: Callable[[Any], bool] | None = None


def shown(value: Any) -> str:
    """The value as a message shows it: its repr, cut at 80 characters, and its type."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        text = f"<a {value.bit_length()}-bit number>" if isinstance(value, int) else "<unprintable>"
    cut = text if len(text) <= 80 else text[:80] + "..."
    return f"{cut} ({type(value).__name__})"


def _refusal(label: str, expected: str, value: Any) -> str:
    whole = isinstance(value, float) and value.is_integer() and "whole number" in expected
    return f"{label} must be {expected}, got {shown(value)}" + (f"; pass {int(value)}" if whole else "")


def _bounds(minimum: float | None, maximum: float | None) -> str:
    def num(n: float) -> str:
        return f"{n:,}" if isinstance(n, int) and abs(n) >= 10_000 else str(n)

    if minimum is not None and maximum is not None:
        return f" from {num(minimum)} to {num(maximum)}"
    if minimum is not None:
        return f" >= {num(minimum)}"
    return f" <= {num(maximum)}" if maximum is not None else ""


def _in_bounds(v: float, minimum: float | None, maximum: float | None) -> bool:
    return (minimum is None or v >= minimum) and (maximum is None or v <= maximum)


def integer(minimum: int | None = None, maximum: int | None = None) -> Shape:
    """JSON Schema `integer`: an int that is not a bool, within the bounds."""
    expected = "a whole number" + _bounds(minimum, maximum)

    def problem(label: str, v: Any) -> str | None:
        ok = isinstance(v, int) and not isinstance(v, bool) and _in_bounds(v, minimum, maximum)
        return None if ok else _refusal(label, expected, v)

    return Shape(expected, problem)


def number(minimum: float | None = None, maximum: float | None = None) -> Shape:
    """JSON Schema `number`: an int or a finite float (JSON has no inf or NaN), not a bool, within the bounds."""
    expected = ("a number" if minimum is not None and maximum is not None else "a finite number") + _bounds(
        minimum, maximum
    )

    def problem(label: str, v: Any) -> str | None:
        if isinstance(v, bool) or not isinstance(v, int | float):
            return _refusal(label, expected, v)
        finite = math.isfinite(v) if isinstance(v, float) else abs(v) <= _MAX_FLOAT
        return None if finite and _in_bounds(v, minimum, maximum) else _refusal(label, expected, v)

    return Shape(expected, problem)


def string(min_len: int | None = None, max_len: int | None = None, pattern: str | None = None) -> Shape:
    """JSON Schema `string` with minLength, maxLength and pattern (searched, as JSON Schema does)."""
    words = ["a non-empty string" if min_len == 1 else "a string"]
    if min_len is not None and min_len > 1:
        words.append(f"of at least {min_len} characters")
    if max_len is not None:
        words.append(f"of at most {max_len:,} characters")
    if pattern is not None:
        words.append(f"matching {pattern!r}")
    expected = " ".join(words)
    search = re.compile(pattern).search if pattern is not None else None

    def problem(label: str, v: Any) -> str | None:
        ok = (
            isinstance(v, str)
            and (min_len is None or len(v) >= min_len)
            and (max_len is None or len(v) <= max_len)
            and (search is None or search(v) is not None)
        )
        return None if ok else _refusal(label, expected, v)

    if max_len is None and search is None:
        shortest = min_len or 0
        return Shape(expected, problem, lambda v: v.__class__ is str and len(v) >= shortest)
    return Shape(expected, problem)


def boolean() -> Shape:
    return Shape(
        "True or False",
        lambda label, v: None if isinstance(v, bool) else _refusal(label, "True or False", v),
        lambda v: v.__class__ is bool,
    )


def one_of(values: Sequence[Any]) -> Shape:
    """JSON Schema `enum` / `const`: one of these values (1 is not True)."""
    allowed = tuple(values)
    expected = repr(allowed[0]) if len(allowed) == 1 else "one of " + ", ".join(repr(a) for a in allowed)

    def problem(label: str, v: Any) -> str | None:
        ok = any(v == a and type(v) is type(a) for a in allowed)
        return None if ok else _refusal(label, expected, v)

    if all(a.__class__ is str for a in allowed):
        strings = frozenset(allowed)
        return Shape(expected, problem, lambda v: v.__class__ is str and v in strings)
    return Shape(expected, problem)


def anything() -> Shape:
    """A value whose shape its own class checks (an object, a union of objects), or any JSON value."""
    return Shape("any value", lambda label, v: None, lambda v: True)


def any_of(*members: Shape) -> Shape:
    """JSON Schema `oneOf` of values: fits when one member fits."""
    expected = " or ".join(m.expected for m in members)

    def problem(label: str, v: Any) -> str | None:
        return None if any(m.problem(label, v) is None for m in members) else _refusal(label, expected, v)

    return Shape(expected, problem)


def list_of(item: Shape, min_items: int | None = None) -> Shape:
    """JSON Schema `array`: a list (not a tuple: the converter and the store read lists), each item `item`; a
    bad item is named by its index."""
    plural = _plural(item.expected)
    expected = (f"a non-empty list of {plural}" if min_items == 1 else f"a list of {plural}") + (
        f" (at least {min_items})" if min_items is not None and min_items > 1 else ""
    )
    checks_items = item.expected != "any value"
    item_fits = item.fits
    fewest = min_items or 0

    def problem(label: str, v: Any) -> str | None:
        if not isinstance(v, list) or (min_items is not None and len(v) < min_items):
            return _refusal(label, expected, v)
        if checks_items:
            for i, each in enumerate(v):
                if item_fits is not None and item_fits(each):
                    continue
                found = item.problem(f"{label}[{i}]", each)
                if found is not None:
                    return found
        return None

    if not checks_items:
        return Shape(expected, problem, lambda v: v.__class__ is list and len(v) >= fewest)
    if item_fits is not None:
        return Shape(expected, problem, lambda v: v.__class__ is list and len(v) >= fewest and all(map(item_fits, v)))
    return Shape(expected, problem)


def map_of(value: Shape) -> Shape:
    """JSON `object` with string keys, each value `value`; a bad value is named by its key."""
    expected = "a dict of strings to " + _plural(value.expected)
    checks_values = value.expected != "any value"
    value_fits = value.fits

    def problem(label: str, v: Any) -> str | None:
        if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
            return _refusal(label, expected, v)
        if checks_values:
            for k, each in v.items():
                if value_fits is not None and value_fits(each):
                    continue
                found = value.problem(f"{label}[{k!r}]", each)
                if found is not None:
                    return found
        return None

    return Shape(expected, problem)


def _plural(expected: str) -> str:
    """`a non-empty string` -> `non-empty strings`, for a list's items."""
    words = expected.removeprefix("a ").removeprefix("an ").split(" ", 2)
    if expected.startswith(("a ", "an ")) and len(words) >= 2 and words[0] in ("non-empty", "whole", "finite"):
        return " ".join([words[0], words[1] + "s", *words[2:]])
    if expected.startswith(("a ", "an ")):
        return " ".join([words[0] + "s", *words[1:]])
    return f"values that are {expected}"


def field(shape: Shape, *, title: str | None = None, optional: bool = False) -> Callable[[Any, Any, Any], None]:
    """The attrs validator of one field: FieldError when the value does not fit `shape` (None passes an optional
    field; the UNSET of an optional nullable one is passed by `hooks.unset_or` around this)."""
    gloss = f" ({title})" if title else ""
    check = shape.problem
    fits = shape.fits or (lambda value: False)

    def validate(inst: Any, attribute: Any, value: Any) -> None:
        if fits(value) or (value is None and optional):
            return
        found = check(attribute.name, value)
        if found is not None:
            if gloss:
                head, sep, rest = found.partition(", got ")
                found = f"{head}{gloss}{sep}{rest}"
            raise FieldError(type(inst).__name__, attribute.name, value, found)

    return validate
