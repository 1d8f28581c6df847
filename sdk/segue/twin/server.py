"""`segue.twin.server`: the twin over loopback HTTP (segue_twin.server re-exported)."""

from segue_twin.server import DRAIN_FACTOR, TwinServer, run_server, serve, twin_error

__all__ = ["DRAIN_FACTOR", "TwinServer", "run_server", "serve", "twin_error"]
