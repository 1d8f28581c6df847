"""The boundary of a run's steps, for an engine that journals them (segue.durable.dbos).

A run is a sequence of steps: a model step (the call, then its response recorded) and a tool step per call (the
call, then its result recorded). Without an engine the loop runs each step itself (`RunState.steps` is None). An
engine given as `RunState.steps` runs each one inside its own step and keeps what the step returns: the step
records everything in segue's store, so what the engine keeps is a reference to it (`StepRef`), never the history.

Steps are started in the run's order, a round's tool steps in the order of the response's calls (each started
before the previous one awaits anything), so an engine that numbers its steps in the order they start numbers
them the same way on every execution of the run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Literal, Protocol, TypeVar

import attrs

T = TypeVar("T")


@attrs.frozen(kw_only=True)
class StepRef:
    """Where a finished step's outcome is in segue's store: the run, the model step's iteration, the tool step's
    call id. What an engine journals for a step."""

    kind: Literal["model_call", "tool_call"]
    run_id: str
    iteration: int
    call_id: str | None = None

    def as_json(self) -> dict[str, str | int]:
        found: dict[str, str | int] = {"kind": self.kind, "run_id": self.run_id, "iteration": self.iteration}
        if self.call_id is not None:
            found["call_id"] = self.call_id
        return found


class Steps(Protocol):
    """An engine that runs a run's steps (segue.durable.dbos.DBOSSteps)."""

    #: The engine's name, and which of its executions runs the run when its recovery must tell them apart (DBOS:
    #: the workflow, `dbos-<digest>`): the lease tokens of the runs it runs start with it
    #: (segue.store.leases.new_owner), and its recovery takes over only such a lease.
    engine: str

    async def model_call(self, ref: StepRef, step: Callable[[], Awaitable[T]]) -> T:
        """Run the model step `step` (its call and the record of its response) as one step of the engine."""
        ...

    async def tool_call(self, ref: StepRef, step: Callable[[], Awaitable[object]]) -> None:
        """Run the tool step `step` (the call and the record of its result) as one step of the engine."""
        ...

    async def journaled(self, refs: Sequence[StepRef]) -> None:
        """A recovered run's steps that its journal holds, in the order they ran, before it continues: an engine
        that numbers its steps accounts for them (their outcomes are in segue's store; none runs again)."""
        ...
