"""The prompt-cache models the twin emulates, on a clock the caller controls.

`BlockCache` keeps entries at block boundaries of a prompt, written only at breakpoints. It serves two vendors'
rules, chosen by `CacheRules.style`:

- "block" (Anthropic): the prefix is tools -> system -> messages; each cache_control breakpoint reads the longest
  live entry at its own boundary or at one within `lookback_blocks` content blocks, its own block counting as the
  first; every block is one position, each tool_use and each tool_result too.
- "breakpoint" (OpenAI GPT-5.6 and later): a request reads the longest live entry among the conversation's latest
  `match_breakpoints` breakpoints (its own markers, and the entries earlier requests wrote into its prefix), with
  no lookback limit; only the breakpoints it flags as writing are written.

`PrefixCache` is OpenAI's cache before GPT-5.6: exact byte-prefix matches of the serialized prompt, reusable from
`min_cacheable_tokens` in `increment_tokens` steps, per routing bucket.

All take ``now`` from the caller so tests drive expiry with a fake clock. A read refreshes the entry's TTL.

An entry is readable only once the response of the request that wrote it has begun (`Ticket.begun`): requests
that arrive before that find nothing and write it again, as a real fan-out of identical requests does. The first
writer's ticket stays with the entry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence

import attrs

from segue._core.tokens import complete_tokens, count_bytes, token_prefix_bytes
from segue_twin.rules import CacheRules


@attrs.frozen(kw_only=True)
class CacheBlock:
    """One block of a block-cached prompt.

    key: the block's identity bytes (its hash chain is the cache key of the prefix ending with it).
    tokens: its token count.
    breakpoint_ttl: set when the request writes an entry at the end of this block, with this TTL.
    breakpoint: the block ends at a breakpoint the request marked but does not write (breakpoint style: it is
    still matched against).
    """

    key: bytes
    tokens: int
    breakpoint_ttl: str | None = None
    breakpoint: bool = False


@attrs.frozen(kw_only=True)
class BlockUsage:
    """Usage for one request. total = read + sum(created) + input (input: neither read nor written)."""

    input_tokens: int
    cache_read_input_tokens: int
    cache_creation: dict[str, int]
    total_tokens: int

    @property
    def cache_creation_input_tokens(self) -> int:
        return sum(self.cache_creation.values())


@attrs.define(eq=False)
class Ticket:
    """One request's writes: readable by other requests from the moment its response begins."""

    begun: bool = False

    def begin(self) -> None:
        self.begun = True


@attrs.define
class _Entry:
    ttl_name: str
    expires_at: float
    #: The request that wrote the entry (None: readable at once, for callers that model no concurrency).
    writer: Ticket | None = None

    @property
    def readable(self) -> bool:
        return self.writer is None or self.writer.begun


