"""One live session with an MCP server, held by a background task of its own.

The official SDK's `Client` is an async context whose transport (a subprocess and its pipe tasks, or an HTTP
client) must be entered and left by one task. A run is a task that ends; the session must outlive it, shared by
the agent's later runs. So a dedicated owner task enters the `Client`, reports when the handshake is done, and
leaves the context when the connection is closed or cancelled. Cancellation reaches it on every way out: an
explicit `close()`, `asyncio.run()` cancelling the tasks left at its end (which is also what a KeyboardInterrupt
leads to), or the server dying. Leaving the context runs the transport's shutdown: for stdio (segue.mcp.stdio)
close stdin, wait, then end the server's whole process group.

Change notifications: on a 2026-07-28 connection the server sends `notifications/tools/list_changed` only on a
`subscriptions/listen` stream, which this task keeps open; on an older (initialize handshake) connection the
server sends them unasked when it advertises `tools.listChanged`. Either way `on_tools_changed` is called.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

from mcp import Client, MCPError
from mcp.client.session import IncomingMessage, MessageHandlerFnT
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp_types import ToolListChangedNotification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

#: Enters the transport and the Client on the stack (the Client's handshake included) and returns the Client.
Opener = Callable[[AsyncExitStack, MessageHandlerFnT], Awaitable[Client]]


class Connection:
    """A session that is starting, live, or over. Create it inside the event loop that will use it."""

    def __init__(self, name: str, open_client: Opener, on_tools_changed: Callable[[], None]) -> None:
        self.name = name
        self._open = open_client
        self._on_tools_changed = on_tools_changed
        self.loop = asyncio.get_running_loop()
        self.client: Client | None = None
        #: Whether the server tells this session when its tool list changes (else the list is read every run).
        self.notifies_changes = False
        #: Why the session ended on its own (the server died, the handshake failed), for the errors that follow.
        self.error: BaseException | None = None
        self._started = asyncio.Event()
        self._closing = asyncio.Event()
        # A context of its own: the session outlives the run that starts it, so it must not carry that run's trace
        # context (or anything else the run set) into the spans and calls it makes later.
        self._task = self.loop.create_task(self._own(), name=f"segue.mcp {name}", context=contextvars.Context())

    @property
    def live(self) -> bool:
        return self.client is not None and not self._closing.is_set()

    @property
    def over(self) -> bool:
        return self._task.done() or self._closing.is_set()

    async def started(self, timeout: float) -> Client:
        """The Client once the handshake is done; the reason it failed (as raised), or TimeoutError."""
        try:
            await asyncio.wait_for(self._started.wait(), timeout)
        except TimeoutError:
            await self.close()
            raise
        if self.client is None:
            assert self.error is not None
            raise self.error
        return self.client

    async def close(self) -> None:
        """End the session and wait for the server to be stopped (every wait of the shutdown is bounded)."""
        self._closing.set()
        if not self._started.is_set():
            self._task.cancel()  # still in the handshake: abandon it; leaving the context stops the process
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({self._task})

    def broke(self, error: BaseException) -> None:
        """A call found the session dead (the server exited, the connection dropped): end it in the background,
        so the next run starts a new one."""
        if self.error is None:
            self.error = error
        self._closing.set()

    async def _own(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                client = await self._open(stack, self._on_message)
                listening = await self._watch_tools(client)
                self.client = client
                self._started.set()
                await self._closing.wait()
                if listening is not None:
                    listening.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await listening
        except asyncio.CancelledError:
            self.error = self.error or ConnectionAbortedError("the connection was closed")
            raise
        except Exception as e:  # reported to whoever waits for the start, or to the next call
            self.error = self.error or e
        finally:
            self.client = None
            self._closing.set()
            self._started.set()

    async def _watch_tools(self, client: Client) -> asyncio.Task[None] | None:
        tools = client.server_capabilities.tools
        if tools is None or not tools.list_changed:
            return None
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self.notifies_changes = True  # handshake-era servers send the notification unasked
            return None
        acknowledged = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._listen(client, acknowledged))
        await acknowledged.wait()
        return task

    async def _listen(self, client: Client, acknowledged: asyncio.Event) -> None:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                self.notifies_changes = bool(subscription.honored.tools_list_changed)
                acknowledged.set()
                async for _ in subscription:  # the notification itself reaches _on_message as well
                    pass
        except (ListenNotSupportedError, SubscriptionLost, MCPError, TimeoutError):
            pass  # no change notifications: the tool list is read on every run instead
        finally:
            if self.notifies_changes:
                self.notifies_changes = False
                self._on_tools_changed()  # what changed since the stream ended is unknown
            acknowledged.set()

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._on_tools_changed()
