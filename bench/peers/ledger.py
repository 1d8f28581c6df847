"""One ledger for every contender of bench/peers.py: each response the twin sent, priced with segue's catalog.

No contender's own usage report is trusted: the bench reads the usage the twin put on the wire (the `Exchange`
log of `segue_twin.Twin`) with segue's own wire parsers (`wire_usage`) and prices it with `price_call`, the one
pricing function all contenders share. Cache writes are priced per TTL (Anthropic's `cache_creation` split,
OpenAI's `cache_write_tokens_details`), reads at the catalog's read price, and a price the catalog does not know
leaves the call's cost as None (never guessed).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from segue.catalog import Catalog, CatalogError
from segue.generated import Usage
from segue.wire.anthropic import request as anthropic_wire
from segue.wire.openai_chat import request as chat_wire
from segue.wire.openai_responses import request as responses_wire

_VENDOR_OF_PATH = {"/v1/messages": "anthropic", "/v1/responses": "openai", "/v1/chat/completions": "openai"}


@attrs.frozen(kw_only=True)
class Call:
    """One response of the twin, priced. `cost` is None for an error or a price the catalog lacks."""

    vendor: str
    model: str
    status: int
    usage: Usage | None
    cost: float | None
    #: (tool name, canonical JSON of its arguments) for every tool call the response asked for
    tool_calls: tuple[tuple[str, str], ...] = ()


#: The usage parser of the segue wire that speaks each path: the vendor's own usage fields, as segue's drivers read
#: them (Anthropic's `input_tokens` leave out the cached parts; OpenAI's include them), with writes split per TTL.
_USAGE_OF_PATH: dict[str, Callable[[Mapping[str, Any]], Usage]] = {
    "/v1/messages": anthropic_wire.parse_usage,
    "/v1/responses": responses_wire.parse_usage,
    "/v1/chat/completions": chat_wire.parse_usage,
}


def wire_usage(path: str, usage: Mapping[str, Any]) -> Usage:
    """The vendor's raw `usage` object (as the twin sent it on `path`) as segue's `Usage` (input = whole prompt),
    with only the lifetimes that wrote tokens in its per-TTL split."""
    parse = _USAGE_OF_PATH.get(path)
    if parse is None:
        raise ValueError(f"no usage shape known for path {path!r}; the twin serves {', '.join(_VENDOR_OF_PATH)}")
    parsed = parse(usage)
    written = {ttl: n for ttl, n in (parsed.cache_write_tokens_by_ttl or {}).items() if n}
    # Anthropic's server-side compaction samples a summary reported apart, in usage.iterations ("A `compaction`
    # entry's tokens are not included in the top-level `usage` fields", the pinned SDK's BetaUsage.iterations).
    iterations = usage.get("iterations") if path == "/v1/messages" else None
    compacted = [
        wire_usage(path, {k: v for k, v in it.items() if k != "type"})
        for it in iterations or ()
        if isinstance(it, Mapping) and it.get("type") == "compaction"
    ]
    return attrs.evolve(parsed, cache_write_tokens_by_ttl=written or None, compaction_iterations=compacted or None)


def _canonical(arguments: Any) -> str:
    """Tool arguments as sorted JSON, whether the wire carried an object (Anthropic) or a JSON string (OpenAI)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return str(arguments)
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def _tool_calls(path: str, response: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    if path == "/v1/messages":
        blocks = response.get("content") or []
        return tuple((b["name"], _canonical(b.get("input"))) for b in blocks if b.get("type") == "tool_use")
    if path == "/v1/responses":
        items = response.get("output") or []
        return tuple((i["name"], _canonical(i.get("arguments"))) for i in items if i.get("type") == "function_call")
    choices = response.get("choices") or [{}]
    calls = (choices[0].get("message") or {}).get("tool_calls") or []
    return tuple((c["function"]["name"], _canonical(c["function"].get("arguments"))) for c in calls)


def price_call(path: str, request: Any, status: int, response: Any, catalog: Catalog) -> Call:
    """Price one twin response from its own usage with the catalog's prices for its (model, vendor).

    The shared pricing function of bench/peers.py: every contender's calls go through it."""
    vendor = _VENDOR_OF_PATH.get(path, "?")
    body = response if isinstance(response, Mapping) else {}
    asked = request if isinstance(request, Mapping) else {}
    model = str(body.get("model") or asked.get("model") or "?")
    raw = body.get("usage")
    if status != 200 or not isinstance(raw, Mapping):
        return Call(vendor=vendor, model=model, status=status, usage=None, cost=None)
    usage = wire_usage(path, raw)
    try:
        cost: float | None = catalog.cost(usage, model, vendor)
    except (CatalogError, LookupError):
        cost = None
    return Call(vendor=vendor, model=model, status=status, usage=usage, cost=cost, tool_calls=_tool_calls(path, body))


def price_exchanges(exchanges: Iterable[Any], catalog: Catalog) -> list[Call]:
    """`price_call` over the twin's `Exchange` records (segue_twin.core.Exchange), in order."""
    return [price_call(ex.path, ex.request, ex.status, ex.response, catalog) for ex in exchanges]
