"""JSON-RPC 2.0 dispatch, independent of the transport.

A transport hands each decoded message to `Dispatcher.dispatch(session, message)`, which answers at once (a bad
envelope, an unknown method, params that fail the schema, a request id still in flight, a request the session's
lifecycle refuses: segue.apps.protocol.lifecycle) or starts the request as a task and returns it; the task's value is
the response. The method table is generated from
schemas/protocol.schema.json (`segue.generated.protocol_methods`); params are checked and structured by
segue.apps.protocol.params, so a handler only ever sees a typed params object. Errors segue raises
(ReplayRunError, IdempotencyConflictError, InputError, ...) become their codes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any

import attrs

from segue.apps.protocol import lifecycle
from segue.apps.protocol.auth import Principal, TenantNotAllowed
from segue.apps.protocol.errors import RpcError
from segue.apps.protocol.params import parse_params, schema_errors
from segue.catalog import CatalogError
from segue.errors import (
    IdempotencyConflictError,
    InputError,
    ProviderError,
    ReplayRunError,
    RunStateError,
    StoreError,
)
from segue.generated import RunStatus, get_converter
from segue.generated.protocol import (
    CancelParams,
    IdempotencyConflictData,
    InputErrorData,
    ProviderFailedData,
    ReplayRunErrorData,
    RequestId,
    RequestInFlightData,
    TenantNotAllowedData,
)
from segue.generated.protocol_methods import METHODS, PROTOCOL_VERSION, ErrorCode, Method

log = logging.getLogger("segue.protocol")
CANCEL_METHOD = "$/cancelRequest"
_CANCELLED_MEMORY = 1000

Message = dict[str, Any]
Send = Callable[[Message], None]
Handler = Callable[["RequestContext", Any], Awaitable[Any]]
#: A client notification's handler (besides $/cancelRequest, which the dispatcher serves itself).
NotificationHandler = Callable[["Session", Any], None]
#: A server-wide check before a request starts: raises RpcError to refuse it, or returns what to call once it ended.
Admit = Callable[["Session", Method], Callable[[], None] | None]


class ClientCallError(Exception):
    """A request to the client failed: it answered with an error, an invalid result, or went away."""


def response(
    request_id: RequestId | None, *, result: Any = None, error: RpcError | None = None, version: str = PROTOCOL_VERSION
) -> Message:
    if error is not None:
        return {"jsonrpc": "2.0", "id": request_id, "error": error.to_json(version)}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


class Session:
    """One client: its requests in flight, and what the server sends it (notifications, requests to the client)."""

    def __init__(
        self,
        send: Send,
        *,
        client_requests: bool,
        principal: Principal | None = None,
        persistent: bool = True,
        on_exit: Callable[[int], None] | None = None,
    ) -> None:
        self.send = send
        #: Whether the transport can carry server-to-client requests (stdio yes, HTTP no).
        self.client_requests = client_requests
        #: Who the client is (HTTP with tokens): requests act only for the tenants it allows. None: any tenant.
        self.principal = principal
        #: Whether the session outlives its request, so initialize means something (HTTP: a named session).
        self.persistent = persistent
        #: What the transport does on `exit`, given the exit code (stdio: the process ends; HTTP: the session).
        self.on_exit = on_exit
        #: Where the session is in its lifecycle (initialize, shutdown) and what its client said it can do.
        self.state = lifecycle.SessionState()
        self.in_flight: dict[RequestId, asyncio.Task[Message]] = {}
        #: The requests in flight, in the order they arrived (shutdown reports on them).
        self.requests: dict[RequestId, RequestContext] = {}
        self.cancelled: set[RequestId] = set()
        self._calls: dict[str, asyncio.Future[Message]] = {}
        self._ids = itertools.count(1)
        #: Requests to the client we cancelled (ids, oldest first): their answers may still cross ours.
        self._cancelled_calls: dict[str, bool] = {}
        self._warned = False
        self.closed: str | None = None

    def note(self, message: str, quiet: bool) -> None:
        """Log something the client did wrong: the first time at WARNING, then at DEBUG (no log flooding)."""
        if quiet or self._warned:
            log.debug("%s", message)
            return
        self._warned = True
        log.warning("%s (further problems with this client's messages are logged at DEBUG)", message)

    def notify(self, method: str, params: Any) -> None:
        """Send a notification. Never suspends, so a cancellation always lands inside the run, not here."""
        if self.closed is None:
            self.send({"jsonrpc": "2.0", "method": method, "params": get_converter().unstructure(params)})

    async def call(self, method: str, params: Any) -> Any:
        """Send a request to the client and wait for its result, checked against the method's result schema."""
        spec = METHODS[method]
        if not self.client_requests:
            raise ClientCallError(f"this transport cannot send {method} requests to the client")
        if self.closed is not None:
            raise ClientCallError(f"the client is gone ({self.closed})")
        call_id = f"segue-{next(self._ids)}"
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._calls[call_id] = future
        try:
            self.send(
                {"jsonrpc": "2.0", "id": call_id, "method": method, "params": get_converter().unstructure(params)}
            )
            answer = await future
        except asyncio.CancelledError:
            # The run stopped waiting (it was cancelled, or the tool timed out): tell the client to stop too.
            if self.closed is None:
                self._cancelled_calls[call_id] = True
                while len(self._cancelled_calls) > _CANCELLED_MEMORY:
                    del self._cancelled_calls[next(iter(self._cancelled_calls))]
                self.notify(CANCEL_METHOD, CancelParams(id=call_id))
            raise
        finally:
            self._calls.pop(call_id, None)
        if "error" in answer:
            error = answer["error"]
            if isinstance(error, dict):
                raise ClientCallError(f"{error.get('message')} (code {error.get('code')})")
            raise ClientCallError(f"the client answered {method} with a malformed error: {error!r:.200}")
        assert spec.result is not None
        problems = schema_errors(spec.result.__name__, answer.get("result"))
        if problems:
            shown = "; ".join(f"{p.pointer or '(result)'}: {p.message}" for p in problems)
            raise ClientCallError(f"the client answered {method} with an invalid result: {shown}")
        return get_converter().structure(answer["result"], spec.result)

    def deliver(self, message: Message) -> None:
        """A response from the client to one of our requests."""
        key = message.get("id")
        future = self._calls.get(key) if isinstance(key, str) else None
        if future is None or future.done():
            late = self._cancelled_calls.pop(key, False) if isinstance(key, str) else False  # we cancelled it
            self.note(f"ignoring a response to unknown or finished request id {str(key)[:60]!r}", late)
            return
        future.set_result(message)

    @property
    def answers_tool_calls(self) -> bool:
        """Whether client-side tools reach this client as tool/call requests (else the run pauses for them)."""
        return self.client_requests and self.state.client_tools

    def exit(self, code: int) -> None:
        """The client sent exit: the transport ends the session (stdio: the process) with `code`."""
        if self.on_exit is not None:
            self.on_exit(code)

    def close(self, reason: str) -> None:
        """The client is gone: requests to it fail now, and no more messages are sent."""
        self.closed = reason
        for future in self._calls.values():
            if not future.done():
                future.set_exception(ClientCallError(f"the client is gone ({reason})"))


