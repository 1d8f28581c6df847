"""A small MCP server written with the official MCP SDK (`pip install 'segue[mcp]'`): an order desk, for the
docs and examples to run offline from anywhere. It is not part of segue's client: segue never imports it.

`python -m segue.demo.order_desk` serves stdio (docs/mcp.md and examples/40_mcp_tools.py start it that way);
`python -m segue.demo.order_desk --http 8765` serves Streamable HTTP at http://127.0.0.1:8765/mcp.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

ORDERS: dict[int, dict[str, Any]] = {
    1042: {"status": "shipped", "carrier": "DHL", "items": 3},
    1043: {"status": "packing", "carrier": None, "items": 1},
    1044: {"status": "delivered", "carrier": "UPS", "items": 2},
}

server = MCPServer("order-desk", instructions="Look up orders and their shipping status.", log_level="WARNING")


@server.tool()
def lookup_order(order_number: int) -> dict[str, object]:
    """Look up an order's shipping status by its order number.

    Args:
        order_number: the number printed on the receipt
    """
    order = ORDERS.get(order_number)
    if order is None:
        raise ToolError(f"there is no order {order_number}")  # an isError result the model sees
    return {"order_number": order_number, **order}


@server.tool()
def list_orders(status: Literal["shipped", "packing", "delivered"] | None = None) -> list[int]:
    """List order numbers, optionally only those with one status.

    Args:
        status: only orders with this status
    """
    return [n for n, o in ORDERS.items() if status is None or o["status"] == status]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", port=int(sys.argv[2]))
    else:
        server.run()
