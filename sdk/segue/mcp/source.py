"""`MCPTools`: the tools of one MCP server, as a ToolSource an Agent reads once per run.

The server starts lazily, when a run first needs its tools, and stays up for the agent's later runs (one session,
held by segue.mcp.connection). Each run reads the tool list once and keeps it for the whole run; the list is read
from the server again when the server said it changed (`notifications/tools/list_changed`), or on every run when
the server does not send that notification. A call that fails in any way (the server answered an error, timed
out, died, or sent a malformed result) becomes an error result the model sees, and the run goes on; a server that
died is started again by the next run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.session import MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED, Implementation
from pydantic import ValidationError

from segue.mcp.connection import Connection, Opener
from segue.mcp.definitions import Definition, MCPToolsError, build_definitions
from segue.mcp.results import tool_output
from segue.mcp.stdio import UNPARSEABLE, UNSENDABLE, stdio_transport
from segue.tools import DEFAULT_MAX_RESULT_CHARS, Tool, ToolOutput, ToolSource

#: How long a server has to start, finish the handshake and list its tools (MCPTools(connect_timeout=...)).
DEFAULT_CONNECT_TIMEOUT = 30.0
#: A tools/list that pages on beyond this is refused (a paginator that never ends must not hang a run).
MAX_LIST_PAGES = 100
_CLIENT_INFO = Implementation(name="segue", version="0.1.0")
_LOST = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, httpx2.TransportError)


class MCPTools(ToolSource):
    """The tools of one MCP server: `MCPTools.stdio(command, args)` starts the server as a subprocess,
    `MCPTools.http(url)` connects to a Streamable HTTP endpoint. Pass it in `Agent(tools=[...])`.

    Options (both constructors):
      name: how errors, logs and traces name the server (default: the command line, or the URL).
      prefix: offer the tools as `prefix_toolname` (for two servers with tools of the same name).
      requires_approval: True for every tool, or the names of the tools that pause the run for approval.
      timeout: seconds one call may take before it becomes an error result (None: no limit), as for `@tool`.
      connect_timeout: seconds the server has to start, answer the handshake and list its tools.
      max_result_chars: results longer than this are cut, as for `@tool`.
    """

    def __init__(
        self,
        *,
        name: str,
        opener: Opener,
        describe: str,
        prefix: str | None = None,
        requires_approval: bool | Collection[str] = False,
        timeout: float | None = 60.0,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    ) -> None:
        _check_options(name, prefix, requires_approval, timeout, connect_timeout, max_result_chars)
        self.name = name
        self.prefix = prefix
        self.requires_approval = requires_approval
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_result_chars = max_result_chars
        self._opener = opener
        self._describe = describe  # the command line or URL, for error messages
        self._connection: Connection | None = None
        self._lock: asyncio.Lock | None = None
        self._tools: list[Tool] | None = None
        self._stale = True

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        prefix: str | None = None,
        requires_approval: bool | Collection[str] = False,
        timeout: float | None = 60.0,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    ) -> MCPTools:
        """A server started as `command args...`, spoken to over its stdin and stdout.

        The process gets the MCP SDK's default environment (HOME, PATH, SHELL, TERM, USER, LOGNAME) with `env`
        over it; its stderr is this process's stderr. The command is looked up here, so a command that does not
        exist is refused when the tools are declared; the server itself starts when a run first needs it."""
        shown = name or " ".join([str(command), *args])[:120]
        search = (env or {}).get("PATH", os.environ.get("PATH", os.defpath))
        if not _text(command):
            raise MCPToolsError(shown, f"command must be a non-empty string, got {command!r}")
        if shutil.which(command, path=search) is None:
            raise MCPToolsError(
                shown,
                f"command {command!r} was not found or is not executable (searched PATH={search}); install it or "
                "give its full path",
            )
        params = StdioServerParameters(
            command=command, args=list(args), env=dict(env) if env else None, cwd=Path(cwd) if cwd else None
        )

        async def opener(stack: AsyncExitStack, on_message: MessageHandlerFnT) -> Client:
            client = Client(
                stdio_transport(shown, params), client_info=_CLIENT_INFO, message_handler=on_message, cache=None
            )
            return await stack.enter_async_context(client)

        return cls(
            name=shown,
            opener=opener,
            describe=f"`{' '.join([command, *args])}`",
            prefix=prefix,
            requires_approval=requires_approval,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_result_chars=max_result_chars,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        prefix: str | None = None,
        requires_approval: bool | Collection[str] = False,
        timeout: float | None = 60.0,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
    ) -> MCPTools:
        """A server at a Streamable HTTP endpoint (e.g. `http://127.0.0.1:8000/mcp`); `headers` go with every
        request (e.g. {"Authorization": "Bearer ..."}) and never into errors, logs or traces."""
        parts = urlsplit(url if _text(url) else "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise MCPToolsError(name or str(url), f"url must be an http:// or https:// URL, got {url!r}")
        # Credentials in the URL stay out of the name that errors and traces show.
        plain = urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))
        shown = name or plain
        fixed_headers = dict(headers or {})

        async def opener(stack: AsyncExitStack, on_message: MessageHandlerFnT) -> Client:
            # The MCP SDK's own defaults: 30 s to connect and write, 300 s to read (a response may be a stream).
            http = httpx2.AsyncClient(headers=fixed_headers, timeout=httpx2.Timeout(30.0, read=300.0))
            await stack.enter_async_context(http)
            transport = streamable_http_client(url, http_client=http)
            client = Client(transport, client_info=_CLIENT_INFO, message_handler=on_message, cache=None)
            return await stack.enter_async_context(client)

        return cls(
            name=shown,
            opener=opener,
            describe=plain,
            prefix=prefix,
            requires_approval=requires_approval,
            timeout=timeout,
            connect_timeout=connect_timeout,
            max_result_chars=max_result_chars,
        )

    def __repr__(self) -> str:
        return f"MCPTools({self.name!r})"

    # -- the ToolSource interface -------------------------------------------------------------------------------

    async def tools(self) -> list[Tool]:
        """The server's tools for one run, in canonical order; started (or restarted) and listed as needed."""
        connection = await self._connect()
        if self._tools is None or self._stale or not connection.notifies_changes:
            self._stale = False  # before the listing: a notification that arrives during it marks the next run
            try:
                self._tools = [self._tool(d) for d in await self._list(connection)]
            except BaseException:
                self._stale = True
                raise
        return list(self._tools)

    async def aclose(self) -> None:
        """Stop the server (or close the HTTP session). The next run that needs the tools starts it again."""
        connection, self._connection = self._connection, None
        self._tools, self._stale = None, True
        if connection is not None and not connection.loop.is_closed():
            if connection.loop is not asyncio.get_running_loop():
                raise MCPToolsError(self.name, "aclose() must be awaited in the event loop the server started in")
            await connection.close()

    # -- connection ---------------------------------------------------------------------------------------------

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        current = self._connection
        if current is not None and current.loop is not loop:
            if not current.loop.is_closed():
                raise MCPToolsError(
                    self.name,
                    "is in use by another running event loop; give each event loop its own MCPTools",
                )
            self._connection, self._lock, self._tools = None, None, None  # that loop ended, and its session with it
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._connection is None or self._connection.over:
                if self._connection is not None:
                    await self._connection.close()
                self._connection = Connection(self.name, self._opener, self._mark_stale)
                self._tools, self._stale = None, True
            connection = self._connection
        try:
            await connection.started(self.connect_timeout)
        except TimeoutError:
            raise MCPToolsError(
                self.name,
                f"did not finish the MCP handshake within {self.connect_timeout:g} s; check that {self._describe} "
                "is an MCP server (stdio: it must read requests on stdin and answer on stdout), or raise "
                "connect_timeout=",
            ) from None
        except Exception as e:
            raise MCPToolsError(self.name, _start_failure(_leaf(e), self._describe)) from e
        return connection

    def _mark_stale(self) -> None:
        self._stale = True

    async def _list(self, connection: Connection) -> list[Definition]:
        client = connection.client
        if client is None:
            raise MCPToolsError(self.name, f"stopped before it listed its tools ({_reason(connection)})")
        listed: list[Any] = []
        cursor: str | None = None
        try:
            for _ in range(MAX_LIST_PAGES):
                page = await asyncio.wait_for(client.list_tools(cursor=cursor), self.connect_timeout)
                listed.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    return build_definitions(self.name, listed, self.prefix)
        except TimeoutError:
            raise MCPToolsError(self.name, f"did not answer tools/list within {self.connect_timeout:g} s") from None
        except ValidationError as e:
            raise MCPToolsError(self.name, f"answered tools/list with a malformed result: {_first_problem(e)}") from e
        except MCPError as e:
            raise MCPToolsError(self.name, f"answered tools/list with error {e.error.code}: {e.error.message}") from e
        except _LOST as e:
            connection.broke(e)
            raise MCPToolsError(self.name, f"lost the connection while listing its tools: {_leaf(e)}") from e
        raise MCPToolsError(self.name, f"listed more than {MAX_LIST_PAGES} pages of tools; segue stops there")

    # -- calls --------------------------------------------------------------------------------------------------

    def _tool(self, d: Definition) -> Tool:
        async def call(**arguments: Any) -> ToolOutput:
            return await self._call(d.mcp_name, arguments)

        approval = self.requires_approval
        needs = approval if isinstance(approval, bool) else d.name in approval or d.mcp_name in approval
        return Tool(
            name=d.name,
            description=d.description,
            parameters=d.parameters,
            fn=call,
            requires_approval=needs,
            timeout=self.timeout,
            max_result_chars=self.max_result_chars,
            source=self.name,
        )

    async def _call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        connection = self._connection
        client = connection.client if connection is not None and connection.live else None
        if connection is None or client is None or connection.loop is not asyncio.get_running_loop():
            why = _reason(connection) if connection is not None else "it was closed"
            return _failed(f"MCP server {self.name} is not running ({why}); its tools are back on the next run")
        try:
            result = await client.call_tool(tool, arguments)
        except MCPError as e:
            if _lost(e):
                connection.broke(e)
                return _failed(
                    f"MCP server {self.name} stopped while {tool} was running ({e.error.message}); "
                    "its tools are back on the next run"
                )
            if e.error.data == UNSENDABLE:
                return _failed(
                    f"MCP server {self.name} was not sent the call to {tool}: its arguments cannot be encoded as "
                    f"JSON ({e.error.message})"
                )
            if e.error.data == UNPARSEABLE:
                return _failed(
                    f"MCP server {self.name} answered {tool} with a message that cannot be parsed "
                    f"({e.error.message}); the server is still running"
                )
            return _failed(f"MCP server {self.name} answered {tool} with error {e.error.code}: {e.error.message}")
        except ValidationError as e:
            return _failed(f"MCP server {self.name} answered {tool} with a malformed result: {_first_problem(e)}")
        except RuntimeError as e:  # the SDK's check of structured content against the tool's output schema
            return _failed(f"MCP server {self.name} answered {tool} with a result segue cannot use: {e}")
        except _LOST as e:
            connection.broke(e)
            return _failed(
                f"MCP server {self.name} lost its connection while {tool} was running ({type(e).__name__}: {e}); "
                "its tools are back on the next run"
            )
        return tool_output(result, self.max_result_chars)


