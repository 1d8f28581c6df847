"""Which structured-output mechanism a serving path uses: the catalog's answer, looked up once per model.

`llm.structured_output: "json_schema"` on the resolved path means the wire's native JSON-schema output (the wire
module spells it: Anthropic `output_config.format`, Responses `text.format`, Chat Completions `response_format`);
anything else (absent, null, `tool`) means the final-answer tool, which every wire with tools takes. No model
name is written here: an app changes the answer with a catalog layer.
"""

from __future__ import annotations

import logging

import attrs

from segue.catalog import Catalog, CatalogError
from segue.contracts import OutputFormat, ProviderRequest

log = logging.getLogger("segue.providers")


class OutputPaths:
    """Per driver: `split(request, model)` is the request as the wire builds it (with the final-answer tool added
    where the path has no native mechanism) and the format to send natively (None: none)."""

    def __init__(self, vendor: str, catalog: Catalog | None) -> None:
        self.vendor = vendor
        self._catalog = catalog
        self._known: dict[str, bool] = {}

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog.load()
        return self._catalog

    def native(self, model: str) -> bool:
        if model not in self._known:
            try:
                resolved = self.catalog.resolve(model, self.vendor)
            except CatalogError as e:
                log.warning("no catalog entry for %s@%s (%s); structured output goes as a tool", model, self.vendor, e)
                self._known[model] = False
            else:
                self._known[model] = resolved.get("llm", "structured_output") == "json_schema"
        return self._known[model]

    def split(self, request: ProviderRequest, model: str) -> tuple[ProviderRequest, OutputFormat | None]:
        output = request.output
        if output is None:
            return request, None
        if self.native(model):
            return request, output
        return attrs.evolve(request, tools=[*request.tools, output.as_tool()]), None
