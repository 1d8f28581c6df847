"""`RunContext`: what a tool may ask to see of the run that calls it (`def lookup(ctx: RunContext[Db], ...)`).

A tool whose first parameter is annotated `RunContext` (or `RunContext[Deps]`) gets one per call: the run's id,
its tenant, the iteration that asked for the call, the call's id, and the `deps=` object the app passed to
`run` / `stream` / `resume` (a database handle, a client, the user's session). The parameter is not part of the
tool's schema: the model never sees it. `deps` is the app's live object, never stored, and not part of the
idempotency fingerprint (a retry or a resume passes it again).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, get_origin

import attrs

DepsT = TypeVar("DepsT")


@attrs.frozen(kw_only=True)
class RunContext(Generic[DepsT]):
    """The run a tool call belongs to. Generic in the type of `deps`, for the type checker's sake only."""

    run_id: str
    tenant_id: str
    iteration: int
    tool_call_id: str
    deps: DepsT


def is_run_context(annotation: Any) -> bool:
    """`RunContext` or `RunContext[X]` (a string annotation is resolved by the caller first)."""
    return annotation is RunContext or get_origin(annotation) is RunContext
