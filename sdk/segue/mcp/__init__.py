"""Tools from MCP servers, through the official `mcp` SDK (client side): `pip install 'segue[mcp]'`.

    from segue.mcp import MCPTools
    files = MCPTools.stdio("python", ["files_server.py"], name="files")
    agent = Agent(provider, "…", tools=[my_tool, files], store=store)

See docs/mcp.md: the tool definitions are canonical (the same server gives byte-identical tool blocks whatever
order it lists them in), the list is read once per run, and every failure of a call is an error result.
"""

from __future__ import annotations

try:
    import mcp  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("segue.mcp needs the MCP SDK: pip install 'segue[mcp]'") from e

from segue.mcp.definitions import MCPToolsError, canonical_schema
from segue.mcp.source import MCPTools

__all__ = ["MCPTools", "MCPToolsError", "canonical_schema"]
