"""The runs this process has started and not yet ended, ended `cancelled` when the interpreter exits.

A task cancelled by Ctrl-C (`asyncio.run`'s SIGINT handler, the asyncio REPL) ends its run in the pipeline
(run/pipeline.py). But a KeyboardInterrupt raised out of `loop.run_until_complete`, a `sys.exit` from a thread, or an
event loop closed with the run still awaiting never reaches the run's coroutine: without this, the store would
hold the run `running` until its lease lapses and a sweep calls it an error. At exit each such run is ended
`cancelled`, with its usage and iterations so far, before the process is gone (a SIGKILL still leaves it to
the sweep).
"""

from __future__ import annotations

import atexit
import logging
import threading

from segue.generated import Usage
from segue.store import RunStore
from segue.store.leases import LeaseLost

log = logging.getLogger("segue.run")

#: The error text of a run ended at interpreter exit.
ENDED_AT_EXIT = "the run was cancelled: the process exited (interrupted) before the run finished"

_lock = threading.Lock()
_open: dict[str, tuple[RunStore, Usage, int, str | None]] = {}


def opened(store: RunStore, run_id: str, usage: Usage, iterations: int, owner: str | None) -> None:
    """Note (or update) a run of this process that is not finished (held with lease token `owner`); at exit it
    is ended `cancelled`, if this process still holds it."""
    with _lock:
        _open[run_id] = (store, usage, iterations, owner)


def closed(run_id: str) -> None:
    """The run ended (or paused): nothing to do for it at exit."""
    with _lock:
        _open.pop(run_id, None)


def is_open(run_id: str) -> bool:
    """Whether this process started (or resumed) the run and has not recorded its end or pause."""
    with _lock:
        return run_id in _open


def end_all() -> list[str]:
    """End every run still open as `cancelled`; the ids of those ended (registered with atexit)."""
    with _lock:
        pending = list(_open.items())
        _open.clear()
    ended = []
    for run_id, (store, usage, iterations, owner) in pending:
        try:
            store.finish_run(
                run_id,
                status="cancelled",
                answer=None,
                error=ENDED_AT_EXIT,
                usage=usage,
                iterations=iterations,
                owner=owner,
            )
            ended.append(run_id)
        except LeaseLost:
            continue  # a sweep ended it, or another process recovered it: not this process's to end
        except Exception as e:  # the store may be closed or gone at exit: the sweep ends the run later
            log.warning(
                "could not end run %s as cancelled at exit (%s); a sweep will end it once its lease lapses", run_id, e
            )
    return ended


atexit.register(end_all)
