"""`Catalog`: the loaded layers and the table of resolved serving paths; lookups are dict reads."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from segue.catalog.cascade import (
    ExplainedKey,
    Resolved,
    Source,
    _cascade,
)
from segue.catalog.errors import (
    _CATALOG_ENV,
    CatalogLookupError,
    _close,
)
from segue.catalog.files import _collect, _Loader, _Row, packaged_catalog_dir
from segue.generated import Model, ModelType, ModelVendor, Usage, Vendor

# --- the catalog -------------------------------------------------------------------------------------------------


class Catalog:
    """A loaded, validated catalog with every serving path resolved. Build it with `Catalog.load`."""

    def __init__(self, loader: _Loader) -> None:
        rows = loader.rows
        self.files: tuple[str, ...] = tuple(loader.files)
        self._types: dict[str, ModelType] = {k: r.value for k, r in rows["model_types"].items()}
        self._models: dict[str, Model] = {k: r.value for k, r in rows["models"].items()}
        self._vendors: dict[str, Vendor] = {k: r.value for k, r in rows["vendors"].items()}
        self._rows: dict[tuple[str, str, str], ModelVendor] = {k: r.value for k, r in rows["model_vendors"].items()}
        self._table: dict[tuple[str, str | None], Resolved] = {}
        self._api_names: dict[str, list[tuple[str, str]]] = {}

        def layer(row: _Row, key: str, label: str) -> tuple[Any, Source]:
            return row.raw.get(key), Source(file=row.file, pointer=f"{row.pointer}/{key}", layer=label)

        base: dict[str, list[tuple[Any, Source]]] = {}
        for mid, mrow in rows["models"].items():
            trow = rows["model_types"][mrow.raw["model_type"]]
            base[mid] = [
                layer(trow, "configuration", f"model type {trow.key}"),
                layer(mrow, "configuration", f"model {mid}"),
            ]
            self._table[(mid, None)] = self._resolved(mid, None, None, base[mid])
        for (mid, vid, role), row in rows["model_vendors"].items():
            if role != "inference_provider":  # developer rows describe authorship, never configuration
                continue
            vrow = rows["vendors"][vid]
            layers = [
                *base[mid],
                layer(vrow, "model_defaults", f"vendor {vid} model_defaults"),
                layer(row, "configuration", f"model-vendor {mid}@{vid}"),
            ]
            self._table[(mid, vid)] = self._resolved(mid, vid, row.value, layers)
            self._api_names.setdefault(row.value.api_name or mid, []).append((mid, vid))

    def _resolved(
        self, mid: str, vid: str | None, row: ModelVendor | None, layers: list[tuple[Any, Source]]
    ) -> Resolved:
        config, prov = _cascade(layers)
        return Resolved(
            model=mid,
            vendor=vid,
            api_name=row.api_name or mid if row else None,
            wire=self._vendors[vid].wire if vid else None,
            priority=row.priority if row else None,
            layers=tuple(src.layer for _, src in layers),
            config=config,
            provenance=prov,
        )

    @classmethod
    def load(cls, extra_dirs: Sequence[str | Path] = (), *, env: bool = True) -> Catalog:
        """Packaged catalog < each `SEGUE_CATALOG_PATH` dir (when env) < `extra_dirs`. Raises CatalogError."""
        dirs = [packaged_catalog_dir()]
        if env:
            dirs += [Path(p) for p in os.environ.get(_CATALOG_ENV, "").split(os.pathsep) if p.strip()]
        dirs += [Path(d) for d in extra_dirs]
        loader = _collect(dirs)
        if loader.errors:
            first, *more = loader.errors
            first.more = more
            if more:
                first.args = (f"{first} (and {len(more)} more problem(s); `segue catalog check DIR` lists all)",)
            raise first
        return cls(loader)

    # lookups -------------------------------------------------------------------------------------------------

    def model_for(self, name: str, vendor: str | None = None) -> str:
        """The catalog model id for a model id or a row's api_name (restricted to `vendor` when given)."""
        if name in self._models:
            return name
        hits = {m for m, v in self._api_names.get(name, []) if vendor is None or v == vendor}
        if len(hits) == 1:
            return hits.pop()
        if hits:
            raise CatalogLookupError(
                f"api name {name!r} names several models ({', '.join(sorted(hits))}); pass vendor= to choose",
                file=None,
                expected="an unambiguous model id or api_name",
            )
        names = list(self._models) + list(self._api_names)
        hint = _close(name, names) or f"known models: {', '.join(sorted(self._models))}"
        raise CatalogLookupError(
            f"unknown model {name!r}" + (f" for vendor {vendor!r}" if vendor else "") + f"; {hint} (add it "
            f"to a catalog directory via extra_dirs or {_CATALOG_ENV} if it is new)",
            file=None,
            expected="a catalog model id or api_name",
        )

    def resolve(self, model: str, vendor: str | None = None) -> Resolved:
        """The resolved configuration of a serving path; vendor None = model type and model layers only."""
        mid = self.model_for(model, vendor)
        if vendor is not None and vendor not in self._vendors:
            hint = _close(vendor, self._vendors) or f"known vendors: {', '.join(sorted(self._vendors))}"
            raise CatalogLookupError(f"unknown vendor {vendor!r}; {hint}", file=None, expected="a catalog vendor id")
        found = self._table.get((mid, vendor))
        if found is None:
            served = ", ".join(r.vendor for r in self.inference_vendors(mid, include_inactive=True)) or "none"
            raise CatalogLookupError(
                f"vendor {vendor!r} has no inference_provider row for model {mid!r} (its inference providers: "
                f"{served}); add a model_vendors row to serve it there",
                file=None,
                expected="a (model, vendor) serving path",
            )
        return found

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
            return self._vendors[vendor_id]
        except KeyError:
            hint = _close(vendor_id, self._vendors) or f"known vendors: {', '.join(sorted(self._vendors))}"
            raise CatalogLookupError(
                f"unknown vendor {vendor_id!r}; {hint}", file=None, expected="a vendor id"
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
        """Every resolvable (model, vendor) pair, with (model, None) for each model."""
        return sorted(self._table, key=lambda k: (k[0], k[1] or ""))

    def cost(self, usage: Usage, model: str, vendor: str | None = None) -> float:
        """Dollars for `usage` on a serving path, from the catalog pricing."""
        return self.resolve(model, vendor).cost(usage)

    def explain(self, model: str, vendor: str | None = None) -> list[ExplainedKey]:
        return self.resolve(model, vendor).explain()

    def explain_text(self, model: str, vendor: str | None = None) -> str:
        """A readable table of every resolved key with the layer, file and JSON pointer it came from."""
        r = self.resolve(model, vendor)
        head = r.label + (f"  (api_name {r.api_name}, wire {r.wire}, priority {r.priority})" if r.vendor else "")
        rows = [(".".join(k.path), json.dumps(k.value), k.layer, f"{k.file}#{k.pointer}") for k in r.explain()]
        table = [("key", "value", "layer", "source"), *rows]
        widths = [max(len(row[i]) for row in table) for i in range(3)]
        lines = [head, "cascade: " + " < ".join(r.layers), ""]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3] for row in table]
        if not rows:
            lines.append("(no configuration: every layer is empty)")
        return "\n".join(lines)