def _failed(text: str) -> ToolOutput:
    return ToolOutput(content=text, is_error=True)


def _lost(e: MCPError) -> bool:
    """Whether the SDK raised this because the connection ended. Its code, -32000, is also the first of JSON-RPC's
    server-error codes, which servers send for their own failures: only the SDK's own error (that code with the
    message "Connection closed" and no data) means the connection is gone."""
    return e.error.code == CONNECTION_CLOSED and e.error.message == "Connection closed" and e.error.data is None


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _check_options(
    name: Any,
    prefix: Any,
    requires_approval: Any,
    timeout: Any,
    connect_timeout: Any,
    max_result_chars: Any,
) -> None:
    if not _text(name):
        raise MCPToolsError(repr(name), "name must be a non-empty string")
    if prefix is not None and (not isinstance(prefix, str) or not prefix or len(prefix) > 32):
        raise MCPToolsError(name, f"prefix must be a short string (1 to 32 characters) or None, got {prefix!r}")
    if not isinstance(requires_approval, bool) and (
        isinstance(requires_approval, str)
        or not isinstance(requires_approval, Collection)
        or not all(isinstance(n, str) for n in requires_approval)
    ):
        raise MCPToolsError(
            name, f"requires_approval must be True, False or a list of tool names, got {requires_approval!r}"
        )
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
        raise MCPToolsError(name, f"timeout must be a number of seconds > 0, or None for no limit, got {timeout!r}")
    if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, int | float) or connect_timeout <= 0:
        raise MCPToolsError(name, f"connect_timeout must be a number of seconds > 0, got {connect_timeout!r}")
    if isinstance(max_result_chars, bool) or not isinstance(max_result_chars, int) or max_result_chars < 1:
        raise MCPToolsError(name, f"max_result_chars must be an int >= 1, got {max_result_chars!r}")


