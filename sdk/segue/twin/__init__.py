"""`segue.twin`: where an app imports segue's offline twin of the vendors' HTTP APIs.

The twin itself is the `segue_twin` package, shipped in the same distribution beside the runtime (which never
imports it). This package re-exports its public names, and its submodules re-export the parts the docs use:
`segue.twin.server` (the loopback HTTP server), `segue.twin.sample_db` (the demo's shop database and its tools)
and `segue.twin.testing` (the shop tools in each vendor's format, `FakeClock`). Re-exports, not aliases: every
class and function is the same object whichever name imported it, and nothing is written into `sys.modules`.
"""

from __future__ import annotations

from segue.twin import sample_db, server, testing
from segue_twin import *  # noqa: F403 (the façade re-exports the twin's public names)
from segue_twin import __all__ as _twin_all

__all__ = [*_twin_all, "sample_db", "server", "testing"]
