"""The limits of `segue serve --http`, from its config (`http` in schemas/serve.schema.json) to what `initialize`
reports."""

from __future__ import annotations

from typing import Any

import attrs

from segue.generated.protocol import HttpLimits
from segue.generated.serve import HttpConfig


@attrs.frozen(kw_only=True)
class Limits:
    """The server's limits; each default is documented in schemas/serve.schema.json (HttpConfig)."""

    max_connections: int
    request_timeout: float = 30.0
    write_timeout: float = 30.0
    max_body_bytes: int = 16 * 1024 * 1024
    max_bodies_bytes: int = 64 * 1024 * 1024
    max_sessions: int = 1000
    session_idle_seconds: float = 60.0
    event_buffer: int = 1000
    web_resume: float = 0.0

    @classmethod
    def from_config(cls, config: HttpConfig | None) -> Limits:
        c = config or HttpConfig()
        return cls(max_connections=c.max_connections or _default_connections(), **_given(c))

    def to_wire(self) -> HttpLimits:
        """The limits as `initialize` reports them."""
        return HttpLimits(
            max_connections=self.max_connections,
            request_timeout_seconds=self.request_timeout,
            max_body_bytes=self.max_body_bytes,
            max_bodies_bytes=self.max_bodies_bytes,
            max_sessions=self.max_sessions,
            session_idle_seconds=self.session_idle_seconds,
            event_buffer=self.event_buffer,
        )


def _default_connections() -> int:
    """100, or half the open-file limit when that is lower: connections never starve the process of files."""
    try:
        import resource  # POSIX only
    except ImportError:
        return 100
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 100 if soft == resource.RLIM_INFINITY else max(1, min(100, soft // 2))


def _given(c: HttpConfig) -> dict[str, Any]:
    """The limits the config sets (the others keep Limits' defaults)."""
    chosen: dict[str, Any] = {
        "request_timeout": c.request_timeout_seconds,
        "write_timeout": c.write_timeout_seconds,
        "max_body_bytes": c.max_body_bytes,
        "max_bodies_bytes": c.max_bodies_bytes,
        "max_sessions": c.max_sessions,
        "session_idle_seconds": c.session_idle_seconds,
        "event_buffer": c.event_buffer,
        "web_resume": c.web_resume_seconds,
    }
    return {k: v for k, v in chosen.items() if v is not None}
