"""Canonical JSON and hashing, defined once (docs/replay.md).

canonical_json: keys sorted, no whitespace, UTF-8 kept as is (ensure_ascii=False), no `default=` fallback, so
a value that is not plain JSON fails loudly instead of hashing its repr. canonical_hash: "sha256:" + hex digest
of canonical_json encoded as UTF-8.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_hash(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
