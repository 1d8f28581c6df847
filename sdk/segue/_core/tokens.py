"""A deterministic tokenizer approximation, shared by the twin's cache accounting and segue's token budgets.

The rule: **one token per started group of 4 UTF-8 bytes**. Token ``i`` of a text covers bytes ``[4i, 4i+4)``
of its UTF-8 encoding, so ``count_tokens(t) == ceil(len(t.encode()) / 4)``.

JSON values are counted over their canonical serialization (`canonical_json`: sorted keys, no whitespace,
non-ASCII kept as UTF-8), so two dicts that differ only in key order count the same.

Why this rule: vendors' real tokenizers are private or model-specific, and segue needs one number that the
replay planner, the budgets and the twin all agree on. The rule is prefix-stable: a prefix of a text never
counts more than the whole (``ceil`` is monotone), and a byte prefix of length ``L`` contains exactly
``complete_tokens(L)`` whole tokens, which is what a byte-prefix cache can match.
"""

from __future__ import annotations

from typing import Any

from segue._core.hashing import canonical_json

#: Bytes of UTF-8 per token. Changing it changes every count; it is a constant, not a knob.
BYTES_PER_TOKEN = 4


def count_bytes(byte_length: int) -> int:
    """Tokens in a byte string of ``byte_length`` bytes (every started 4-byte group is one token)."""
    if byte_length < 0:
        raise ValueError(f"byte_length must be >= 0, got {byte_length}")
    return -(-byte_length // BYTES_PER_TOKEN)


def complete_tokens(byte_length: int) -> int:
    """Whole tokens inside the first ``byte_length`` bytes: what an exact byte-prefix match can reuse."""
    if byte_length < 0:
        raise ValueError(f"byte_length must be >= 0, got {byte_length}")
    return byte_length // BYTES_PER_TOKEN


def token_prefix_bytes(tokens: int) -> int:
    """Bytes covered by the first ``tokens`` tokens."""
    return tokens * BYTES_PER_TOKEN


def count_tokens(text: str) -> int:
    """Tokens in ``text``: ``ceil(len(text.encode("utf-8")) / 4)``. The empty string has 0 tokens."""
    if not isinstance(text, str):
        raise TypeError(f"count_tokens expects str, got {type(text).__name__}; use count_json for other values")
    return count_bytes(len(text.encode("utf-8")))


def count_json(obj: Any) -> int:
    """Tokens in the canonical JSON serialization of ``obj`` (see `canonical_json`)."""
    return count_tokens(canonical_json(obj))