@attrs.define(kw_only=True)
class RequestContext:
    """The request being served; tools read it through `current_request()` (a context variable)."""

    session: Session
    request_id: RequestId
    method: str
    agent: str | None = None
    #: Set once the run has an id (its RUN_STARTED event, or the run being resumed).
    run_id: str | None = None
    #: The run's status once it is known (its result, or how it was stored when it was cancelled).
    run_status: RunStatus | None = None
    #: Whether the request's task has begun to run (before that, a cancellation must not reach the task itself).
    started: bool = False


_current: ContextVar[RequestContext | None] = ContextVar("segue.apps.protocol.request", default=None)


def current_request() -> RequestContext | None:
    return _current.get()


class Dispatcher:
    """Routes messages to handlers by the generated method table."""

    def __init__(
        self,
        handlers: Mapping[str, Handler],
        notifications: Mapping[str, NotificationHandler] | None = None,
        admit: Admit | None = None,
    ) -> None:
        expected = {name for name, m in METHODS.items() if _from_client(m) and m.kind == "request"}
        if set(handlers) != expected:
            raise ValueError(f"handlers must cover exactly {sorted(expected)}, got {sorted(handlers)}")
        taken = {n for n, m in METHODS.items() if _from_client(m) and m.kind == "notification"} - {CANCEL_METHOD}
        if notifications is not None and set(notifications) != taken:
            raise ValueError(f"notification handlers must cover exactly {sorted(taken)}, got {sorted(notifications)}")
        self.handlers = dict(handlers)
        self.notifications = dict(notifications or {})
        self.admit = admit

    def dispatch(self, session: Session, message: Any) -> Message | asyncio.Task[Message] | None:
        """The immediate response, a task whose value is the response, or None (a notification, a client response).

        Whatever goes wrong with one message is that message's error response: the server never stops for it."""
        version = session.state.version
        try:
            return self._accept(session, message)
        except _Refused as refused:
            return response(refused.request_id, error=refused.error, version=version)
        except Exception as e:
            request_id = message.get("id") if isinstance(message, dict) else None
            error = error_from_exception(e)
            return response(request_id if _valid_id(request_id) else None, error=error, version=version)

    def _accept(self, session: Session, message: Any) -> asyncio.Task[Message] | None:
        if isinstance(message, list):
            raise _Refused(None, ErrorCode.INVALID_REQUEST, "batches are not supported: send one message per frame")
        if not isinstance(message, dict):
            raise _Refused(None, ErrorCode.INVALID_REQUEST, f"a message must be a JSON object, got {_show(message)}")
        has_id = "id" in message
        request_id = message.get("id")
        if has_id and not _valid_id(request_id):
            raise _Refused(
                None, ErrorCode.INVALID_REQUEST, f"id must be a string or an integer, got {_show(request_id)}"
            )
        method = message.get("method")
        if method is None and has_id and ("result" in message or "error" in message):
            session.deliver(message)
            return None
        if method is None and not has_id:
            # Neither a request, a notification nor a response (`{}`, `{"foo": 1}`): JSON-RPC 2.0 answers these
            # with Invalid Request and a null id.
            keys = ", ".join(sorted(map(str, message))[:5]) or "none"
            raise _Refused(None, ErrorCode.INVALID_REQUEST, f'not a JSON-RPC 2.0 message: no "method" (keys: {keys})')
        if message.get("jsonrpc") != "2.0":
            if not has_id:
                return None  # a notification is never answered, not even a malformed one
            raise _Refused(
                request_id, ErrorCode.INVALID_REQUEST, f'"jsonrpc" must be "2.0", got {_show(message.get("jsonrpc"))}'
            )
        if not isinstance(method, str):
            text = 'a request needs a "method"' if method is None else '"method" must be a string'
            raise _Refused(request_id, ErrorCode.INVALID_REQUEST, text)
        spec = METHODS.get(method)
        if not has_id:
            self._notification(session, spec, method, message.get("params"))
            return None
        assert request_id is not None
        if request_id in session.in_flight:
            raise _Refused(
                request_id,
                ErrorCode.REQUEST_IN_FLIGHT,
                f"request id {_show(request_id)} is still in flight; use a fresh id for each request",
                RequestInFlightData(id=request_id),
            )
        if spec is None or not _from_client(spec):
            known = ", ".join(n for n, m in METHODS.items() if _from_client(m) and m.kind == "request")
            raise _Refused(request_id, ErrorCode.METHOD_NOT_FOUND, f"no method {method!r}; the server answers {known}")
        if spec.kind != "request":
            raise _Refused(request_id, ErrorCode.INVALID_REQUEST, f"{method} is a notification: send it without an id")
        try:
            lifecycle.check(session.state, spec, can_initialize=session.persistent)
            params = parse_params(spec, message.get("params"))
            if session.principal is not None and hasattr(params, "tenant_id"):
                params = attrs.evolve(params, tenant_id=session.principal.tenant_for(params.tenant_id))
            release = self.admit(session, spec) if self.admit is not None else None
            try:
                lifecycle.enter(session.state, spec, params)
            except BaseException:
                if release is not None:
                    release()
                raise
        except (RpcError, TenantNotAllowed) as e:
            error = error_from_exception(e)
            raise _Refused(request_id, error.code, error.message, error.data) from None
        context = RequestContext(session=session, request_id=request_id, method=method)
        task = asyncio.get_running_loop().create_task(
            self._run(context, spec, params), name=f"segue {method} {request_id}"
        )
        if release is not None:
            task.add_done_callback(lambda _: release())
        session.in_flight[request_id] = task
        session.requests[request_id] = context
        return task

    async def _run(self, context: RequestContext, spec: Method, params: Any) -> Message:
        session, request_id = context.session, context.request_id
        context.started = True
        _current.set(context)
        try:
            if request_id in session.cancelled:  # cancelled before it began (in the same read as the request)
                raise asyncio.CancelledError
            result = await self.handlers[spec.name](context, params)
            return response(request_id, result=get_converter().unstructure(result, spec.result))
        except asyncio.CancelledError:
            if request_id not in session.cancelled:
                raise
            message = f"request {json.dumps(request_id)} was cancelled" + (
                f"; run {context.run_id} ended as cancelled" if context.run_id else ""
            )
            return response(
                request_id, error=RpcError(ErrorCode.REQUEST_CANCELLED, message), version=session.state.version
            )
        except Exception as e:
            return response(request_id, error=error_from_exception(e), version=session.state.version)
        finally:
            session.in_flight.pop(request_id, None)
            session.requests.pop(request_id, None)
            session.cancelled.discard(request_id)

    def _notification(self, session: Session, spec: Method | None, method: str, raw: Any) -> None:
        if spec is None or not _from_client(spec) or spec.kind != "notification":
            # "$/" notifications are optional by convention (LSP); others are logged once per session at WARNING,
            # then at DEBUG, so a client cannot flood the log.
            optional = method.startswith("$/")
            session.note(f"ignoring notification {method[:80]!r}: the server takes no such notification", optional)
            return
        if not lifecycle.admits_notification(session.state, spec):
            session.note(
                f"ignoring notification {method}: not taken while the session is {session.state.phase.value}", False
            )
            return
        try:
            params = parse_params(spec, raw)
        except RpcError as e:
            session.note(f"ignoring notification {method}: {e.message}", False)
            return
        if method == CANCEL_METHOD:
            task = session.in_flight.get(params.id)
            if task is not None and not task.done():
                session.cancelled.add(params.id)
                # A task cancelled before its first step never runs its body, so it would end without the
                # response (and never leave in_flight): one not begun sees `cancelled` when it starts instead.
                context = session.requests.get(params.id)
                if context is None or context.started:
                    task.cancel()
        elif method in self.notifications:
            self.notifications[method](session, params)


