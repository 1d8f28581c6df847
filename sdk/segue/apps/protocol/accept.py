"""Accepting connections past the open-file limit: one log line, not a traceback per failed accept()."""

from __future__ import annotations

import asyncio
import errno
import logging
import math
import os
from typing import Any

log = logging.getLogger("segue.protocol")
#: accept() errors that mean "no file descriptor (or socket buffer) for one more connection right now".
_OUT_OF_FILES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def quiet_accept_failures(loop: asyncio.AbstractEventLoop) -> None:
    """A burst of connections past the open-file limit makes every accept() fail (asyncio retries after a
    second) and asyncio logs a traceback for each: hundreds of them. One line instead, then one per minute
    with the count, naming the limit. Every other exception goes to the handler that was there before."""
    previous = loop.get_exception_handler()
    failed = [0, -math.inf]  # failures so far, when the last line was written

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if not (isinstance(error, OSError) and error.errno in _OUT_OF_FILES and "accept" in context["message"]):
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        failed[0] += 1
        if loop.time() - failed[1] >= 60:
            failed[1] = loop.time()
            log.warning(
                "cannot accept connections: %s (open-file limit %s); accepting again shortly "
                "(%d failed accepts so far; lower http.max_connections or raise the limit)",
                os.strerror(error.errno or 0),
                _open_file_limit(),
                failed[0],
            )

    loop.set_exception_handler(handler)


def _open_file_limit() -> str:
    try:
        import resource  # POSIX only
    except ImportError:
        return "unknown"
    return str(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
