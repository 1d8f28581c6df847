"""What a run cost: each provider call priced on the path that served it, with where the prices came from.

A self-hosted path (catalog pricing.self_hosted) costs 0 USD, and its PriceSource says self_hosted. A call whose
price the catalog does not know leaves the whole run without a dollar figure (`RunCost.missing` says which
price): a partial sum would read as the run's cost and be wrong. The calls segue's twin answered are priced apart
(`RunCost.twin_usd`, what the vendor would have charged): the twin charges nothing, and an emulated figure must
never be added to what a vendor billed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePath

from segue.catalog.errors import CatalogError
from segue.catalog.resolver import Catalog
from segue.generated import PriceSource, RunCost, Usage


def price_source(catalog: Catalog, model: str, vendor: str | None) -> PriceSource:
    """The catalog entry that prices a serving path (its file, JSON pointer, layer and that row's notes)."""
    try:
        resolved = catalog.resolve(model, vendor)
    except CatalogError:
        return PriceSource(model=model, vendor=vendor)
    self_hosted = resolved.self_hosted
    src = resolved.source("pricing", "self_hosted" if self_hosted else "input")
    if src is None:
        return PriceSource(model=resolved.model, vendor=resolved.vendor)
    return PriceSource(
        model=resolved.model,
        vendor=resolved.vendor,
        file=PurePath(src.file).name,  # a path of this machine never leaves it with the run
        pointer=src.pointer.rsplit("/", 1)[0],
        layer=src.layer,
        note=catalog.row_notes(src),
        self_hosted=True if self_hosted else None,
    )


def price_ref(source: PriceSource) -> str:
    """The short reference outputs show for a price's source: the catalog file's name and the row
    (`models.json row 15`); "no catalog entry" when the catalog had none. A run recorded before sources were
    short kept an absolute path: only its name is shown."""
    if not source.file:
        return "no catalog entry"
    row = re.match(r"/[^/]+/(\d+)", source.pointer or "")
    return f"{PurePath(source.file).name}{f' row {row.group(1)}' if row else ''}"


def add_call(
    cost: RunCost | None, catalog: Catalog, model: str, vendor: str | None, usage: Usage, *, twin: bool = False
) -> RunCost:
    """`cost` (None: nothing yet) with one more provider call priced on the path that served it. Once a price is
    unknown, usd stays absent for the run and `missing` names the first price that was. A call segue's twin
    served (`twin`) costs nothing: its price at the vendor's rates goes to twin_usd, never to usd."""
    cost = cost or RunCost(usd=0.0, prices=[])
    source = price_source(catalog, model, vendor)
    prices = cost.prices if source in cost.prices else [*cost.prices, source]
    if cost.usd is None:
        return RunCost(missing=cost.missing, prices=prices)
    try:
        price = catalog.cost(usage, model, vendor)
    except (CatalogError, ValueError) as e:
        return RunCost(missing=str(e), prices=prices)
    if twin:
        return RunCost(usd=cost.usd, twin_usd=(cost.twin_usd or 0.0) + price, prices=prices)
    return RunCost(usd=cost.usd + price, twin_usd=cost.twin_usd, prices=prices)


def run_cost(catalog: Catalog, calls: Iterable[tuple[str, str | None, Usage]]) -> RunCost:
    """The cost of (model, vendor, usage) calls a vendor served, e.g. a stored run's llm_interactions."""
    cost = RunCost(usd=0.0, prices=[])
    for model, vendor, usage in calls:
        cost = add_call(cost, catalog, model, vendor, usage)
    return cost
