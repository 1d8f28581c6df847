"""Errors users catch. Each says what was wrong, with the offending value, and what to do."""

from __future__ import annotations

from typing import Any, Literal

ReplayReason = Literal["not_found", "tenant_mismatch", "not_terminal", "duplicate", "invalid", "unsupported"]


class SegueError(Exception):
    """Base class of segue's own errors."""


class SegueWarning(UserWarning):
    """Base class of segue's warnings: something will run, but probably not as meant."""


class UnknownModelWarning(SegueWarning):
    """An agent's model id is not in the catalog but close to one that is (a likely typo, e.g. 'claude-sonet-4-6'):
    it runs from the vendor's defaults, unpriced. The message names the driver and the catalog's "did you mean".
    Turn it into an error with `warnings.simplefilter("error", segue.errors.UnknownModelWarning)`."""


class ReplayRunError(SegueError, ValueError):
    """A `runs=` / replay knob problem found before anything was written.

    `.run_id` is the offending run (None for knob errors) and `.reason` one of: not_found, tenant_mismatch,
    not_terminal, duplicate, invalid (bad knob value), unsupported (e.g. SingleCall with replay_last > 0).
    """

    def __init__(self, message: str, *, run_id: str | None, reason: ReplayReason) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.reason = reason


class IdempotencyConflictError(SegueError, ValueError):
    """The idempotency key was used before with different input or settings (within the same tenant)."""

    def __init__(self, key: str) -> None:
        super().__init__(
            f"idempotency key {key!r} was already used with a different input, history, context, replay knobs "
            "or agent configuration; use a new key for a new request"
        )
        self.key = key


class InputError(SegueError, ValueError):
    """Bad arguments to run / stream / retry / resume, rejected before any row is written."""


class FieldError(InputError):
    """A generated class refused a field's value when constructed (its schema's type, bounds, enum or pattern).

    `.owner` is the class, `.field` the field, `.value` the value refused; `.problem` says it without the class
    (`top_p must be a number from 0 to 1, got 1.5 (float)`), for a caller that names the argument its own way."""

    def __init__(self, owner: str, field: str, value: Any, problem: str) -> None:
        super().__init__(f"{owner}.{problem}")
        self.owner, self.field, self.value, self.problem = owner, field, value, problem


RunRefusalReason = Literal[
    "not_found",
    "agent_mismatch",
    "not_paused",
    "not_terminal",
    "already_resumed",
    "not_lapsed",
    "config_changed",
    "already_recovered",
]


class RunStateError(InputError):
    """retry / resume refused the run it was given, before anything changed.

    `.reason`: not_found (no such run for this tenant; another tenant's runs are never revealed), agent_mismatch
    (the run belongs to another agent, named in `.agent`), not_paused (resume of a run not waiting_approval),
    not_terminal (retry of a run still running or paused), already_resumed (another request resumed it first),
    not_lapsed (recover of a run that is not running with a lapsed lease), config_changed (recover by an agent
    whose prompt, tools or provider differ from the run's), already_recovered (another process recovered it first).
    """

    def __init__(self, message: str, *, run_id: str, reason: RunRefusalReason, agent: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.reason = reason
        self.agent = agent


class ToolSourceError(SegueError):
    """A tool source (an MCP server) could not give a run its tools: it did not start, did not answer, or listed a
    tool segue cannot offer. Raised before anything of the run is written; `.source` names the source. On
    `stream()` it arrives as a RUN_ERROR event with `meta["source"]`."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(message)
        self.source = source


class StoreError(SegueError):
    """The run store could not be opened or read (bad URL, unreachable server, newer schema, corrupt row)."""


ProviderErrorKind = Literal[
    "rate_limit",
    "server",
    "timeout",
    "connection",
    "context_overflow",
    "bad_request",
    "auth",
    "stream",
    "model_output",
    "other",
]


class WireError(SegueError, ValueError):
    """A canonical message cannot be put on this vendor's wire (e.g. a thinking block without its signature)."""


class MalformedResponseError(SegueError, ValueError):
    """The vendor's JSON does not have the shape its API documents. Drivers turn it into a ProviderError."""


class ProviderError(SegueError):
    """A vendor call failed. `retryable` errors (429, 5xx, timeouts, dropped connections) may fail over.

    `model_output` is a server error that repeats: the server could not turn what the model generated into its
    answer format (llama.cpp's 500 "The model produced output that does not match the expected ... format"). The
    same prompt generates the same output, so it is neither retried by the client nor retryable here."""

    RETRYABLE: frozenset[str] = frozenset({"rate_limit", "server", "timeout", "connection"})

    def __init__(
        self,
        message: str,
        *,
        vendor: str,
        kind: ProviderErrorKind,
        status_code: int | None = None,
        vendor_message: str | None = None,
    ) -> None:
        super().__init__(message)
        self.vendor = vendor
        self.kind = kind
        self.status_code = status_code
        self.vendor_message = vendor_message
        #: The evidence of a failed call, where the driver had it: the body the vendor received and its error
        #: body. The run stores a `model_output` failure as a call with them (llm_interactions.error).
        self.request_body: dict[str, Any] | None = None
        self.response_body: dict[str, Any] | None = None
        self.model: str | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in self.RETRYABLE
