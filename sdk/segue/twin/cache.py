"""The two prompt-cache models the twin emulates, on a clock the caller controls.

`BlockCache` is Anthropic's: entries sit at block boundaries of the prefix tools -> system -> messages and are
written only at cache_control breakpoints; a breakpoint reads the longest live entry at its own boundary or
within `lookback_blocks` earlier boundaries. `PrefixCache` is OpenAI's: exact byte-prefix matches of the
serialized prompt, reusable from `min_cacheable_tokens` in `increment_tokens` steps, per routing bucket.

Both take ``now`` from the caller so tests drive expiry with a fake clock. A read refreshes the entry's TTL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence

import attrs

from segue.tokens import complete_tokens, count_bytes, token_prefix_bytes
from segue.twin.rules import CacheRules


@attrs.frozen(kw_only=True)
class CacheBlock:
    """One block of a block-cached prompt: its identity bytes, its token count and its breakpoint TTL."""

    key: bytes
    tokens: int
    breakpoint_ttl: str | None = None


@attrs.frozen(kw_only=True)
class BlockUsage:
    """Anthropic usage for one request. total = read + sum(created) + input."""

    input_tokens: int
    cache_read_input_tokens: int
    cache_creation: dict[str, int]
    total_tokens: int

    @property
    def cache_creation_input_tokens(self) -> int:
        return sum(self.cache_creation.values())


@attrs.define
class _Entry:
    ttl_name: str
    expires_at: float


class BlockCache:
    """Anthropic-style breakpoint cache. Entries are keyed by the hash chain of block keys."""

    def __init__(self) -> None:
        self._entries: dict[bytes, _Entry] = {}

    def clear(self) -> None:
        self._entries.clear()

    def account(self, *, namespace: str, blocks: Sequence[CacheBlock], rules: CacheRules, now: float) -> BlockUsage:
        """Read the longest hit, write entries for breakpoints beyond it, and return the usage split."""
        hashes = [hashlib.sha256(namespace.encode("utf-8")).digest()]
        cumulative = [0]
        for block in blocks:
            hashes.append(hashlib.sha256(hashes[-1] + block.key).digest())
            cumulative.append(cumulative[-1] + block.tokens)
        breakpoints = [(i + 1, b.breakpoint_ttl) for i, b in enumerate(blocks) if b.breakpoint_ttl is not None]

        hit = 0
        hit_entry: _Entry | None = None
        for end, _ttl in breakpoints:
            for boundary in range(end, max(0, end - rules.lookback_blocks - 1), -1):
                entry = self._live(hashes[boundary], now)
                if entry is not None:
                    if boundary > hit:
                        hit, hit_entry = boundary, entry
                    break
        if hit_entry is not None:
            hit_entry.expires_at = now + rules.ttl(hit_entry.ttl_name)

        created: dict[str, int] = {name: 0 for name in rules.ttl_seconds}
        written_to = hit
        for end, ttl in breakpoints:
            if end <= hit or cumulative[end] < rules.min_cacheable_tokens:
                continue
            name = ttl or rules.default_ttl
            self._entries[hashes[end]] = _Entry(ttl_name=name, expires_at=now + rules.ttl(name))
            created[name] += cumulative[end] - cumulative[written_to]
            written_to = end
        read = cumulative[hit]
        total = cumulative[-1]
        return BlockUsage(
            input_tokens=total - read - sum(created.values()),
            cache_read_input_tokens=read,
            cache_creation=created,
            total_tokens=total,
        )

    def _live(self, key: bytes, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires_at <= now:
            del self._entries[key]
            return None
        return entry


class PrefixCache:
    """OpenAI-style exact byte-prefix cache, one namespace per routing bucket."""

    def __init__(self) -> None:
        self._entries: dict[bytes, _Entry] = {}

    def clear(self) -> None:
        self._entries.clear()

    def account(self, *, bucket: Hashable, prompt: bytes, rules: CacheRules, ttl_name: str | None, now: float) -> int:
        """Cached tokens for ``prompt`` in ``bucket``; then store every eligible prefix of it."""
        whole = complete_tokens(len(prompt))
        if whole < rules.min_cacheable_tokens:
            return 0
        name = ttl_name or rules.default_ttl
        lifetime = rules.ttl(name)
        digest = hashlib.sha256(repr(bucket).encode("utf-8"))
        fed = 0
        cached = 0
        keys: list[bytes] = []
        for tokens in range(rules.min_cacheable_tokens, whole + 1, rules.increment_tokens):
            end = token_prefix_bytes(tokens)
            digest.update(prompt[fed:end])
            fed = end
            key = digest.copy().digest()
            keys.append(key)
            entry = self._entries.get(key)
            if entry is not None and entry.expires_at > now:
                cached = tokens
        for key in keys:
            existing = self._entries.get(key)
            expires = now + lifetime
            if existing is None or existing.expires_at < expires:
                self._entries[key] = _Entry(ttl_name=name, expires_at=expires)
        return cached


def prompt_tokens(prompt: bytes) -> int:
    """Tokens of a serialized prompt (every started 4-byte group)."""
    return count_bytes(len(prompt))
