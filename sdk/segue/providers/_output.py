"""Which structured-output mechanism a serving path uses: the catalog's answer, looked up once per model.

`llm.structured_output: "native"` on the resolved path means the wire's native JSON-schema output (the wire
module spells it: Anthropic `output_config.format`, Responses `text.format`, Chat Completions `response_format`);
anything else (absent, null, `tool`) means the final-answer tool, which every wire with tools takes. No model
name is written here: an app changes the answer with a catalog layer.
"""

from __future__ import annotations

import attrs

from segue._core.contracts import OutputFormat, ProviderRequest
from segue.providers._cache import CatalogRows


class OutputPaths:
    """Per driver: `split(request, model)` is the request as the wire builds it (with the final-answer tool added
    where the path has no native mechanism) and the format to send natively (None: none)."""

    def __init__(self, rows: CatalogRows) -> None:
        self.rows = rows

    def native(self, model: str) -> bool:
        resolved = self.rows.resolve(model)
        return resolved is not None and resolved.get("llm", "structured_output") == "native"

    def split(self, request: ProviderRequest, model: str) -> tuple[ProviderRequest, OutputFormat | None]:
        output = request.output
        if output is None:
            return request, None
        if self.native(model):
            return request, output
        return attrs.evolve(request, tools=[*request.tools, output.as_tool()]), None
