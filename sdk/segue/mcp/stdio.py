"""The stdio transport for MCPTools: the server as a subprocess, newline-delimited JSON-RPC on its stdin and stdout.

segue's own rather than the SDK's `mcp.client.stdio.stdio_client`, because of what that one does not do:

- Stop the whole process group, always. The server starts in a session (and process group) of its own, as the
  SDK starts it, and shutdown follows the MCP lifecycle for stdio: close the server's stdin, wait, SIGTERM,
  SIGKILL. The SDK signals the group only when the server outlives its stdin; a server that exits on its own
  left its children (workers, shell commands) running, reparented to PID 1. Here the group gets SIGTERM in
  either case, and SIGKILL after a grace period. Only a process that left the group (`setsid`, a daemon) escapes.
- Fail one call, not the session, on one bad message. A line the client library cannot parse (invalid UTF-8, or
  a lone surrogate escape `\\ud800`, which JSON allows and MCP's models refuse) is still the answer it was meant
  to be: when the request id can be read from it, the call waiting for that id gets an error at once instead of
  waiting out its timeout. A line that names no id is logged in one line (WARNING for the first of a session,
  DEBUG after) and skipped; the SDK logged a traceback per line. A request that cannot be encoded (a lone
  surrogate in the arguments) is that call's error; in the SDK it ended the writer task, and the session.

On Windows the SDK's transport is used (it puts the server in a Job Object, which ends the whole tree).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
from anyio.abc import AsyncResource, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS, PARSE_ERROR, ErrorData, JSONRPCError, JSONRPCRequest, jsonrpc_message_adapter

log = logging.getLogger("segue.mcp")

#: How long the server has to exit on its own once its stdin is closed (the SDK waits as long).
STDIN_GRACE_SECONDS = 2.0
#: How long the server's process group has between SIGTERM and SIGKILL.
TERM_GRACE_SECONDS = 2.0
#: How long the writer has to hand over what the session already sent, before stdin closes.
_FLUSH_SECONDS = 0.5
#: Marks an error this transport made for an unparseable answer (ErrorData.data), for MCPTools' message.
UNPARSEABLE = "segue.mcp.unparseable"
#: Marks an error this transport made for a request it could not encode (never sent to the server).
UNSENDABLE = "segue.mcp.unsendable"

#: What a transport yields to the SDK's Client: messages (or transport faults) in, messages out.
Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


@asynccontextmanager
async def stdio_transport(name: str, params: StdioServerParameters) -> AsyncIterator[Streams]:
    """Start the server and yield the session's (read, write) streams; stop its process group on the way out."""
    if sys.platform == "win32":  # pragma: no cover - the SDK's Job Object ends the tree there
        async with stdio_client(params) as (read_stream, write_stream):
            yield read_stream, write_stream  # type: ignore[misc]
        return
    process = await anyio.open_process(
        [params.command, *params.args],
        env=get_default_environment() | (params.env or {}),
        stderr=sys.stderr,
        cwd=params.cwd,
        start_new_session=True,
    )
    # No await from here until the task group is entered: a cancellation in between would leave the process.
    read_send, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    lines = _Lines(name)
    written = anyio.Event()

    async def read() -> None:
        assert process.stdout is not None
        delivering = True
        buffer = bytearray()
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async with read_send:
                async for chunk in process.stdout:
                    scan = len(buffer)
                    buffer += chunk
                    while (end := buffer.find(b"\n", scan)) >= 0:
                        item = lines.item(bytes(buffer[:end]))
                        del buffer[: end + 1]
                        scan = 0
                        if item is None or not delivering:
                            continue  # after the session is gone, read on: a server blocked writing cannot exit
                        try:
                            await read_send.send(item)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            delivering = False

    async def write() -> None:
        assert process.stdin is not None
        try:
            async with write_receive:
                async for message in write_receive:
                    try:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
                    except ValueError as e:  # e.g. a lone surrogate in the arguments, which UTF-8 cannot carry
                        if isinstance(message.message, JSONRPCRequest):
                            error = ErrorData(code=INVALID_PARAMS, message=f"{e}", data=UNSENDABLE)
                            reply = JSONRPCError(jsonrpc="2.0", id=message.message.id, error=error)
                            await read_send.send(SessionMessage(reply))
                        continue
                    await process.stdin.send(data + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_send.aclose()  # the server stopped reading: the session sees the connection end
        finally:
            written.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        try:
            yield read_stream, write_stream
        finally:
            # Shielded, every wait bounded: a cancelled caller must neither leave the processes nor hang on them.
            with anyio.CancelScope(shield=True):
                read_stream.close()  # the reader reads on and discards: a server blocked writing cannot exit
                write_stream.close()
                with anyio.move_on_after(_FLUSH_SECONDS):
                    await written.wait()
                await _stop(process)
            tasks.cancel_scope.cancel()


async def _stop(process: Process) -> None:
    """Close stdin and wait; then end the process group (SIGTERM, SIGKILL after a grace period), whether or not the
    server exited on its own: its children are in the group too."""
    assert process.stdin is not None and process.stdout is not None
    await _close(process.stdin)
    await _exited(process, STDIN_GRACE_SECONDS)
    await terminate_posix_process_tree(process, TERM_GRACE_SECONDS)
    if not await _exited(process, TERM_GRACE_SECONDS):
        log.warning("MCP server process %d is still alive after SIGKILL; leaving it", process.pid)
    await _close(process.stdout)


async def _exited(process: Process, seconds: float) -> bool:
    # returncode, not wait(): on asyncio wait() also waits for the pipes' EOF, which a surviving child delays.
    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(0.01)
        return True
    return False


async def _close(resource: AsyncResource) -> None:
    with anyio.move_on_after(TERM_GRACE_SECONDS), suppress(OSError, anyio.BrokenResourceError):
        await resource.aclose()


class _Lines:
    """Turns the server's stdout lines into session messages, and unparseable ones into the error of the call
    they answer."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.unparseable = 0

    def item(self, line: bytes) -> SessionMessage | None:
        if not line.strip():
            return None
        try:
            return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
        except ValueError as e:  # pydantic's ValidationError, or the bytes are not UTF-8
            problem = _problem(e)
        request_id = _answered_id(line)
        if request_id is not None:
            error = ErrorData(code=PARSE_ERROR, message=problem, data=UNPARSEABLE)
            return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
        self.unparseable += 1
        level = logging.WARNING if self.unparseable == 1 else logging.DEBUG
        shown = line[:200].decode("utf-8", errors="replace")
        log.log(
            level, "MCP server %s sent a line that is no JSON-RPC message (%s), skipped: %r", self.name, problem, shown
        )
        return None


def _problem(e: ValueError) -> str:
    errors = getattr(e, "errors", None)
    if callable(errors):
        first = errors()[0] if errors() else None
        if first is not None:
            return str(first["msg"])
    return f"{type(e).__name__}: {e}"


def _answered_id(line: bytes) -> int | str | None:
    """The id of the request a line answers, read the lenient way (Python's JSON reader takes lone surrogates and
    invalid UTF-8 is replaced); None when the line is no response at all."""
    try:
        message: Any = json.loads(line.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" in message:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id
