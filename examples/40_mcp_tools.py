"""Tools from an MCP server: a three-turn conversation whose tools come from segue's demo order desk
(segue/mcp/order_desk.py, an MCP server written with the official SDK), each turn replaying the earlier ones, with
the server restarted between turns as an app restart would: the tool blocks stay byte-identical, so reasoning is
kept and the cache keeps reading. Offline, on the twin. Needs `pip install 'segue[mcp]'`.
Run: python examples/40_mcp_tools.py
"""

from __future__ import annotations

import asyncio
import sys

from segue import Agent, RunStore
from segue.mcp import MCPTools
from segue.providers import AnthropicProvider
from segue.twin import Twin

PROMPT = "You answer questions about orders, precisely and briefly, using the order desk's tools. " * 60
QUESTIONS = [
    "Use lookup_order for order 1042.",
    "Use lookup_order for order 1044.",
    "Use list_orders for the orders that shipped.",
]


async def main() -> None:
    twin = Twin()  # for the real API: AnthropicProvider("claude-sonnet-4-6", ...) with ANTHROPIC_API_KEY set
    provider = AnthropicProvider("claude-sonnet-4-6", thinking={"type": "adaptive"}, client=twin.anthropic_client())
    store = RunStore("sqlite:///:memory:")
    run_ids: list[str] = []
    for question in QUESTIONS:
        # A new MCPTools (and server process) per turn, as after an app restart.
        orders = MCPTools.stdio(sys.executable, ["-m", "segue.demo.order_desk"], name="orders")
        async with Agent(provider, PROMPT, [orders], store) as agent:  # leaving it stops the server
            result = await agent.run(question, runs=run_ids or None, replay_last="all")
        run_ids.append(result.run_id)
        kept = len(result.replay.reasoning_kept) if result.replay else 0
        usage = result.usage
        print(f"Q: {question}")
        print(f"A: {result.answer}")
        print(
            f"   reasoning kept for {kept} earlier run(s); "
            f"cache read {usage.cache_read_tokens or 0} of {usage.input_tokens} input tokens"
        )
    store.close()


if __name__ == "__main__":
    asyncio.run(main())
