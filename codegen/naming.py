"""Naming and type-mapping rules, kept out of the templates so they can be tested on their own."""

from __future__ import annotations

import keyword
import re

_NOT_IDENT = re.compile(r"[^0-9a-zA-Z_]")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def py_field_name(json_name: str) -> str:
    """A JSON property name as a Python attribute: snake_case, no punctuation, keywords suffixed with `_`."""
    name = _CAMEL_BOUNDARY.sub("_", json_name)
    name = _NOT_IDENT.sub("_", name).strip("_").lower() or "field"
    if name[0].isdigit():
        name = "f_" + name
    if keyword.iskeyword(name) or name in {"extra"}:
        name += "_"
    return name


def module_name(schema_file: str) -> str:
    """`message.schema.json` -> `message`."""
    stem = schema_file.split("/")[-1]
    return stem.removesuffix(".json").removesuffix(".schema").replace("-", "_")


def ts_property(json_name: str) -> str:
    """A property key as TypeScript accepts it: bare when it is an identifier, quoted otherwise."""
    if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", json_name):
        return json_name
    return '"' + json_name.replace('"', '\\"') + '"'
