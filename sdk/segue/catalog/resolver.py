"""`Catalog`: the loaded layers and the table of resolved serving paths; lookups are dict reads.

A model the catalog does not list still resolves: from the default model type and, given a vendor, that
vendor's `model_defaults` (the cascade without its model and model-vendor layers). A listed model asked at a
vendor with no row for it resolves from its own layers and that vendor's defaults. Either way `Resolved.note`
says so. Only an unknown vendor, or a name that is not a string, is an error.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from segue.catalog.cascade import (
    ExplainedKey,
    Resolved,
    Source,
    _cascade,
)
from segue.catalog.errors import (
    _CATALOG_ENV,
    CatalogError,
    CatalogLookupError,
    _close,
    _error,
)
from segue.catalog.files import _collect, _display, _Loader, _Row, dirs_key, packaged_catalog_dir
from segue.generated import LeftOutModel, Model, ModelType, ModelVendor, Usage, Vendor

#: How many resolutions of names the catalog does not list are kept (each is a small dict).
_UNLISTED_CACHE: Final = 4096
#: How close an unlisted name must be to a listed one to be called a likely typo ("gpt-4.1-mni", not "gpt-9").
_TYPO: Final = 0.85
#: Catalogs built in this process, by what they were read from (`dirs_key`: each file's path, size and mtime):
#: every agent, driver and layout policy loads the packaged catalog, and resolving its table is most of a load.
#: A Catalog is never changed after it is built (`Resolved.config` hands out copies), so loads may share one.
_BUILT: dict[tuple[Any, ...], Catalog] = {}
_BUILT_CACHE: Final = 16
Layer = tuple[Any, Source]


def _layer(row: _Row, key: str, label: str) -> Layer:
    return row.raw.get(key), Source(file=row.file, pointer=f"{row.pointer}/{key}", layer=label)


def _name(value: Any, what: str) -> str:
    """A model or vendor id as given by a caller: a non-empty string, or a clear error before any lookup."""
    if not isinstance(value, str) or not value:
        got = f"{type(value).__name__} {value!r:.60}"
        raise CatalogLookupError(
            f"a {what} id must be a non-empty string, got {got}; pass the id as the vendor's API spells it "
            f"(e.g. {'gpt-5.5' if what == 'model' else 'openai'})",
            file=None,
            expected=f"a non-empty string {what} id",
        )
    return value


class Catalog:
    """A loaded, validated catalog with every serving path resolved. Build it with `Catalog.load`."""

    def __init__(self, loader: _Loader) -> None:
        rows = loader.rows
        self.files: tuple[str, ...] = tuple(loader.files)
        self._migrated = dict(loader.migrated)
        self._types: dict[str, ModelType] = {k: r.value for k, r in rows["model_types"].items()}
        self._models: dict[str, Model] = {k: r.value for k, r in rows["models"].items()}
        self._vendors: dict[str, Vendor] = {k: r.value for k, r in rows["vendors"].items()}
        self._rows: dict[tuple[str, str, str], ModelVendor] = {k: r.value for k, r in rows["model_vendors"].items()}
        self._left_out: dict[tuple[str, str], LeftOutModel] = {k: r.value for k, r in rows["left_out"].items()}
        #: (file, row pointer) -> the row's notes (sources and dates), for a value's provenance.
        self._row_notes: dict[tuple[str, str], str] = {
            (r.file, r.pointer): r.raw["notes"]
            for table in rows.values()
            for r in table.values()
            if isinstance(r.raw.get("notes"), str)
        }
        self._aliases: dict[str, str] = {a: mid for mid, r in rows["models"].items() for a in r.raw.get("aliases", [])}
        self._table: dict[tuple[str, str | None], Resolved] = {}
        self._unlisted: dict[tuple[str, str | None], Resolved] = {}
        self._api_names: dict[str, list[tuple[str, str]]] = {}
        self._vendor_layer = {
            vid: _layer(r, "model_defaults", f"vendor {vid} model_defaults") for vid, r in rows["vendors"].items()
        }
        #: vendor -> its model patterns in file order: (compiled match, name, configuration layer).
        self._patterns: dict[str, list[tuple[re.Pattern[str], str, Layer]]] = {}
        for vid, r in rows["vendors"].items():
            for i, pat in enumerate(r.raw.get("model_patterns", [])):
                pointer = f"{r.pointer}/model_patterns/{i}"
                label = f"vendor {vid} pattern {pat['name']!r}"
                layer = (pat.get("configuration"), Source(file=r.file, pointer=f"{pointer}/configuration", layer=label))
                self._patterns.setdefault(vid, []).append((re.compile(pat["match"]), pat["name"], layer))
                if isinstance(pat.get("notes"), str):
                    self._row_notes[(r.file, pointer)] = pat["notes"]
        default = next((r for r in rows["model_types"].values() if r.raw.get("default_for_unknown_models")), None)
        self._default_type: list[Layer] = (
            [] if default is None else [_layer(default, "configuration", f"model type {default.key} (default)")]
        )
        self._base: dict[str, list[Layer]] = {}
        for mid, mrow in rows["models"].items():
            trow = rows["model_types"][mrow.raw["model_type"]]
            self._base[mid] = [
                _layer(trow, "configuration", f"model type {trow.key}"),
                _layer(mrow, "configuration", f"model {mid}"),
            ]
            self._table[(mid, None)] = self._resolved(mid, None, None, self._base[mid])
        for (mid, vid, role), row in rows["model_vendors"].items():
            if role != "inference_provider":  # developer rows describe authorship, never configuration
                continue
            layers = [
                *self._base[mid],
                self._vendor_layer[vid],
                _layer(row, "configuration", f"model-vendor {mid}@{vid}"),
            ]
            self._table[(mid, vid)] = self._resolved(mid, vid, row.value, layers)
            self._api_names.setdefault(row.value.api_name or mid, []).append((mid, vid))

    def _resolved(
        self, mid: str, vid: str | None, row: ModelVendor | None, layers: list[Layer], note: str | None = None
    ) -> Resolved:
        config, prov = _cascade(layers)
        if row is not None:
            api_name: str | None = row.api_name or mid
        else:  # a path without a row sends the model name as given; a vendor-less entry has no api name
            api_name = mid if vid is not None else None
        return Resolved(
            model=mid,
            vendor=vid,
            api_name=api_name,
            wire=self._vendors[vid].wire if vid else None,
            priority=row.priority if row else None,
            layers=tuple(src.layer for _, src in layers),
            config=config,
            provenance=prov,
            note=note,
        )

    @classmethod
    def load(cls, extra_dirs: Sequence[str | Path] = (), *, env: bool = True) -> Catalog:
        """Packaged catalog < each `SEGUE_CATALOG_PATH` dir (when env) < `extra_dirs`. Raises CatalogError.
        Loading the same, unchanged files again gives the same Catalog object."""
        dirs = [packaged_catalog_dir()]
        if env:
            dirs += [Path(p) for p in os.environ.get(_CATALOG_ENV, "").split(os.pathsep) if p.strip()]
        dirs += [Path(d) for d in extra_dirs]
        key = dirs_key(dirs)
        built = _BUILT.get(key) if key is not None else None
        if built is not None:
            return built
        catalog, errors = _build(_collect(dirs))
        if errors or catalog is None:
            first, *more = errors
            first.more = more
            if more:
                first.args = (f"{first} (and {len(more)} more problem(s); `segue catalog check DIR` lists all)",)
            raise first
        if key is not None:
            if len(_BUILT) >= _BUILT_CACHE:
                _BUILT.clear()
            _BUILT[key] = catalog
        return catalog

    # lookups -------------------------------------------------------------------------------------------------

    def find_model(self, name: str, vendor: str | None = None) -> str | None:
        """The catalog model id for a model id, an alias or a row's api_name (restricted to `vendor` when
        given); None when the catalog does not list the name. An api_name shared by several models is an error."""
        _name(name, "model")
        if name in self._models:
            return name
        if name in self._aliases:
            return self._aliases[name]
        hits = {m for m, v in self._api_names.get(name, []) if vendor is None or v == vendor}
        if len(hits) > 1:
            raise CatalogLookupError(
                f"api name {name!r} names several models ({', '.join(sorted(hits))}); pass vendor= to choose",
                file=None,
                expected="an unambiguous model id or api_name",
            )
        return hits.pop() if hits else None

    def model_for(self, name: str, vendor: str | None = None) -> str:
        """Like `find_model`, but a name the catalog does not list is a CatalogLookupError with close names."""
        found = self.find_model(name, vendor)
        if found is None:
            hint = self._close_models(name) or f"known models: {', '.join(sorted(self._models))}"
            raise CatalogLookupError(
                f"unknown model {name!r}" + (f" for vendor {vendor!r}" if vendor else "") + f"; {hint} (add it "
                f"to a catalog directory via extra_dirs or {_CATALOG_ENV} if it is new)",
                file=None,
                expected="a catalog model id, alias or api_name",
            )
        return found

    def _close_models(self, name: str, cutoff: float = 0.5) -> str:
        return _close(name, [*self._models, *self._aliases, *self._api_names], cutoff)

    def resolve(self, model: str, vendor: str | None = None) -> Resolved:
        """The resolved configuration of a serving path; vendor None = model type and model layers only.

        A model the catalog does not list resolves from the default model type and the vendor's defaults (see
        `Resolved.note`). Raises CatalogLookupError for an unknown vendor or a name that is not a string."""
        _name(model, "model")
        if vendor is not None:
            self.vendor(_name(vendor, "vendor"))
        mid = self.find_model(model, vendor)
        found = self._table.get((mid, vendor)) if mid is not None else None
        if found is not None:
            return found
        key = (model if mid is None else mid, vendor)
        found = self._unlisted.get(key)
        if found is None:
            if len(self._unlisted) >= _UNLISTED_CACHE:
                self._unlisted.clear()
            found = self._unlisted[key] = self._resolve_unlisted(model, mid, vendor)
        return found

    def _resolve_unlisted(self, name: str, mid: str | None, vendor: str | None) -> Resolved:
        vendor_layers = [] if vendor is None else [self._vendor_layer[vendor]]
        if mid is not None:  # a listed model at a vendor with no inference_provider row for it
            served = ", ".join(r.vendor for r in self.inference_vendors(mid, include_inactive=True)) or "none"
            note = (
                f"no model-vendor row serves {mid} at {vendor}: from the model's and the vendor's defaults "
                f"(its inference providers: {served})"
            )
            return self._resolved(mid, vendor, None, [*self._base[mid], *vendor_layers], note)
        source = "the vendor's defaults" if vendor else "the default model type"
        note = f"not in the catalog: from {source}"
        reasons = [m.reason for (i, v), m in sorted(self._left_out.items()) if i == name and vendor in (v, None)]
        pattern = None if reasons or vendor is None else self._pattern_for(name, vendor)
        if reasons:
            note += f"; left out on purpose: {reasons[0]}"
        elif pattern is not None:
            vendor_layers.append(pattern[1])
            note += (
                f" and its pattern {pattern[0]!r}: the id follows that family's naming, so it gets that family's "
                "cache rules (no prices: the catalog does not know this model's)"
            )
        elif close := self._close_models(name, _TYPO):
            note += f"; {close}"
        return self._resolved(name, vendor, None, [*self._default_type, *vendor_layers], note)

    def _pattern_for(self, name: str, vendor: str) -> tuple[str, Layer] | None:
        """The first of the vendor's `model_patterns` whose `match` the whole unlisted id matches."""
        return next(((n, layer) for rx, n, layer in self._patterns.get(vendor, []) if rx.fullmatch(name)), None)

    def left_out(self, model: str, vendor: str) -> LeftOutModel | None:
        """The catalog's entry saying why `model` at `vendor` deliberately has no row, if any."""
        return self._left_out.get((model, vendor))

    def inference_vendors(self, model: str, *, include_inactive: bool = False) -> list[ModelVendor]:
        """The model's inference-provider rows, preferred first (priority descending, then vendor id)."""
        mid = self.model_for(model)
        rows = [
            r
            for (m, _, role), r in self._rows.items()
            if m == mid and role == "inference_provider" and (include_inactive or r.status != "inactive")
        ]
        return sorted(rows, key=lambda r: (-r.priority, r.vendor))

    def vendor(self, vendor_id: str) -> Vendor:
        try:
            return self._vendors[_name(vendor_id, "vendor")]
        except KeyError:
            hint = _close(vendor_id, self._vendors) or f"known vendors: {', '.join(sorted(self._vendors))}"
            raise CatalogLookupError(
                f"unknown vendor {vendor_id!r}; {hint} (a vendor is a catalog row: add it to a catalog directory "
                f"via extra_dirs or {_CATALOG_ENV} to use it)",
                file=None,
                expected="a catalog vendor id",
            ) from None

    def model(self, model: str) -> Model:
        return self._models[self.model_for(model)]

    def model_type(self, type_id: str) -> ModelType:
        return self._types[type_id]

    @property
    def model_ids(self) -> list[str]:
        return sorted(self._models)

    @property
    def vendor_ids(self) -> list[str]:
        return sorted(self._vendors)

    def serving_paths(self) -> list[tuple[str, str | None]]:
        """Every (model, vendor) pair the catalog lists, with (model, None) for each model."""
        return sorted(self._table, key=lambda k: (k[0], k[1] or ""))

    def cost(self, usage: Usage, model: str, vendor: str | None = None) -> float:
        """Dollars for `usage` on a serving path, from the catalog pricing (CatalogLookupError when unknown)."""
        return self.resolve(model, vendor).cost(usage)

    def row_notes(self, source: Source) -> str | None:
        """The notes (sources, the date the numbers were read) of the catalog row a value came from."""
        rows = [
            (p, n) for (f, p), n in self._row_notes.items() if f == source.file and source.pointer.startswith(p + "/")
        ]
        return max(rows, key=lambda row: len(row[0]))[1] if rows else None  # the innermost: a pattern in its vendor

    def explain(self, model: str, vendor: str | None = None) -> list[ExplainedKey]:
        return self.resolve(model, vendor).explain()

    def explain_text(self, model: str, vendor: str | None = None) -> str:
        """A readable table of every resolved key with the layer, file and JSON pointer it came from."""
        r = self.resolve(model, vendor)
        row = "" if r.priority is None else f", priority {r.priority}"
        head = r.label + (f"  (api_name {r.api_name}, wire {r.wire}{row})" if r.vendor else "")
        lines = [head]
        if r.note:
            lines.append(r.note)
        if model in self._aliases:
            lines.append(f"{model} is an alias of {r.model}")
        if r.vendor and r.self_hosted:
            lines.append("pricing: self-hosted (pricing.self_hosted), so every call on this path costs 0 USD")
        elif r.vendor and r.pricing is None:
            lines.append("pricing: no input/output price known for this path, so no cost is computed for it")
        rows = [(".".join(k.path), json.dumps(k.value), k.layer, f"{k.file}#{k.pointer}") for k in r.explain()]
        table = [("key", "value", "layer", "source"), *rows]
        widths = [max(len(row[i]) for row in table) for i in range(3)]
        lines += ["cascade: " + " < ".join(r.layers), ""]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3] for row in table]
        if not rows:
            lines.append("(no configuration: every layer is empty)")
        return "\n".join(lines)

    # checks across files -------------------------------------------------------------------------------------

    def _price_problems(self) -> list[CatalogError]:
        """A cache-write price for a TTL the serving path does not offer (checked per resolved path, so a model
        row's price is judged against each vendor that serves it). One error per offending price."""
        paths = [r for (_, vid), r in sorted(self._table.items(), key=str) if vid is not None]
        paths += [self.resolve("(a model not in the catalog)", vid) for vid in sorted(self._vendors)]
        errors: dict[str, CatalogError] = {}
        for r in paths:
            writes = r.get("pricing", "cache_write")
            offered = r.cache_ttls
            for ttl, price in writes.items() if isinstance(writes, dict) else ():
                src = r.source("pricing", "cache_write", ttl)
                if price is None or ttl in offered or src is None or str(src) in errors:
                    continue
                ttl_src = r.source("llm", "cache_ttls")
                hint = (
                    f"{r.label} offers {', '.join(repr(t) for t in offered) or 'no TTL'}"
                    + (f" (llm.cache_ttls from {ttl_src})" if ttl_src else " (no llm.cache_ttls in any layer)")
                    + "; price only the lifetimes the path offers, or add the TTL to its llm.cache_ttls"
                )
                if src.file in self._migrated:
                    hint += (
                        f"; {src.file} is a version-{self._migrated[src.file]} file, whose cache_write_5m / "
                        "cache_write_1h became cache_write['5m'] / ['1h']"
                    )
                errors[str(src)] = _error(src.file, src.pointer, "a cache_write TTL the serving path offers", ttl, hint)
        return list(errors.values())


def _build(loader: _Loader) -> tuple[Catalog | None, list[CatalogError]]:
    """The catalog and every problem found; nothing is built when the files themselves are wrong."""
    if loader.errors:
        return None, loader.errors
    catalog = Catalog(loader)
    return catalog, catalog._price_problems()


def check_dir(path: str | Path) -> list[CatalogError]:
    """Every problem of an app's catalog directory layered over the packaged catalog (empty list = valid)."""
    directory = Path(path)
    _, errors = _build(_collect([packaged_catalog_dir(), directory]))
    if directory.is_dir() and not any(directory.glob("*.json")):
        errors.append(_error(_display(directory), "", "at least one *.json catalog file"))
    return errors
