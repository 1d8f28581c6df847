"""A usage record as a prefix cache sees it: what was read from the cache, written to it, and not cached."""

from __future__ import annotations

import attrs

from segue.generated import Usage


@attrs.frozen(kw_only=True)
class CacheParts:
    """A request's prompt split the way a prefix cache sees it. None parts: the vendor did not report them."""

    read: int | None
    write: int | None
    uncached: int
    total: int

    @property
    def read_share(self) -> float | None:
        if self.read is None or not self.total:
            return None
        return self.read / self.total


def cache_parts(usage: Usage) -> CacheParts:
    """input_tokens is the whole prompt; cache reads and writes are parts of it; the rest was not cached."""
    read, write = usage.cache_read_tokens, usage.cache_write_tokens
    uncached = max(usage.input_tokens - (read or 0) - (write or 0), 0)
    return CacheParts(read=read, write=write, uncached=uncached, total=usage.input_tokens)
