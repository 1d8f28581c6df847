"""The small typed readers the generated wire parsers call: a malformed vendor payload fails with the vendor,
the block and the key (segue.errors.MalformedResponseError), never a KeyError. Generated code imports only this
folder, so these live here rather than in segue.wire (which imports the generated code): that ends the folder
circle (issue 25).

Nothing here imports a vendor SDK or a generated module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

# The two wire errors are segue.errors' (users catch WireError); the generated parsers import them from here.
from segue.errors import MalformedResponseError as MalformedResponseError
from segue.errors import WireError as WireError

T = TypeVar("T")


def dumps_arguments(arguments: Mapping[str, Any]) -> str:
    """Tool arguments as the JSON text OpenAI-style wires carry: compact, key order kept, so replays stay stable."""
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def loads_arguments(text: str, where: str) -> dict[str, Any]:
    """Parse a tool call's JSON arguments; truncated or non-object JSON is a clear error, not a crash later."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        shown = text if len(text) <= 200 else text[:200] + "…"
        raise MalformedResponseError(
            f"{where}: tool arguments are not valid JSON ({e.msg} at char {e.pos}; truncated output?): {shown!r}"
        ) from None
    if not isinstance(value, dict):
        raise MalformedResponseError(f"{where}: tool arguments must be a JSON object, got {type(value).__name__}")
    return value


def need(value: T | None, what: str, field: str, wire: str) -> T:
    """A field the vendor requires but the canonical block may lack: a WireError naming both and what to do."""
    if value is None:
        raise WireError(
            f"{what} has no {field!r}, which the {wire} wire requires to send it; keep the value the vendor "
            f"returned when storing the block, or drop the block (e.g. replay_reasoning=False)"
        )
    return value


# Readers used by the generated parsers. `where` names the vendor and what is read, e.g. "anthropic 'tool_use'
# item". The opt_ readers take None for the object too (a missing optional parent): the value is then absent.


@attrs.frozen(kw_only=True)
class Unknown:
    """What a generated parse dispatch returns for a vendor `type` it has no rule for (`tag` is None when the
    object carries no tag): the caller decides whether to note, skip or fall back."""

    tag: object
    raw: Mapping[str, Any]


def as_object(value: Any) -> Mapping[str, Any]:
    """A vendor value kept raw as the JSON object it is, or wrapped as {"value": ...} when it is none (an
    Unknown's raw, a CacheVerdict's raw): one wrapping, so a reader of stored raws knows its shape."""
    return value if isinstance(value, Mapping) else {"value": value}


def value_or(value: T | None, fallback: T) -> T:
    return fallback if value is None else value


def known(value: T | Unknown, where: str) -> T:
    """A value a dispatch parsed where the canonical type has no room for an unknown tag."""
    if isinstance(value, Unknown):
        raise MalformedResponseError(f"{where}: {value.tag!r} is not a type segue reads here")
    return value


def one_of(value: str | None, choices: tuple[Any, ...], key: str, where: str) -> Any:
    """`value` when it is one of the `choices` a canonical enum admits (typed Any: the caller's field is that
    enum's Literal)."""
    if value is not None and value not in choices:
        raise MalformedResponseError(f"{where}: {key!r} must be one of {list(choices)}, got {value!r}")
    return value


def _get(d: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(d, Mapping):
        raise MalformedResponseError(f"{where}: expected a JSON object, got {type(d).__name__}")
    if key not in d:
        raise MalformedResponseError(f"{where}: missing required key {key!r} (got keys {sorted(d)})")
    return d[key]


def _opt(d: Mapping[str, Any] | None, key: str, where: str) -> Any:
    return None if d is None else as_map(d, where).get(key)


def _typed(value: Any, kind: type[T], key: str, where: str) -> T:
    # bool is an int subclass: a count of True is a malformed payload, not 1.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise MalformedResponseError(f"{where}: {key!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


def _number(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedResponseError(f"{where}: {key!r} must be a number, got {type(value).__name__}")
    return float(value)


def as_map(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedResponseError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def req_str(d: Mapping[str, Any], key: str, where: str) -> str:
    return _typed(_get(d, key, where), str, key, where)


def opt_str(d: Mapping[str, Any] | None, key: str, where: str) -> str | None:
    value = _opt(d, key, where)
    return None if value is None else _typed(value, str, key, where)


def req_int(d: Mapping[str, Any], key: str, where: str) -> int:
    return _typed(_get(d, key, where), int, key, where)


def opt_int(d: Mapping[str, Any] | None, key: str, where: str) -> int | None:
    value = _opt(d, key, where)
    return None if value is None else _typed(value, int, key, where)


def req_bool(d: Mapping[str, Any], key: str, where: str) -> bool:
    return _typed(_get(d, key, where), bool, key, where)


def opt_bool(d: Mapping[str, Any] | None, key: str, where: str) -> bool | None:
    value = _opt(d, key, where)
    return None if value is None else _typed(value, bool, key, where)


def req_float(d: Mapping[str, Any], key: str, where: str) -> float:
    return _number(_get(d, key, where), key, where)


def opt_float(d: Mapping[str, Any] | None, key: str, where: str) -> float | None:
    value = _opt(d, key, where)
    return None if value is None else _number(value, key, where)


def req_obj(d: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    return dict(_typed(_get(d, key, where), dict, key, where))


def opt_obj(d: Mapping[str, Any] | None, key: str, where: str) -> dict[str, Any] | None:
    value = _opt(d, key, where)
    return None if value is None else dict(_typed(value, dict, key, where))


def req_list(d: Mapping[str, Any], key: str, where: str) -> list[Any]:
    return _typed(_get(d, key, where), list, key, where)


def opt_list(d: Mapping[str, Any] | None, key: str, where: str) -> list[Any] | None:
    value = _opt(d, key, where)
    return None if value is None else _typed(value, list, key, where)


def req_any(d: Mapping[str, Any], key: str, where: str) -> Any:
    return _get(d, key, where)


def opt_any(d: Mapping[str, Any] | None, key: str, where: str) -> Any:
    return _opt(d, key, where)


def req_map(d: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    return as_map(_get(d, key, where), f"{where} {key!r}")


def opt_map(d: Mapping[str, Any] | None, key: str, where: str) -> Mapping[str, Any] | None:
    value = _opt(d, key, where)
    return None if value is None else as_map(value, f"{where} {key!r}")


def tokens_by_ttl(details: Mapping[str, Any] | None, prefix: str, suffix: str, where: str) -> dict[str, int] | None:
    """Per-TTL token counts from a vendor's details object, keyed by the TTL name the key spells.

    Anthropic's `cache_creation` holds `ephemeral_5m_input_tokens` (prefix "ephemeral_", suffix "_input_tokens");
    OpenAI's `cache_write_tokens_details` holds `ttl_30m_tokens` (prefix "ttl_", suffix "_tokens"). The names are
    the ones the catalog's `llm.cache_ttls` lists, so `Usage.cache_write_tokens_by_ttl` is priced per TTL without
    a vendor table. None when the vendor sent no details."""
    if details is None:
        return None
    found = {}
    for key in as_map(details, where):
        if key.startswith(prefix) and key.endswith(suffix) and len(key) > len(prefix) + len(suffix):
            count = opt_int(details, key, where)
            if count is not None:
                found[key[len(prefix) : -len(suffix)]] = count
    return found


def stop_reason(raw: str | None, table: Mapping[str, str]) -> str:
    """The vendor's stop reason in segue's vocabulary (end_turn, tool_use, max_tokens, ...); unknown ones pass."""
    if raw is None:
        return "end_turn"
    return table.get(raw, raw)
