"""A session's lifecycle, as in LSP: initialize, work, shutdown, exit. Pure rules, no I/O.

The dispatcher asks `check` before it reads a request's params and `enter` before it starts it. Each raises a
`RpcError` (the error the request gets, with nothing changed) or lets the request through; `enter` moves the
session to the phase of `initialize` and `shutdown` right there, before the next message is read, so a request
sent just after them already sees the new phase.

- A session that has not sent `initialize` speaks protocol 1.0, the version before the lifecycle existed: the
  methods of 1.0 are served as 1.0 served them (with 1.0's error codes), and a newer method answers
  ServerNotInitialized (-32002). So a client built against an older bundle keeps working, and a newer client that
  forgot `initialize` learns it at its first newer method.
- `initialize` negotiates the version (`negotiate`): a session speaks the version the client asked for, or the
  server's own when the client asked for a later minor version of the same major. Another major version is
  UnsupportedProtocolVersion. A second `initialize` is InvalidRequest.
- After `shutdown` every request, a second `shutdown` included, is InvalidRequest (LSP's rule); `exit` and
  `$/cancelRequest` are still taken, and so are the client's answers to the server's own requests.
"""

from __future__ import annotations

import enum
from typing import Any, get_args

import attrs

from segue.apps.protocol.errors import RpcError
from segue.generated import RunEventType
from segue.generated.protocol import InitializeParams, RunEventFilter, UnsupportedProtocolVersionData
from segue.generated.protocol_methods import METHODS, PROTOCOL_VERSION, ErrorCode, Method

#: The version a session speaks until it sends initialize: the protocol as it was before initialize existed.
LEGACY_VERSION = "1.0"
INITIALIZE = "initialize"
SHUTDOWN = "shutdown"


def version_key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


_MAJOR, _MINOR = version_key(PROTOCOL_VERSION)
#: The versions `initialize` may ask for: from the one that added initialize up to the server's own.
SUPPORTED_VERSIONS = tuple(f"{_MAJOR}.{m}" for m in range(version_key(METHODS[INITIALIZE].since)[1], _MINOR + 1))
_EVENT_TYPES: tuple[RunEventType, ...] = get_args(RunEventType)


class Phase(enum.Enum):
    NEW = "new"  # no initialize yet: the session speaks 1.0
    READY = "ready"  # initialize answered
    SHUTTING_DOWN = "shutting down"  # shutdown received, requests in flight draining
    SHUT_DOWN = "shut down"  # shutdown answered: only exit is left


@attrs.define(kw_only=True)
class SessionState:
    """Where a session is in its lifecycle, and what its client said in initialize."""

    phase: Phase = Phase.NEW
    version: str = LEGACY_VERSION
    client_name: str | None = None
    #: The client answers tool/call requests (stdio). False: client-side tools pause the run instead.
    client_tools: bool = True
    #: The run/event types the client wants (None: all).
    event_types: frozenset[str] | None = None

    def wants(self, event_type: str) -> bool:
        return self.event_types is None or event_type in self.event_types

    @property
    def event_filter(self) -> RunEventFilter | None:
        if self.event_types is None:
            return None
        return RunEventFilter(types=[t for t in _EVENT_TYPES if t in self.event_types])


def negotiate(requested: str) -> str:
    """The version a session speaks when its client asks for `requested` (a MAJOR.MINOR string)."""
    if requested in SUPPORTED_VERSIONS:
        return requested
    if version_key(requested)[0] == _MAJOR and version_key(requested)[1] > _MINOR:
        return PROTOCOL_VERSION  # a newer minor version: the client sees from the result what this server lacks
    raise RpcError(
        ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
        f"initialize asked for protocol {requested}; this server speaks {', '.join(SUPPORTED_VERSIONS)} (a client "
        f"that never sends initialize is served protocol {LEGACY_VERSION}); use a client bundle of protocol {_MAJOR}.x",
        UnsupportedProtocolVersionData(requested=requested, supported=list(SUPPORTED_VERSIONS)),
    )


def check(state: SessionState, method: Method, *, can_initialize: bool = True) -> None:
    """Raise the RpcError a request gets in the session's phase and version, before its params are read.
    `can_initialize` is False for a session that cannot outlive its request (HTTP without a session name)."""
    name = method.name
    if state.phase in (Phase.SHUTTING_DOWN, Phase.SHUT_DOWN):
        again = "shutdown was already requested" if name == SHUTDOWN else f"{name} cannot run"
        raise RpcError(
            ErrorCode.INVALID_REQUEST,
            f"the session is {state.phase.value}: {again}; send exit (and start a new session for more work)",
        )
    if name == INITIALIZE:
        if state.phase is not Phase.NEW:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"initialize was already answered for this session (protocol {state.version}); send it once",
            )
        if not can_initialize:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                "initialize needs a named session (?session=NAME or a Segue-Session header): without one each "
                "request is a session of its own, which would forget it at once",
            )
        return
    if version_key(method.since) > version_key(state.version):
        if state.phase is Phase.NEW:
            raise RpcError(
                ErrorCode.SERVER_NOT_INITIALIZED,
                f"server not initialized: send initialize first. {name} is new in protocol {method.since}; a "
                f"session that has not initialized speaks protocol {LEGACY_VERSION} (or it was freed after idling)",
            )
        raise RpcError(
            ErrorCode.METHOD_NOT_FOUND,
            f"{name} is new in protocol {method.since}; this session speaks {state.version}, as initialize asked",
        )


def enter(state: SessionState, method: Method, params: Any) -> None:
    """The phase change a request makes as it is accepted (initialize, shutdown); raises an RpcError, with the state
    unchanged, when initialize asks for a version the server does not speak."""
    if method.name == INITIALIZE:
        _initialize(state, params)
    elif method.name == SHUTDOWN:
        state.phase = Phase.SHUTTING_DOWN


def admits_notification(state: SessionState, method: Method) -> bool:
    """Whether a client notification is taken in the session's phase and version (`exit` always is)."""
    if method.name == "exit":
        return True
    if method.name == "initialized":
        return state.phase is Phase.READY
    return version_key(method.since) <= version_key(state.version)


def _initialize(state: SessionState, params: InitializeParams) -> None:
    version = negotiate(params.protocol_version)
    capabilities = params.capabilities
    state.version = version
    state.client_name = params.client_info.name if params.client_info else None
    if capabilities is not None:
        state.client_tools = capabilities.client_tools is not False
        if capabilities.run_events is not None and capabilities.run_events.types is not None:
            state.event_types = frozenset(capabilities.run_events.types)
    state.phase = Phase.READY
