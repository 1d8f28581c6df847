"""Provenance, the configuration merge, and resolved serving paths (`Resolved`)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Generic

import attrs

from segue._support.hooks import UNSET
from segue.catalog.errors import (
    _T,
    CatalogLookupError,
    KeyPath,
    _ptr,
)
from segue.catalog.pricing import Prices, prices_from
from segue.generated import Usage

# --- provenance and merge ------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Source:
    """Where a resolved value came from: a file, the JSON pointer of the value, and the cascade layer."""

    file: str
    pointer: str
    layer: str

    def at(self, key: str) -> Source:
        return attrs.evolve(self, pointer=self.pointer + _ptr(key))

    def __str__(self) -> str:
        return f"{self.file}#{self.pointer}"


def _merge_into(
    target: dict[str, Any], layer: Mapping[str, Any], src: Source, prefix: KeyPath, prov: dict[KeyPath, Source]
) -> None:
    for key, value in layer.items():
        if value is UNSET:  # absent: inherit
            continue
        path = (*prefix, key)
        if isinstance(value, Mapping):
            existing = target.get(key)
            if not isinstance(existing, dict):
                _forget(prov, path)
                existing = target[key] = {}
            _merge_into(existing, value, src.at(key), path, prov)
        else:
            _forget(prov, path)
            target[key] = copy.deepcopy(value)  # arrays must not alias the layer
            prov[path] = src.at(key)


def _forget(prov: dict[KeyPath, Source], path: KeyPath) -> None:
    for p in [p for p in prov if p[: len(path)] == path]:
        del prov[p]


def _cascade(layers: Sequence[tuple[Any, Source]]) -> tuple[dict[str, Any], dict[KeyPath, Source]]:
    merged: dict[str, Any] = {}
    prov: dict[KeyPath, Source] = {}
    for bag, src in layers:
        if isinstance(bag, Mapping):  # non-object and null layers contribute nothing
            _merge_into(merged, bag, src, (), prov)
    return merged, prov


def merge_configs(*layers: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Merge configuration bags, later wins: objects per key, arrays/scalars/null replace, absent inherits.

    Returns None when no layer contributes. Inputs are never mutated, and the result shares no containers
    with them."""
    anon = Source(file="<memory>", pointer="", layer="")
    merged, _ = _cascade([(layer, anon) for layer in layers])
    return merged if any(isinstance(layer, Mapping) for layer in layers) else None


# --- resolved serving paths --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ExplainedKey:
    """One resolved leaf: its key path, value, and the file + JSON pointer + layer that supplied it."""

    path: KeyPath
    value: Any
    file: str
    pointer: str
    layer: str


def _read_only(prov: Mapping[KeyPath, Source]) -> Mapping[KeyPath, Source]:
    return MappingProxyType(dict(prov))


class _LlmKey(Generic[_T]):
    """A typed read of the `llm` key of the same name: None when absent, null or of another type."""

    def __init__(self, kind: type[_T]) -> None:
        self.kind = kind

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    def __get__(self, obj: Any, owner: type | None = None) -> _T | None:
        if obj is None:  # looked up on the class (help(), introspection)
            return None
        v = obj.get("llm", self.key)
        ok = isinstance(v, self.kind) and (self.kind is bool or not isinstance(v, bool))
        return v if ok else None


