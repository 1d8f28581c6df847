"""Tool-call arguments the twin builds from a tool's JSON Schema and the user's message.

Every required parameter is filled, each from the first of:

1. `name: value` or `name=value` in the message (the name as in the schema, or with `_` read as a space);
2. for an `enum`, a value of it that the message mentions;
3. for a string, the next quoted text in the message ('…', "…", “…” or `…`);
4. for a string, the word after the parameter's name in the message, when it holds a digit or starts with a
   capital (`order 4417` or `order #4417` for `order_id`, `customer Ada` for `customer`); for a string whose
   name says it is an identifier (`…_id`, `…_number`, `…_code`, `…_ref`, `sku`), the next number;
5. for a number or integer, the next number in the message;
6. the schema's `const`, `default`, first `enum` value or first `examples` entry;
7. a placeholder of the type: `"<name>"`, the `minimum` (else 0), false, `[]`, or an object built the same way
   from its own required properties. Such a value is made up: `fill` lists the parameters that got one, and the
   twin's policy does not call a tool with them (it says which value it could not find instead).

An optional parameter is sent only when the message spells it out (1 or 2); otherwise the tool applies its own
default. So a message that spells its arguments out gets them, and any other still gets arguments of the right
shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import attrs

_QUOTED = re.compile(r"""(?<!\w)(?:'([^']+)'|"([^"]+)"|“([^”]+)”|`([^`]+)`)(?!\w)""")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?!\w|\.\d)")
_SCALARS = ("string", "integer", "number", "boolean", "null", "array", "object")
#: Words that, after a name's stem, say "the identifier follows" ("order number 4417", "order no. 4417").
_ID_WORDS = r"(?:\s+(?:id|number|no\.?|code|ref|#))?"
#: Parameter names that hold an identifier: a bare number in the message is one.
_ID_NAME = re.compile(r"(?:^|_)(?:id|number|no|code|ref|sku|key)$|(?<=[a-z])(?:Id|Number|Code|Ref)$")
#: Words after a stem that are not a value ("order is late", "customer The ...").
_NOT_VALUES = frozenset({"is", "was", "the", "a", "an", "of", "for", "and", "or", "to", "in", "on", "with"})


class _Message:
    """The user's message. Each quoted text or number in it is handed out once, in order of appearance; a value
    given as `name: value` is taken out of those pools."""

    def __init__(self, text: str) -> None:
        self.text = text
        quoted = [(m.span(), next(g for g in m.groups() if g is not None)) for m in _QUOTED.finditer(text)]
        numbers = [(m.span(), m.group(0)) for m in _NUMBER.finditer(text)]
        numbers = [n for n in numbers if not any(_overlap(n[0], q[0]) for q in quoted)]
        self._pools = {"quoted": quoted, "number": numbers}
        self._taken: list[tuple[int, int]] = []
        #: Parameters (dotted paths) whose value the message did not give and the schema did not either.
        self.made_up: list[str] = []

    def after_stem(self, name: str) -> str | None:
        """The word after the parameter's name (without an `_id`-like tail) in the message, when it holds a digit
        or starts with a capital: `order 4417` for order_id, `customer Ada` for customer."""
        words = [w for w in re.split(r"[_\s-]+|(?<=[a-z])(?=[A-Z])", name) if w]
        stems = [" ".join(words[:n]) for n in range(len(words), 0, -1)]
        for stem in dict.fromkeys(s.lower() for s in stems if s.lower() not in {"id", "number", "no", "code"}):
            pattern = rf"(?<!\w){re.escape(stem)}s?{_ID_WORDS}\s*[:#]?\s*([A-Za-z0-9][\w-]*)"
            for found in re.finditer(pattern, self.text, re.IGNORECASE):
                value = found.group(1)
                spoken = any(c.isdigit() for c in value) or value[0].isupper()
                if spoken and value.lower() not in _NOT_VALUES and not self._used(found.span(1)):
                    self._taken.append(found.span(1))
                    return value
        return None

    def _used(self, span: tuple[int, int]) -> bool:
        return any(_overlap(span, taken) for taken in self._taken)

    def labelled(self, name: str) -> str | None:
        for label in dict.fromkeys((name, name.replace("_", " "))):
            pattern = rf"(?<!\w){re.escape(label)}\s*[:=]\s*(?:{_QUOTED.pattern}|([^\s,;!?]+))"
            found = re.search(pattern, self.text, re.IGNORECASE)
            if found:
                group = next(i for i, g in enumerate(found.groups(), 1) if g is not None)
                self._taken.append(found.span(group))
                bare = group == len(found.groups())  # not quoted: a sentence's full stop is not part of it
                return found.group(group).rstrip(".") if bare else found.group(group)
        return None

    def next(self, pool: str) -> str | None:
        items = self._pools[pool]
        while items:
            span, value = items.pop(0)
            if not self._used(span):
                return value
        return None


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@attrs.frozen
class Filled:
    """Arguments built for a tool, and the parameters among them whose value was made up (rule 7)."""

    arguments: dict[str, Any]
    made_up: tuple[str, ...]


