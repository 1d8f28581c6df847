"""Stage two for the JSON-RPC method table: a schema file's top-level `protocol` keyword -> a checked `Protocol`.

`schemas/protocol.schema.json` lists, under `protocol.methods`, each method's name, kind (request or
notification), direction, the `$defs` types of its params and result and the protocol version that added it
(`since`), and under `protocol.errors` the error codes with the type of their `data` (and, for a code that
changed, the code older versions used: `legacy_codes`). `protocol.version` is the version the table describes.
The params, result and data types are ordinary `$defs` objects that the normal path turns into attrs classes and
TypeScript interfaces. This module checks the table against the loaded
model, so a typo fails with the file, the JSON pointer and the reason before anything is written;
codegen/plugins/protocol/ renders the dispatch table and the TypeScript client from it.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import attrs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from codegen.errors import SchemaError
from codegen.model import Model, SchemaFile

KEYWORD = "protocol"
METHOD_NAME = r"^(\$/)?[a-z][A-Za-z0-9]*(/[a-z][A-Za-z0-9]*)*$"
ERROR_NAME = r"^[A-Z][A-Za-z0-9]*$"
#: Protocol versions are MAJOR.MINOR (docs/protocol.md says what each may change).
VERSION = r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$"
#: The version of a method or error that does not say `since`: the first version of the protocol.
FIRST_VERSION = "1.0"
#: The JSON-RPC 2.0 codes the server relies on: the table must declare each, with this code.
STANDARD_ERRORS = {
    "ParseError": -32700,
    "InvalidRequest": -32600,
    "MethodNotFound": -32601,
    "InvalidParams": -32602,
    "InternalError": -32603,
}
CANCEL_METHOD = "$/cancelRequest"

_TYPE_REF = {
    "type": "object",
    "properties": {"$ref": {"type": "string"}, "description": {"type": "string"}},
    "required": ["$ref"],
    "additionalProperties": False,
}
#: What the `protocol` keyword must look like (the semantic checks against the model come after).
META_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "version": {"type": "string", "pattern": VERSION},
        "methods": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": METHOD_NAME},
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "kind": {"enum": ["request", "notification"]},
                    "direction": {"enum": ["clientToServer", "serverToClient", "both"]},
                    "description": {"type": "string", "minLength": 1},
                    "params": _TYPE_REF,
                    "result": _TYPE_REF,
                    "errors": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                    "since": {"type": "string", "pattern": VERSION},
                },
                "required": ["kind", "direction", "description", "params"],
                "additionalProperties": False,
            },
        },
        "errors": {
            "type": "object",
            "propertyNames": {"pattern": ERROR_NAME},
            "additionalProperties": {
                "type": "object",
                "properties": {
                    "code": {"type": "integer"},
                    "description": {"type": "string", "minLength": 1},
                    "data": _TYPE_REF,
                    "since": {"type": "string", "pattern": VERSION},
                    "legacy_codes": {
                        "type": "object",
                        "minProperties": 1,
                        "propertyNames": {"pattern": VERSION},
                        "additionalProperties": {"type": "integer"},
                    },
                },
                "required": ["code", "description"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["version", "methods", "errors"],
    "additionalProperties": False,
}


def version_key(version: str) -> tuple[int, int]:
    """A MAJOR.MINOR version as numbers, so 1.10 comes after 1.9."""
    major, minor = version.split(".")
    return int(major), int(minor)


@attrs.frozen(kw_only=True)
class Method:
    name: str
    kind: Literal["request", "notification"]
    direction: Literal["clientToServer", "serverToClient", "both"]
    description: str
    params: str  # a $defs type name
    result: str | None
    errors: tuple[str, ...]
    since: str


@attrs.frozen(kw_only=True)
class ErrorDef:
    name: str
    code: int
    description: str
    data: str | None
    since: str
    #: Protocol version -> the code a session speaking that version receives instead of `code`.
    legacy_codes: tuple[tuple[str, int], ...]

    @property
    def constant(self) -> str:
        """`ReplayRunError` -> `REPLAY_RUN_ERROR` (the Python enum member)."""
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", self.name).upper()


@attrs.frozen(kw_only=True)
class Protocol:
    file: SchemaFile
    version: str
    methods: tuple[Method, ...]
    errors: tuple[ErrorDef, ...]

    def of(self, kind: str, direction: str) -> list[Method]:
        """The methods of `kind` that travel in `direction` (a "both" method travels in each)."""
        return [m for m in self.methods if m.kind == kind and m.direction in (direction, "both")]


def load_protocol(model: Model) -> Protocol | None:
    """The method table of the one schema file that has a `protocol` keyword, checked; None when none has."""
    owners = [f for f in model.files if KEYWORD in f.raw]
    if not owners:
        return None
    if len(owners) > 1:
        raise SchemaError(
            owners[1].path,
            f"/{KEYWORD}",
            f"only one schema file may hold the method table; {owners[0].path} has it already",
        )
    f = owners[0]
    raw = f.raw[KEYWORD]
    problems = list(Draft202012Validator(META_SCHEMA).iter_errors(raw))
    error = best_match(problems)
    if error is not None:
        pointer = f"/{KEYWORD}" + "".join(f"/{_escape(str(p))}" for p in error.absolute_path)
        # Every problem at that spot: a misspelled key is both "unexpected" and a "required" one missing.
        here = sorted({e.message for e in problems if e.absolute_path == error.absolute_path})
        raise SchemaError(f.path, pointer, f"invalid method table: {'; '.join(here)}")
    types = model.types
    ids = {s.id: s for s in model.files}

    def named(node: dict[str, Any], pointer: str, role: str) -> str:
        ref: str = node["$ref"]
        base, _, frag = ref.partition("#")
        target = ids.get(base or f.id)
        name = frag.removeprefix("/$defs/")
        if target is None or not frag.startswith("/$defs/") or name not in {t.name for t in target.types}:
            raise SchemaError(
                f.path, pointer, f"{role} $ref {ref!r} names no $defs type; use '#/$defs/Name' or '<$id>#/$defs/Name'"
            )
        if types[name].form != "object":
            raise SchemaError(f.path, pointer, f"{role} {name!r} must be an object type (it is a {types[name].form})")
        return name

    version = raw["version"]

    def since(spec: dict[str, Any], pointer: str) -> str:
        found: str = spec.get("since", FIRST_VERSION)
        if version_key(found) > version_key(version):
            raise SchemaError(f.path, f"{pointer}/since", f"since {found} is after the table's version {version}")
        return found

    errors: list[ErrorDef] = []
    codes: dict[int, str] = {}
    for name, spec in raw["errors"].items():
        pointer = f"/{KEYWORD}/errors/{name}"
        code = spec["code"]
        if code in codes:
            raise SchemaError(f.path, f"{pointer}/code", f"code {code} is already used by {codes[code]!r}")
        if name in STANDARD_ERRORS and code != STANDARD_ERRORS[name]:
            raise SchemaError(f.path, f"{pointer}/code", f"{name} is JSON-RPC's {STANDARD_ERRORS[name]}, not {code}")
        codes[code] = name
        data = named(spec["data"], f"{pointer}/data", "error data") if "data" in spec else None
        added = since(spec, pointer)
        for old in spec.get("legacy_codes", {}):
            if not version_key(added) <= version_key(old) < version_key(version):
                raise SchemaError(
                    f.path,
                    f"{pointer}/legacy_codes/{old}",
                    f"a legacy code is for a version from since ({added}) to before the table's version ({version})",
                )
        legacy = tuple(sorted(spec.get("legacy_codes", {}).items(), key=lambda kv: version_key(kv[0])))
        errors.append(
            ErrorDef(name=name, code=code, description=spec["description"], data=data, since=added, legacy_codes=legacy)
        )
    missing = sorted(set(STANDARD_ERRORS) - {e.name for e in errors})
    if missing:
        raise SchemaError(f.path, f"/{KEYWORD}/errors", f"the JSON-RPC 2.0 errors {missing} must be declared")
    _check_legacy_codes(f, errors)

    methods: list[Method] = []
    for name, spec in raw["methods"].items():
        pointer = f"/{KEYWORD}/methods/{_escape(name)}"
        kind = spec["kind"]
        if kind == "request" and "result" not in spec:
            raise SchemaError(f.path, pointer, f"request {name!r} needs a `result` type")
        if kind == "notification" and "result" in spec:
            raise SchemaError(
                f.path, f"{pointer}/result", f"notification {name!r} cannot have a result; make it a request"
            )
        for i, err in enumerate(spec.get("errors", [])):
            if err not in codes.values():
                raise SchemaError(
                    f.path, f"{pointer}/errors/{i}", f"unknown error {err!r}; declared: {sorted(codes.values())}"
                )
        methods.append(
            Method(
                name=name,
                kind=kind,
                direction=spec["direction"],
                description=spec["description"],
                params=named(spec["params"], f"{pointer}/params", "params"),
                result=named(spec["result"], f"{pointer}/result", "result") if "result" in spec else None,
                errors=tuple(spec.get("errors", ())),
                since=since(spec, pointer),
            )
        )
    if CANCEL_METHOD in raw["methods"]:
        cancel = next(m for m in methods if m.name == CANCEL_METHOD)
        if cancel.kind != "notification" or cancel.direction == "serverToClient":
            raise SchemaError(
                f.path,
                f"/{KEYWORD}/methods/{_escape(CANCEL_METHOD)}",
                "must be a clientToServer (or both) notification",
            )
    return Protocol(file=f, version=version, methods=tuple(methods), errors=tuple(errors))


def _check_legacy_codes(f: SchemaFile, errors: list[ErrorDef]) -> None:
    """In each older version a legacy code stands for, the codes a session of that version receives stay unique."""
    for e in errors:
        for old, code in e.legacy_codes:
            for other in errors:
                if other is e or version_key(other.since) > version_key(old):
                    continue
                if dict(other.legacy_codes).get(old, other.code) == code:
                    raise SchemaError(
                        f.path,
                        f"/{KEYWORD}/errors/{e.name}/legacy_codes/{old}",
                        f"in protocol {old}, code {code} is already {other.name!r}",
                    )


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")
