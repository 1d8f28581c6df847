"""The Anthropic driver on the twin with every request body recorded, and a store that closes, for the tests of
agents whose tools come from MCP servers (tests/mcp/test_mcp_agent.py, test_mcp_faults.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2

from segue import RunStore
from segue.providers import AnthropicProvider
from segue_twin import Twin


class Recording(httpx2.AsyncBaseTransport):
    """The twin's transport, keeping the bytes of every request body as the vendor would receive them."""

    def __init__(self, twin: Twin) -> None:
        self.inner = twin.transport()
        self.bodies: list[bytes] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(await request.aread())
        return await self.inner.handle_async_request(request)


def anthropic(wire: Recording, twin: Twin) -> AnthropicProvider:
    client = twin.anthropic_client(http_client=httpx2.AsyncClient(transport=wire))
    return AnthropicProvider("claude-sonnet-4-6", thinking={"type": "adaptive"}, client=client)


@contextmanager
def store_at(tmp: Path, name: str) -> Iterator[RunStore]:
    store = RunStore(f"sqlite:///{tmp / name}.db")
    try:
        yield store
    finally:
        store.close()
