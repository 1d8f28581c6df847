"""What every vendor wire shares: the request a driver sends, the two wire errors, and the small typed readers the
generated parsers use so a malformed vendor payload fails with the vendor, the block and the key, never a KeyError.

Nothing here imports a vendor SDK.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar, get_args

import attrs

from segue.contracts import FRAGMENT_META_KEY, ProviderNote, ProviderRequest
from segue.errors import SegueError
from segue.generated import Message, ReasoningBlock, Role, Usage

T = TypeVar("T")

#: segue's roles (the canonical Role enum) by name: the wire code compares them, the mappings translate them.
_ROLE_NAMES: tuple[Role, ...] = get_args(Role)
SYSTEM, USER, ASSISTANT, TOOL = _ROLE_NAMES


class WireError(SegueError, ValueError):
    """A canonical message cannot be put on this vendor's wire (e.g. a thinking block without its signature)."""


class MalformedResponseError(SegueError, ValueError):
    """The vendor's JSON does not have the shape its API documents. Drivers turn it into a ProviderError."""


@attrs.frozen(kw_only=True)
class WireRequest:
    """One vendor request, ready for the official client.

    `body` is the exact JSON the vendor receives. `headers` are only the headers segue sets (never credentials).
    `extra_body` names the top-level keys the SDK's `create()` has no keyword for: drivers pass them through the
    client's `extra_body`. `notes` say what segue left off the wire and why.
    """

    body: dict[str, Any]
    headers: dict[str, str] = attrs.field(factory=dict)
    extra_body: frozenset[str] = frozenset()
    notes: list[ProviderNote] = attrs.field(factory=list)
    #: Wire block path (`messages.i.content.j`) -> index of the canonical message it came from, for reading the
    #: vendor's reports about input blocks; filled only when `binding` (Anthropic only today).
    origins: Mapping[str, int] = attrs.field(factory=dict)
    #: The request asks the vendor to report the replayed reasoning it drops (Anthropic thinking block binding).
    binding: bool = False
    #: The output limit the body sends (None: the vendor's own default applies).
    output_limit: int | None = None

    def sdk_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the client's `create()`: typed keys directly, the rest through `extra_body`."""
        kwargs = {k: v for k, v in self.body.items() if k not in self.extra_body}
        extra = {k: self.body[k] for k in self.extra_body if k in self.body}
        if extra:
            kwargs["extra_body"] = extra
        if self.headers:
            kwargs["extra_headers"] = dict(self.headers)
        return kwargs


@attrs.frozen(kw_only=True)
class ParsedResponse:
    """A vendor response turned canonical: the assistant message, usage, normalised stop reason, notes."""

    message: Message
    usage: Usage
    stop_reason: str
    notes: list[ProviderNote] = attrs.field(factory=list)
    input_transformations: list[dict[str, Any]] = attrs.field(factory=list)
    #: The model the response says served it (its `model` field; None: it did not say).
    served_model: str | None = None
    #: Names of tool calls cut off at the output limit (arguments not whole JSON), left out of `message`.
    truncated_calls: tuple[str, ...] = ()


def is_fragment(message: Message) -> bool:
    """True for the trailing runtime-state fragment: never a cache anchor."""
    return message.meta is not None and FRAGMENT_META_KEY in message.meta


def cache_anchor(anchors: list[Any], messages: list[Message], end: int | None) -> Any:
    """The wire block for a breakpoint at canonical message `end`: its anchor, or the nearest earlier one.

    `anchors[i]` is the last cacheable wire block canonical message i produced (None if it produced none). The
    trailing runtime-state fragment is skipped: a breakpoint there would be rewritten on every iteration.
    """
    if end is None:
        return None
    for i in range(min(end, len(messages) - 1), -1, -1):
        if anchors[i] is not None and not is_fragment(messages[i]):
            return anchors[i]
    return None


def breakpoint_blocks(fixed: list[Any], anchors: list[Any], request: ProviderRequest) -> list[Any]:
    """Where block-cache vendors put cache_control (at most four): the `fixed` system/stable-head blocks, the last
    replayed message, the last message (each falling back to the nearest earlier non-fragment anchor)."""
    marks = list(fixed)
    for end in (request.replay_end, len(request.messages) - 1):
        anchor = cache_anchor(anchors, request.messages, end)
        if anchor is not None and not any(anchor is m for m in marks):
            marks.append(anchor)
    return marks


def writable(items: list[Any], fixed: list[Any], block: Any) -> Any:
    """The `block` a marker may be set on: a `fixed` block (system, stable head: built for this request) as it is,
    any other through `unshare`."""
    return block if any(block is f for f in fixed) else unshare(items, block)


def unshare(items: list[Any], target: Any) -> Any:
    """Copy on write, before a marker (cache_control, a breakpoint) is set on `target`: the dicts and lists on the
    way from `items` (a request's own list of wire messages or items) to `target` are replaced by shallow copies,
    and the copy of `target` is returned. Blocks built once per run (contracts.WirePrefix) are shared by every
    request of the run, so one request's marker must not reach the next. `items` is searched from the end, where
    the anchors are; a `target` not inside it is returned as it is."""
    path = _path(items, target)
    if path is None:
        return target
    container: Any = items
    for key in path:
        value = container[key]
        container[key] = value = dict(value) if isinstance(value, dict) else list(value)
        container = value
    return container


def _path(node: Any, target: Any) -> list[Any] | None:
    """The keys from `node` to `target` (by identity), searched from the end: the cost is what follows it."""
    for key in reversed(list(node) if isinstance(node, dict) else range(len(node))):
        value = node[key]
        if value is target:
            return [key]
        if isinstance(value, dict | list):
            found = _path(value, target)
            if found is not None:
                return [key, *found]
    return None


def foreign_reasoning(block: object, reasoning_vendor: str | None) -> bool:
    """Reasoning this wire must not carry: another vendor's (never rendered as text), or any when it replays none."""
    return isinstance(block, ReasoningBlock) and (reasoning_vendor is None or block.vendor != reasoning_vendor)


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
