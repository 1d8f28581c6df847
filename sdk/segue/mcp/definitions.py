"""Cache-stable tool definitions from an MCP server's `tools/list`.

A server may list its tools in any order and render a schema's keys in any order; either would change the tool
blocks on the wire, and with them the tools hash that decides whether replayed reasoning is kept and where the
prompt cache breaks. So the definitions segue offers are canonical: tools sorted by name, each input schema with
its object keys sorted and its set-valued keywords (`required`, a list of `type`s, `enum`) sorted. Only what the
schema means survives; how the server happened to render it does not (a server that builds an enum from a Python
set lists it in a different order on every start). A real change (a tool added, removed or edited)
still changes the definitions, and replay reports it as the `tools` / `tool-missing` / `tool-changed` warnings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import attrs
from jsonschema.exceptions import SchemaError

from segue._core.hashing import canonical_json
from segue._core.json_schema import local_validator
from segue.errors import InputError, ToolSourceError

#: Segue's (and the vendors') rule for a tool name; MCP allows more (dots, slashes, 128 characters).
NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_-]")

# JSON Schema keywords whose value is a schema, a list of schemas, or a map of name -> schema: the walk descends
# into these. Every other keyword's value is data (const, default, examples): its object keys are sorted (JSON
# objects have no order) but its lists keep their order, except the keywords whose lists are sets.
_SCHEMA = frozenset(
    {"additionalProperties", "unevaluatedProperties", "unevaluatedItems", "items", "additionalItems", "contains"}
    | {"propertyNames", "if", "then", "else", "not", "contentSchema"}
)
_SCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_MAP = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_SETS = frozenset({"required", "type", "enum"})


class MCPToolsError(ToolSourceError):
    """An MCP server could not be started, did not answer its handshake, or listed a tool segue cannot offer, or
    MCPTools was given a bad option.

    Raised when a run reads the server's tools, before anything of the run is written (or by MCPTools itself, for
    a bad option or a command that does not exist). `.server` (and `.source`) name the server as
    `MCPTools(name=...)` does.
    """

    def __init__(self, server: str, message: str) -> None:
        super().__init__(server, f"MCP server {server}: {message}")
        self.server = server


@attrs.frozen(kw_only=True)
class Definition:
    """One tool as segue offers it: the name the model sees, the server's own name for it, and its canonical
    description and input schema."""

    name: str
    mcp_name: str
    description: str
    parameters: dict[str, Any]
    #: The server's annotations (readOnlyHint, destructiveHint, ...), as it sent them.
    annotations: dict[str, Any] | None = None


def canonical_schema(schema: Any) -> Any:
    """The schema with object keys sorted and `required` / `type` / `enum` lists sorted, at every level."""
    if isinstance(schema, list):
        return [canonical_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key in sorted(schema):
        value = schema[key]
        if key in _SCHEMA or key in _SCHEMA_LIST:
            out[key] = canonical_schema(value)
        elif key in _SCHEMA_MAP and isinstance(value, dict):
            out[key] = {name: canonical_schema(value[name]) for name in sorted(value)}
        elif key in _SETS and isinstance(value, list):
            out[key] = sorted((_sorted_keys(v) for v in value), key=canonical_json)
        else:
            out[key] = _sorted_keys(value)
    return out


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_keys(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(v) for v in value]
    return value


def segue_name(mcp_name: str, prefix: str | None) -> str:
    """The name the model sees: the server's, behind `prefix_` when given, with characters segue's name rule does
    not allow (MCP allows `.` and `/`) replaced by `_`."""
    return _NOT_ALLOWED.sub("_", f"{prefix}_{mcp_name}" if prefix else mcp_name)


def build_definitions(server: str, tools: Sequence[Any], prefix: str | None) -> list[Definition]:
    """Canonical definitions of a `tools/list` answer (mcp `Tool` objects), sorted by name.

    Raises MCPToolsError naming the server and the tool when a tool cannot be offered: its input schema is not a
    JSON Schema object, or two tools end up with one name."""
    out: dict[str, Definition] = {}
    for t in tools:
        name = segue_name(t.name, prefix)
        if not NAME.match(name):
            raise MCPToolsError(
                server,
                f"tool {t.name!r} becomes {name!r}, which is not 1 to 64 letters, digits, _ or -; "
                "give the server a shorter prefix= or none",
            )
        if name in out:
            raise MCPToolsError(
                server, f"tools {out[name].mcp_name!r} and {t.name!r} would both be offered as {name!r}"
            )
        schema = t.input_schema
        problem = _schema_problem(schema)
        if problem is not None:
            raise MCPToolsError(
                server, f"tool {t.name!r} has an input schema that is not a valid JSON Schema object: {problem}"
            )
        annotations = t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else None
        out[name] = Definition(
            name=name,
            mcp_name=t.name,
            description=t.description or t.title or t.name,
            parameters=canonical_schema(schema),
            annotations=annotations or None,
        )
    return [out[name] for name in sorted(out)]


def _schema_problem(schema: Any) -> str | None:
    if not isinstance(schema, dict):
        return f"expected an object, got {type(schema).__name__}"
    if schema.get("type") != "object":
        return f'"type" must be "object" (MCP input schemas describe the arguments object), got {schema.get("type")!r}'
    try:
        local_validator(schema, "the schema")  # its $refs resolve inside it, and it nests at most 64 levels
    except SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(root)"
        return f"at {where}: {e.message}"
    except InputError as e:
        return str(e).removeprefix("the schema: ")
    return None
