"""`segue.twin.testing`: the shop tools in each vendor's format and a fake clock, for tests against the twin
(segue.demo.sample_tools re-exported)."""

from segue.demo.sample_tools import (
    FakeClock,
    anthropic_shop_tools,
    anthropic_tool_loop,
    call_shop_tool,
    chat_shop_tools,
    responses_shop_tools,
    responses_tool_loop,
)

__all__ = [
    "FakeClock",
    "anthropic_shop_tools",
    "anthropic_tool_loop",
    "call_shop_tool",
    "chat_shop_tools",
    "responses_shop_tools",
    "responses_tool_loop",
]
