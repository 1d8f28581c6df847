"""An MCP server written with the official SDK (mcp.server.mcpserver.MCPServer), for segue's MCP tests.

Run as `python fixture_server.py [options]`; it serves stdio, or Streamable HTTP on a loopback port it writes to
--port-file. Every start registers its tools in a shuffled order, and --scramble also shuffles the keys of every
input schema in each tools/list answer, as a server that re-renders its schemas would.

Options:
  --transport stdio|http   (default stdio)
  --record DIR             write DIR/<pid>.json: {"pid": ..., "order": [the tool names as listed]}
  --port-file PATH         http: write the port here once listening
  --seed N                 the shuffle's seed (default: random)
  --scramble               shuffle schema keys and `required` in every tools/list answer
  --hang-handshake         never answer server/discover or initialize
  --bad-schema             list one more tool whose input schema is not valid JSON Schema
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
from pathlib import Path
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image

# The smallest valid PNG (1x1, transparent), so vendors and the twin see a real image.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)

parser = argparse.ArgumentParser()
parser.add_argument("--transport", default="stdio", choices=["stdio", "http"])
parser.add_argument("--record")
parser.add_argument("--port-file")
parser.add_argument("--seed", type=int)
parser.add_argument("--scramble", action="store_true")
parser.add_argument("--hang-handshake", action="store_true")
parser.add_argument("--bad-schema", action="store_true")
options = parser.parse_args()
shuffle = random.Random(options.seed)


def lookup_order(order_number: int) -> str:
    """Look up an order's shipping status by its order number.

    Args:
        order_number: the number printed on the receipt
    """
    return f"order {order_number}: shipped on 2026-11-02"


def get_weather(city: str, days: int, unit: Literal["celsius", "fahrenheit"] = "celsius") -> dict[str, Any]:
    """Forecast the weather for a city.

    Args:
        city: the city
        days: how many days ahead
        unit: temperature unit
    """
    return {"city": city, "days": days, "unit": unit, "high": 21}


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def hang(seconds: float = 3600) -> str:
    """Wait a long time before answering."""
    await asyncio.sleep(seconds)
    return "woke up"


def crash() -> str:
    """Stop the server process at once."""
    os._exit(3)


def fail() -> str:
    """Always fails."""
    raise ValueError("the warehouse database is offline")


def picture() -> Image:
    """Draw a picture."""
    return Image(data=PNG, format="png")


def broken() -> str:
    """Answers with a malformed result (see Misbehave)."""
    return "never sent"


def extra_tool(note: str) -> str:
    """A tool that appears when enable_extra is called.

    Args:
        note: anything
    """
    return f"extra: {note}"


async def enable_extra(ctx: Context) -> str:
    """Add extra_tool to this server's tools and notify clients."""
    server.add_tool(extra_tool)
    await ctx.notify_tools_changed()
    return "extra_tool added"


class Misbehave:
    """Middleware: a malformed tools/call answer for `broken`, a scrambled or bad tools/list, a silent handshake."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if options.hang_handshake and ctx.method in ("server/discover", "initialize"):
            await asyncio.sleep(3600)
        if ctx.method == "tools/call" and (ctx.params or {}).get("name") == "broken":
            return {"content": [{"type": "text"}], "isError": "sometimes"}
        result = await call_next(ctx)
        if ctx.method != "tools/list" or not (options.scramble or options.bad_schema):
            return result
        listed = dict(result) if isinstance(result, dict) else result.model_dump(by_alias=True, exclude_none=True)
        if options.scramble:
            for t in listed["tools"]:
                t["inputSchema"] = scrambled(t["inputSchema"])
        if options.bad_schema:
            listed["tools"].append(
                {"name": "bad_tool", "inputSchema": {"type": "object", "properties": {"x": {"type": "strng"}}}}
            )
        return listed


def scrambled(value: Any) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        shuffle.shuffle(keys)
        return {k: scrambled(value[k]) for k in keys}
    if isinstance(value, list):
        items = [scrambled(v) for v in value]
        if all(isinstance(v, str) for v in items):
            shuffle.shuffle(items)
        return items
    return value


server = MCPServer("segue-fixture", middleware=[Misbehave()], log_level="WARNING")
tools = [lookup_order, get_weather, add, hang, crash, fail, picture, broken, enable_extra]
shuffle.shuffle(tools)
for fn in tools:
    server.add_tool(fn)
if options.record:
    record = {"pid": os.getpid(), "order": [fn.__name__ for fn in tools]}
    (Path(options.record) / f"{os.getpid()}.json").write_text(json.dumps(record))

if options.transport == "stdio":
    server.run()
else:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue from now on, so the port is usable as soon as the file says it
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning")
    if options.port_file:
        Path(options.port_file + ".tmp").write_text(str(sock.getsockname()[1]))
        os.replace(options.port_file + ".tmp", options.port_file)
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