def fill(schema: Mapping[str, Any], message: str) -> Filled:
    """Arguments for a tool whose parameters are ``schema`` (a JSON Schema object), read from ``message``."""
    read = _Message(message)
    value = _value(schema, schema, "", read, top=True)
    return Filled(value if isinstance(value, dict) else {}, tuple(read.made_up))


def build_arguments(schema: Mapping[str, Any], message: str) -> dict[str, Any]:
    """`fill`'s arguments alone (made-up values included)."""
    return fill(schema, message).arguments


def _value(schema: Mapping[str, Any], root: Mapping[str, Any], name: str, message: _Message, *, top: bool) -> Any:
    schema = _resolve(schema, root)
    kind = _type(schema)
    if kind == "object":
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = [r for r in schema.get("required") or [] if isinstance(r, str)]
        prefix = f"{name}." if name else ""
        out = {key: _value(properties.get(key) or {}, root, prefix + key, message, top=False) for key in required}
        for key, sub in properties.items():  # an optional parameter only when the message spells it out
            if key not in out and isinstance(sub, Mapping):
                sub = _resolve(sub, root)
                spelled = _from_message(sub, _type(sub), key, message, pools=False)
                if spelled is not None:
                    out[key] = spelled
        return out
    if not top:
        found = _from_message(schema, kind, name.rsplit(".", 1)[-1], message)
        if found is not None:
            return found
    value, made_up = _fallback(schema, kind, name.rsplit(".", 1)[-1])
    if made_up:
        message.made_up.append(name)
    return value


def _from_message(schema: Mapping[str, Any], kind: str, name: str, message: _Message, *, pools: bool = True) -> Any:
    """A value the message gives for parameter ``name``; ``pools``: also the next quoted text or number."""
    enum = schema.get("enum")
    labelled = message.labelled(name)
    if labelled is not None:
        coerced = _coerce(labelled, kind)
        if coerced is not None and (not isinstance(enum, list) or coerced in enum):
            return coerced
    if isinstance(enum, list):
        return next((option for option in enum if _mentions(message.text, option)), None)
    if not pools:
        return None
    if kind == "string":
        found = message.next("quoted") or message.after_stem(name)
        if found is None and _ID_NAME.search(name):
            found = message.next("number")
        return found
    if kind in ("integer", "number"):
        number = message.next("number")
        return None if number is None else _coerce(number, kind)
    return None


def _mentions(text: str, option: Any) -> bool:
    word = str(option).lower()
    return bool(word) and re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text.lower()) is not None


def _coerce(text: str, kind: str) -> Any:
    """``text`` as a value of JSON type ``kind``, or None when it is not one."""
    if kind == "string":
        return text
    if kind in ("integer", "number", "boolean", "null"):
        try:
            value = json.loads(text.lower() if kind == "boolean" else text)
        except json.JSONDecodeError:
            return None
        if kind == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        expected = {"integer": int, "number": int | float, "boolean": bool, "null": type(None)}[kind]
        if isinstance(value, bool) and kind != "boolean":
            return None
        return value if isinstance(value, expected) else None
    return None


def _fallback(schema: Mapping[str, Any], kind: str, name: str) -> tuple[Any, bool]:
    """The schema's own value for the parameter, else a placeholder of its type: (value, made up)."""
    for key in ("const", "default"):
        if key in schema:
            return schema[key], False
    for key in ("enum", "examples"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return options[0], False
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        if not isinstance(low, int | float) or isinstance(low, bool):
            return 0, True
        bump = 1 if "minimum" not in schema else 0
        return (int(low) + bump if kind == "integer" else low + bump), True
    return {"string": f"<{name}>", "boolean": False, "null": None, "array": []}.get(kind), kind != "null"


def _type(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if isinstance(kind, str) and kind in _SCALARS:
        return kind
    if "properties" in schema:
        return "object"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return _json_type(schema["enum"][0])
    if "const" in schema:
        return _json_type(schema["const"])
    return "string"


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    """One concrete schema: a local `$ref` (`#/$defs/...`) followed, and of `anyOf` / `oneOf` / `allOf` the first
    option that is not `null`."""
    for _ in range(32):  # a reference cycle ends here instead of looping
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part) if isinstance(target, Mapping) else None
            schema = target if isinstance(target, Mapping) else {}
            continue
        options = next((schema[k] for k in ("anyOf", "oneOf", "allOf") if isinstance(schema.get(k), list)), None)
        if "type" in schema or not options:
            return schema
        concrete = [o for o in options if isinstance(o, Mapping) and o.get("type") != "null"]
        schema = concrete[0] if concrete else {"type": "null"}
    return schema


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if value is None:
        return "null"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "string"