class BlockCache:
    """Breakpoint-written cache over block boundaries. Entries are keyed by the hash chain of block keys."""

    def __init__(self) -> None:
        self._entries: dict[bytes, _Entry] = {}

    def clear(self) -> None:
        self._entries.clear()

    def account(
        self,
        *,
        namespace: str,
        blocks: Sequence[CacheBlock],
        rules: CacheRules,
        now: float,
        writer: Ticket | None = None,
    ) -> BlockUsage:
        """Read the longest hit, write entries for the writing breakpoints beyond it, and return the usage split.
        ``writer``: the request's ticket; its entries are readable once its response begins."""
        hashes = [hashlib.sha256(namespace.encode("utf-8")).digest()]
        cumulative = [0]
        for block in blocks:
            hashes.append(hashlib.sha256(hashes[-1] + block.key).digest())
            cumulative.append(cumulative[-1] + block.tokens)

        if rules.style == "breakpoint":
            hit = self._latest_breakpoints_hit(hashes, blocks, rules, now)
        else:
            hit = self._lookback_hit(hashes, blocks, rules, now)
        if hit:
            entry = self._entries[hashes[hit]]
            entry.expires_at = now + rules.ttl(entry.ttl_name)

        created: dict[str, int] = {name: 0 for name in rules.ttl_seconds}
        written_to = hit
        for end, block in enumerate(blocks, start=1):
            if block.breakpoint_ttl is None or end <= hit or cumulative[end] < rules.min_cacheable_tokens:
                continue
            name = block.breakpoint_ttl
            first = _first_writer(self._entries, hashes[end], writer, now)
            self._entries[hashes[end]] = _Entry(ttl_name=name, expires_at=now + rules.ttl(name), writer=first)
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

    def _lookback_hit(self, hashes: list[bytes], blocks: Sequence[CacheBlock], rules: CacheRules, now: float) -> int:
        """The boundary of the longest live entry any breakpoint finds within its lookback window (0: none).

        Each breakpoint checks its own boundary, then earlier ones, while they lie within `lookback_blocks`
        blocks counting its own block as the first; the first live entry it meets is its hit. The unit is the
        content block: the prompt-caching page's "checks up to 20 blocks before each explicit `cache_control`
        breakpoint" counts "content block boundaries", and each tool_use and tool_result is one (strands#3348
        measured 18 parallel calls and their results re-writing the whole prefix, which one position per run of
        calls could not).
        """
        lookback = rules.number("lookback_blocks")
        hit = 0
        for end, block in enumerate(blocks, start=1):
            if block.breakpoint_ttl is None:
                continue
            for boundary in range(end, max(end - lookback, 0), -1):
                if self._live(hashes[boundary], now) is not None:
                    hit = max(hit, boundary)
                    break
        return hit

    def _latest_breakpoints_hit(
        self, hashes: list[bytes], blocks: Sequence[CacheBlock], rules: CacheRules, now: float
    ) -> int:
        """The boundary of the longest live entry among the latest `match_breakpoints` breakpoints (0: none).

        The conversation's breakpoints are the ones this request marks (written or not) and the live entries
        earlier requests wrote into its prefix: a breakpoint far back is found (no lookback limit), but only if
        fewer than `match_breakpoints` breakpoints come after it.
        """
        candidates = [
            end
            for end, block in enumerate(blocks, start=1)
            if block.breakpoint_ttl is not None or block.breakpoint or self._live(hashes[end], now) is not None
        ]
        considered = candidates[-rules.number("match_breakpoints") :]
        return max((end for end in considered if self._live(hashes[end], now) is not None), default=0)

    def _live(self, key: bytes, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires_at <= now:
            del self._entries[key]
            return None
        return entry if entry.readable else None


def _first_writer(entries: dict[bytes, _Entry], key: bytes, writer: Ticket | None, now: float) -> Ticket | None:
    """The ticket an entry written now carries: a live entry keeps its own (readable stays readable; an earlier
    writer still in flight begins first), an absent or expired one takes ``writer``."""
    existing = entries.get(key)
    return writer if existing is None or existing.expires_at <= now else existing.writer


class PrefixCache:
    """OpenAI-style exact byte-prefix cache, one namespace per routing bucket."""

    def __init__(self) -> None:
        self._entries: dict[bytes, _Entry] = {}

    def clear(self) -> None:
        self._entries.clear()

    def account(
        self,
        *,
        bucket: Hashable,
        prompt: bytes,
        rules: CacheRules,
        ttl_name: str | None,
        now: float,
        writer: Ticket | None = None,
    ) -> int:
        """Cached tokens for ``prompt`` in ``bucket``; then store every eligible prefix of it (readable once
        ``writer``'s response begins)."""
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
            if entry is not None and entry.expires_at > now and entry.readable:
                cached = tokens
        for key in keys:
            existing = self._entries.get(key)
            expires = now + lifetime
            if existing is None or existing.expires_at < expires:
                self._entries[key] = _Entry(
                    ttl_name=name, expires_at=expires, writer=_first_writer(self._entries, key, writer, now)
                )
        return cached


def prompt_tokens(prompt: bytes) -> int:
    """Tokens of a serialized prompt (every started 4-byte group)."""
    return count_bytes(len(prompt))
