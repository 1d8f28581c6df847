"""The server's side of the lifecycle methods: `initialize`, `initialized`, `shutdown`, `exit`, and the limit on
runs served at once.

`initialize` tells the client what the server is and what this session may do (its methods, how client-side tools
reach it, the tenants it may act for, the limits). `shutdown` lets the session's requests in flight finish within
a timeout, cancels the rest, and reports how each ended; `exit` then ends the session through its transport (stdio:
the process, with exit code 0 after shutdown and 1 without, as LSP says; HTTP: the session). The rules of which
request a session may send when live in segue.apps.protocol.lifecycle.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Literal

from segue._support.resources import package_version
from segue.apps.protocol.auth import DEFAULT_TENANT, TenantNotAllowed
from segue.apps.protocol.errors import RpcError
from segue.apps.protocol.lifecycle import Phase, version_key
from segue.apps.protocol.rpc import Handler, NotificationHandler, RequestContext, Session
from segue.generated.protocol import (
    ExitParams,
    InitializedParams,
    InitializeParams,
    InitializeResult,
    ServerBusyData,
    ServerCapabilities,
    ServerFeature,
    ServerInfo,
    ServerLimits,
    ShutdownParams,
    ShutdownRequest,
    ShutdownResult,
)
from segue.generated.protocol_methods import METHODS, ErrorCode, Method

log = logging.getLogger("segue.protocol")
Transport = Literal["stdio", "http"]
#: How long shutdown lets requests in flight finish when its params name no timeout.
SHUTDOWN_TIMEOUT_SECONDS = 10.0
#: The methods that start or continue a run are those that may answer ServerBusy: the schema says which.
#: Each feature a client may look for in `capabilities.features`, and the protocol version that brought it (the
#: `prewarm` method, RunParams.output_type): a session that speaks an older version is not offered the feature.
FEATURES: dict[ServerFeature, str] = {"prewarm": "1.2", "structured-output": "1.2"}
RUN_METHODS = frozenset(name for name, m in METHODS.items() if "ServerBusy" in m.errors)


class Control:
    """Lifecycle handlers and run admission for one server (every session of it)."""

    def __init__(self, *, transport: Transport, limits: ServerLimits) -> None:
        self.transport = transport
        self.limits = limits
        self.runs = 0  # runs served now, over every session

    def handlers(self) -> dict[str, Handler]:
        return {"initialize": self.initialize, "shutdown": self.shutdown}

    def notifications(self) -> dict[str, NotificationHandler]:
        return {"initialized": self.initialized, "exit": self.exit}

    def admit(self, session: Session, method: Method) -> Callable[[], None] | None:
        """Take a run slot for a request that starts a run, or refuse it with ServerBusy; returns the release."""
        if method.name not in RUN_METHODS:
            return None
        return self.run_slot()

    def run_slot(self) -> Callable[[], None]:
        """A run slot of max_concurrent_runs (runs over /rpc and the web routes share them), or ServerBusy."""
        limit = self.limits.max_concurrent_runs
        if limit is not None and self.runs >= limit:
            raise RpcError(
                ErrorCode.SERVER_BUSY,
                f"the server runs {limit} runs already (max_concurrent_runs in its config); retry once one ended",
                ServerBusyData(max_concurrent_runs=limit),
            )
        self.runs += 1

        def release() -> None:
            self.runs -= 1

        return release

    async def initialize(self, ctx: RequestContext, p: InitializeParams) -> InitializeResult:
        # The session's state was set as the request was accepted (lifecycle.enter); this reports it.
        session = ctx.session
        log.info("session initialized by %s (protocol %s)", session.state.client_name or "a client", p.protocol_version)
        return InitializeResult(
            protocol_version=session.state.version,
            server_info=ServerInfo(name="segue", version=package_version()),
            capabilities=self.capabilities(session),
        )

    def capabilities(self, session: Session) -> ServerCapabilities:
        version = version_key(session.state.version)
        sent = [
            n
            for n, m in METHODS.items()
            if m.direction in ("clientToServer", "both") and version_key(m.since) <= version
        ]
        notifications = [n for n, m in METHODS.items() if m.kind == "notification" and m.direction != "clientToServer"]
        asks = session.answers_tool_calls
        server_requests = [n for n, m in METHODS.items() if m.kind == "request" and m.direction == "serverToClient"]
        principal = session.principal
        if principal is None or principal.tenants is None:
            tenants, default = ["*"], DEFAULT_TENANT
        else:
            tenants = sorted(principal.tenants)
            try:
                default = principal.tenant_for(None)
            except TenantNotAllowed:
                default = None
        return ServerCapabilities(
            methods=sent,
            notifications=notifications,
            server_requests=server_requests if asks else [],
            transport=self.transport,
            tool_calls="request" if asks else "resume",
            run_events=session.state.event_filter,
            tenants=tenants,
            default_tenant=default,
            limits=self.limits,
            features=[f for f, since in FEATURES.items() if version_key(since) <= version],
        )

    def initialized(self, session: Session, params: InitializedParams) -> None:
        log.debug("the client confirmed initialize")

    async def shutdown(self, ctx: RequestContext, p: ShutdownParams) -> ShutdownResult:
        """Let the session's other requests finish within the timeout, cancel what is left, say how each ended."""
        session = ctx.session
        timeout = p.timeout_seconds if p.timeout_seconds is not None else self.limits.shutdown_timeout_seconds
        others = [c for rid, c in session.requests.items() if rid != ctx.request_id]
        tasks = {c.request_id: session.in_flight[c.request_id] for c in others if c.request_id in session.in_flight}
        cancelled = set()
        if tasks:
            _, pending = await asyncio.wait(tasks.values(), timeout=timeout)
            for request_id, task in tasks.items():
                if task in pending:
                    cancelled.add(request_id)
                    session.cancelled.add(request_id)  # answered RequestCancelled, its run ends cancelled
                    task.cancel()
            if pending:
                await asyncio.wait(pending)
        session.state.phase = Phase.SHUT_DOWN
        log.info(
            "session shut down: %d request(s) finished, %d cancelled", len(others) - len(cancelled), len(cancelled)
        )
        return ShutdownResult(
            requests=[
                ShutdownRequest(
                    id=c.request_id,
                    method=c.method,
                    agent=c.agent,
                    run_id=c.run_id,
                    outcome="cancelled" if c.request_id in cancelled else "finished",
                    status=c.run_status,
                )
                for c in others
            ]
        )

    def exit(self, session: Session, params: ExitParams) -> None:
        """LSP: exit code 0 when shutdown came first, else 1. Requests still in flight are cancelled."""
        code = 0 if session.state.phase in (Phase.SHUTTING_DOWN, Phase.SHUT_DOWN) else 1
        log.info("the client sent exit%s", "" if code == 0 else " without shutdown")
        session.exit(code)