def error_from_exception(e: Exception) -> RpcError:
    """segue's own errors keep their meaning on the wire; anything else is an InternalError (logged)."""
    if isinstance(e, RpcError):
        return e
    if isinstance(e, ReplayRunError):
        data = ReplayRunErrorData(reason=e.reason, run_id=e.run_id or None)
        return RpcError(ErrorCode.REPLAY_RUN_ERROR, str(e), data)
    if isinstance(e, IdempotencyConflictError):
        return RpcError(ErrorCode.IDEMPOTENCY_CONFLICT, str(e), IdempotencyConflictData(idempotency_key=e.key))
    if isinstance(e, RunStateError):
        return RpcError(ErrorCode.INPUT_ERROR, str(e), InputErrorData(reason=e.reason, run_id=e.run_id, agent=e.agent))
    if isinstance(e, InputError):
        return RpcError(ErrorCode.INPUT_ERROR, str(e))
    if isinstance(e, CatalogError):
        return RpcError(ErrorCode.CATALOG_LOOKUP_ERROR, str(e))
    if isinstance(e, TenantNotAllowed):
        return RpcError(ErrorCode.TENANT_NOT_ALLOWED, str(e), TenantNotAllowedData(tenant_id=e.tenant))
    if isinstance(e, StoreError):
        return RpcError(ErrorCode.INTERNAL_ERROR, f"the run store failed: {e}")
    if isinstance(e, ProviderError):  # only prewarm raises it: a run's vendor failure is a result with status error
        return RpcError(ErrorCode.PROVIDER_FAILED, str(e), ProviderFailedData(vendor=e.vendor, kind=e.kind))
    log.exception("internal error while serving a request", exc_info=e)
    return RpcError(ErrorCode.INTERNAL_ERROR, f"internal error: {type(e).__name__}: {e}")


class _Refused(Exception):
    """A message answered at once with an error."""

    def __init__(self, request_id: RequestId | None, code: ErrorCode, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.error = RpcError(code, message, data)


def _from_client(m: Method) -> bool:
    return m.direction in ("clientToServer", "both")


def _show(value: Any) -> str:
    return json.dumps(value)[:60]


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