def _leaf(e: BaseException) -> BaseException:
    """The first real error inside the exception groups anyio's task groups wrap errors in."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def _start_failure(e: BaseException, describe: str) -> str:
    if isinstance(e, FileNotFoundError | PermissionError):
        return f"cannot start {describe}: {e.strerror or e}"
    if isinstance(e, MCPError) and e.error.code == CONNECTION_CLOSED:
        return (
            f"closed the connection during the MCP handshake; {describe} may have exited (its stderr above says why) "
            "or may not be an MCP server"
        )
    if isinstance(e, MCPError):
        return f"refused the MCP handshake: error {e.error.code}: {e.error.message}"
    if isinstance(e, httpx2.HTTPError):
        return f"cannot be reached at {describe}: {type(e).__name__}: {e}"
    return f"failed to start ({describe}): {type(e).__name__}: {e}"


def _reason(connection: Connection) -> str:
    error = connection.error
    if error is None:
        return "it was closed"
    leaf = _leaf(error)
    if isinstance(leaf, MCPError):
        return leaf.error.message
    return f"{type(leaf).__name__}: {leaf}"


def _first_problem(e: ValidationError) -> str:
    errors = e.errors()
    first = errors[0] if errors else None
    if first is None:
        return str(e)
    where = ".".join(str(p) for p in first["loc"]) or "(result)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"
