"""`segue serve`: drive segue's agents from any language over JSON-RPC 2.0, like a language server.

The operations are defined in schemas/protocol.schema.json (its `protocol` method table); codegen turns them into
the dispatch table this package serves (`segue.generated.protocol_methods`) and into TypeScript declarations plus
a client helper in the export bundle. Transports: stdio with LSP's Content-Length framing
(`segue.apps.protocol.stdio`), and HTTP with server-sent events (`segue.apps.protocol.http`). Agents come from a
config file (`segue.apps.protocol.config`, schemas/serve.schema.json). A session's lifecycle (initialize, shutdown,
exit) is `segue.apps.protocol.lifecycle` (the rules) and `segue.apps.protocol.control` (the handlers); discovery of
agents and the catalog is `segue.apps.protocol.discovery`; runs and stores are
`segue.apps.protocol.methods`. See docs/protocol.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from segue.apps.protocol.auth import TokenConfigError, Tokens
from segue.apps.protocol.config import ConfigError, ServeApp, ServeError, build_app, load_config
from segue.apps.protocol.control import SHUTDOWN_TIMEOUT_SECONDS, Control
from segue.apps.protocol.errors import RpcError
from segue.apps.protocol.rpc import Dispatcher, Session
from segue.generated.protocol import HttpLimits, ServerLimits
from segue.generated.serve import HttpConfig, ServeConfig

log = logging.getLogger("segue.serve")

__all__ = [
    "ConfigError",
    "Control",
    "Dispatcher",
    "RpcError",
    "ServeApp",
    "ServeError",
    "Session",
    "build_app",
    "load_config",
    "make_dispatcher",
    "serve",
    "server_limits",
]


def serve(config: Path, *, http: bool = False, host: str = "127.0.0.1", port: int = 8711) -> int:
    """Run the server until its input ends (stdio) or it is stopped. Raises ServeError when it cannot start."""
    if not logging.getLogger().handlers:
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="segue serve: %(name)s: %(message)s")
    settings = load_config(config)
    tokens = _tokens(settings.http, config) if http else None
    app = build_app(settings, config, "http" if http else "stdio")
    try:
        if http:
            from segue.apps.protocol.http import HttpServer
            from segue.apps.protocol.limits import Limits
            from segue.apps.protocol.run_logs import RunLogs, recover_at_start
            from segue.apps.protocol.web import Web

            limits = Limits.from_config(settings.http)
            wire_limits = server_limits(settings, limits.max_body_bytes, http=limits.to_wire())
            control = Control(transport="http", limits=wire_limits)
            # The runs a killed server left are recovered once the server listens, their events kept like a web
            # run's, so a client reconnects to them with Last-Event-ID (segue.apps.protocol.run_logs).
            logs = RunLogs(buffer=limits.event_buffer, max_logs=limits.max_sessions)
            server = HttpServer(
                make_dispatcher(app, control),
                host=host,
                port=port,
                tokens=tokens,
                limits=limits,
                web=Web(app, run_slot=control.run_slot, logs=logs, resume_seconds=limits.web_resume),
                on_start=lambda: recover_at_start(app, logs),
            )
            return asyncio.run(_stopping_tools(app, server.serve()))
        _sweep(app)
        from segue.apps.protocol.framing import MAX_BODY_BYTES
        from segue.apps.protocol.stdio import serve_stdio

        dispatcher = make_dispatcher(app, Control(transport="stdio", limits=server_limits(settings, MAX_BODY_BYTES)))

        # stdout carries only frames: anything else printing (a tool, a library) goes to stderr instead.
        out_fd = os.dup(1)
        os.dup2(2, 1)
        return asyncio.run(_stopping_tools(app, serve_stdio(dispatcher, stdin_fd=0, stdout_fd=out_fd)))
    except KeyboardInterrupt:
        return 0
    finally:
        app.close()


async def _stopping_tools(app: ServeApp, serving: Coroutine[Any, Any, int]) -> int:
    """Serve, then stop the agents' MCP servers in the same event loop (their sessions live in it)."""
    try:
        return await serving
    finally:
        await app.stop_tools()


def make_dispatcher(app: ServeApp, control: Control) -> Dispatcher:
    """The dispatcher over every method of the table: runs and stores, discovery, and the lifecycle."""
    from segue.apps.protocol.discovery import Discovery
    from segue.apps.protocol.methods import Methods

    handlers = {**Methods(app).handlers(), **Discovery(app).handlers(), **control.handlers()}
    return Dispatcher(handlers, control.notifications(), control.admit)


def server_limits(settings: ServeConfig, max_message_bytes: int, http: HttpLimits | None = None) -> ServerLimits:
    """The limits `initialize` reports (and the server keeps)."""
    return ServerLimits(
        max_message_bytes=max_message_bytes,
        max_concurrent_runs=settings.max_concurrent_runs,
        shutdown_timeout_seconds=SHUTDOWN_TIMEOUT_SECONDS,
        http=http,
    )


def _tokens(settings: HttpConfig | None, config: Path) -> Tokens | None:
    try:
        return Tokens.load(settings)
    except TokenConfigError as e:
        raise ConfigError(str(config), f"/http/tokens{e.pointer}", str(e)) from None


def _sweep(app: ServeApp) -> None:
    """Runs a killed server left `running` (stdio; `--http` recovers them once it listens, keeping their events for
    a client that reconnects: segue.apps.protocol.run_logs): its agents' runs whose lease lapsed are recovered now,
    as the same runs (Agent.recover_lapsed); runs nobody recovered within the grace period (another agent's, say)
    end `error`, so they can be replayed."""
    recovered = 0
    for name, entry in app.agents.items():
        try:
            recovered += len(asyncio.run(entry.pausing.recover_lapsed()))
        except Exception as e:  # a run this configuration cannot continue is left to the sweep
            log.warning("segue serve: could not recover the lapsed runs of agent %s: %s", name, e)
    from segue.apps.protocol.run_logs import sweep_abandoned

    if recovered:
        print(f"segue serve: recovered {recovered} run(s) whose process had died", file=sys.stderr, flush=True)
    for line in sweep_abandoned(app):
        print(line, file=sys.stderr, flush=True)
