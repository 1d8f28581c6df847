"""A request's params checked before its handler runs: against the bundled protocol schema (jsonschema), for lone
surrogates and non-finite numbers no body or row can carry, then structured into the generated params class, so a
handler only ever sees a typed params object. Each problem is named by its JSON pointer (INVALID_PARAMS)."""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from segue.apps.protocol.errors import RpcError
from segue.generated import get_converter
from segue.generated.protocol import InvalidParamsData, ParamError
from segue.generated.protocol_methods import ErrorCode, Method

_SURROGATE = re.compile("[\ud800-\udfff]")
_SCHEMA = Path(__file__).resolve().parents[2] / "generated" / "schemas" / "protocol.schema.json"


def invalid_params(pointer: str, message: str) -> RpcError:
    return RpcError(
        ErrorCode.INVALID_PARAMS,
        f"invalid params: {pointer or '(params)'}: {message}",
        InvalidParamsData(errors=[ParamError(pointer=pointer, message=message)]),
    )


def parse_params(spec: Method, raw: Any) -> Any:
    """Validate against the bundled schema, then structure into the generated params class."""
    params = {} if raw is None else raw
    if not isinstance(params, dict):
        raise invalid_params("", f"params must be an object (by-name), got {type(params).__name__}")
    try:
        problems = _surrogates(params, "") or schema_errors(spec.params.__name__, params)
    except RecursionError:
        raise invalid_params("", "params are nested too deeply to validate; flatten them") from None
    if problems:
        first = problems[0]
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"invalid params for {spec.name}: {first.pointer or '(params)'}: {first.message}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
            InvalidParamsData(errors=problems),
        )
    try:
        return get_converter().structure(params, spec.params)
    except Exception as e:  # the schema passed, so this is a mismatch between schema and classes
        raise invalid_params("", f"{type(e).__name__}: {e}") from None


def _surrogates(value: Any, pointer: str) -> list[ParamError]:
    """Strings holding a lone surrogate (a JSON `\\ud800` escape with no partner): not Unicode text, so no vendor,
    database or reply can carry them; and NaN or Infinity, which Python's JSON reader takes but JSON has not (RFC
    8259, section 6), so no body or row can carry them either. Each is named by its pointer."""
    found: list[ParamError] = []
    if isinstance(value, float) and not math.isfinite(value):
        message = f"{json.dumps(value)} is not a JSON number (RFC 8259 has no NaN or Infinity); send a finite number"
        found.append(ParamError(pointer=pointer, message=message))
    elif isinstance(value, str):
        hit = None if value.isascii() else _SURROGATE.search(value)
        if hit is not None:
            message = f"holds a lone surrogate (U+{ord(hit.group()):04X}) at index {hit.start()}: not valid Unicode"
            found.append(ParamError(pointer=pointer, message=message))
    elif isinstance(value, dict):
        for key, item in value.items():
            at = f"{pointer}/{_escape(str(key))}"
            found += _surrogates(key, at) + _surrogates(item, at)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _surrogates(item, f"{pointer}/{i}")
    return found[:20]


def schema_errors(type_name: str, value: Any) -> list[ParamError]:
    errors = sorted(_validator(type_name).iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    return [ParamError(pointer=_pointer(e.absolute_path), message=e.message) for e in errors[:20]]


@functools.cache
def _validator(type_name: str) -> Draft202012Validator:
    schema = json.loads(_SCHEMA.read_text(encoding="utf-8"))
    registry: Registry[Any] = Registry().with_resource(schema["$id"], Resource.from_contents(schema))
    return Draft202012Validator({"$ref": f"{schema['$id']}#/$defs/{type_name}"}, registry=registry)


def _pointer(path: Any) -> str:
    return "".join("/" + _escape(str(p)) for p in path)


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")