@attrs.frozen(kw_only=True)
class Resolved:
    """The cascade resolved for one serving path (vendor None = model type and model layers only).

    `note` is None for a path the catalog lists; otherwise it says which layers answered (a model the catalog
    does not know, or a vendor with no row for the model) and, for a likely typo, the close names.
    `config` returns a fresh copy, so callers can never change the catalog; `get` reads without copying."""

    model: str
    vendor: str | None
    api_name: str | None
    wire: str | None
    priority: int | None
    layers: tuple[str, ...]
    _config: dict[str, Any] = attrs.field(alias="config", repr=False)
    provenance: Mapping[KeyPath, Source] = attrs.field(converter=_read_only, repr=False)
    note: str | None = None

    @property
    def config(self) -> dict[str, Any]:
        return copy.deepcopy(self._config)

    def get(self, *path: str, default: Any = None) -> Any:
        node: Any = self._config
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return default
            node = node[key]
        return copy.deepcopy(node) if isinstance(node, dict | list) else node

    def source(self, *path: str) -> Source | None:
        return self.provenance.get(path)

    @property
    def label(self) -> str:
        return f"{self.model}@{self.vendor}" if self.vendor else self.model

    @property
    def prefix_prompt_cache(self) -> bool:
        """Only a literal true counts: null, absent, "yes" or 1 all read as False."""
        return self.get("llm", "prefix_prompt_cache") is True

    @property
    def cache_prewarm(self) -> bool:
        """Whether the vendor documents warming this path's cache without generating (only a literal true)."""
        return self.get("llm", "cache_prewarm") is True

    @property
    def cache_diagnostics(self) -> bool:
        """Whether the vendor documents cache diagnostics on this path (only a literal true)."""
        return self.get("llm", "cache_diagnostics") is True

    @property
    def vendor_compaction(self) -> bool:
        """Whether the vendor documents its own server-side compaction on this path (only a literal true)."""
        return self.get("llm", "vendor_compaction") is True

    @property
    def context_editing(self) -> bool:
        """Whether the vendor documents context editing on this path (only a literal true)."""
        return self.get("llm", "context_editing") is True

    cache_kind = _LlmKey(str)
    cache_min_tokens = _LlmKey(int)
    cache_increment_tokens = _LlmKey(int)
    cache_max_breakpoints = _LlmKey(int)
    cache_match_breakpoints = _LlmKey(int)
    cache_lookback_blocks = _LlmKey(int)
    context_window = _LlmKey(int)
    supports_native_tools = _LlmKey(bool)
    supports_reasoning = _LlmKey(bool)

    @property
    def cache_ttls(self) -> list[str]:
        """The TTL names the path offers, default first ([] when the catalog names none)."""
        ttls = self.get("llm", "cache_ttls")
        return [t for t in ttls if isinstance(t, str)] if isinstance(ttls, list) else []

    default_max_tokens = _LlmKey(int)

    @property
    def self_hosted(self) -> bool:
        """The path is one the app runs itself (pricing.self_hosted, only a literal true): no per-token price, so
        its calls cost 0 USD."""
        return self.get("pricing", "self_hosted") is True

    @property
    def pricing(self) -> Prices | None:
        """The path's prices, or None when its input or output price is unknown."""
        return prices_from(self.get("pricing"), self.get("llm", "cache_ttls"))

    def cost(self, usage: Usage) -> float:
        """Dollars for `usage` on this path. Raises CatalogLookupError naming the price the catalog lacks (no
        cost is better than a wrong one) and ValueError when the usage counts contradict each other."""
        if self.self_hosted:
            return 0.0
        prices = self.pricing
        why = "" if self.note is None else f" ({self.note})"
        if prices is None:
            raise CatalogLookupError(
                f"no cost for {self.label}{why}: the catalog has no input/output price for this serving path; add "
                "`pricing` to its model or model-vendor row in a catalog layer",
                file=None,
                expected="pricing.input and pricing.output",
            )
        try:
            return prices.cost(usage)
        except KeyError as e:
            missing = e.args[0]
            raise CatalogLookupError(
                f"no cost for {self.label}{why}: the usage needs {missing}, which the catalog does not know for this "
                "serving path; add it to its model or model-vendor row in a catalog layer",
                file=None,
                expected=missing,
            ) from None

    def explain(self) -> list[ExplainedKey]:
        return [
            ExplainedKey(path=p, value=self.get(*p), file=s.file, pointer=s.pointer, layer=s.layer)
            for p, s in sorted(self.provenance.items())
        ]
