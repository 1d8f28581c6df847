"""Image parts as the twin counts them: by the serving path's image-token formula, not by their JSON bytes.

The formula is catalog data (`llm.image_tokens`, via `CacheRules.image_tokens`) and the formulas live in
`segue._core.image_tokens` with their sources. An image the formula can be applied to (a base64 image, or a
`data:` URL, whose header gives the size) counts its formula's tokens; an image whose size the twin cannot know
(a URL it does not fetch) or a path without a formula keeps the old count, its JSON bytes / 4, and the twin logs
once that the count is not the vendor's.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from typing import Any

from segue._core.hashing import canonical_json
from segue._core.image_tokens import ImageFormula, base64_image_tokens, data_url_tokens
from segue._core.tokens import count_json

log = logging.getLogger("segue.twin")

#: The part types that hold an image: Anthropic `image`, Chat Completions `image_url`, Responses `input_image`.
IMAGE_TYPES = frozenset({"image", "image_url", "input_image"})


def is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in IMAGE_TYPES


def image_tokens(part: dict[str, Any], formula: ImageFormula | None, where: str) -> int | None:
    """The formula's tokens for an image part; None (logged once per reason) when they cannot be known."""
    if formula is None:
        _unknown(f"{where}: segue's catalog has no image-token formula (llm.image_tokens) for this model")
        return None
    tokens = _tokens(part, formula)
    if tokens is None:
        _unknown(f"{where}: an image whose size the twin cannot read (a URL it does not fetch, or unknown bytes)")
    return tokens


def _tokens(part: dict[str, Any], formula: ImageFormula) -> int | None:
    kind = part.get("type")
    if kind == "image":  # Anthropic: {"source": {"type": "base64", "data": ...}} or a URL source
        source = part.get("source")
        if isinstance(source, dict) and source.get("type") == "base64" and isinstance(source.get("data"), str):
            return base64_image_tokens(formula, source["data"])
        return None
    url = part.get("image_url")
    if isinstance(url, dict):  # Chat Completions: {"image_url": {"url": ...}}
        url = url.get("url")
    return data_url_tokens(formula, url) if isinstance(url, str) else None


def stand_in(part: dict[str, Any], tokens: int) -> str:
    """Text of ``tokens`` tokens (4 bytes each) naming the image: what a byte-prefix cache compares, so the same
    image matches itself and counts what the vendor bills for it."""
    size = tokens * 4
    return f"[image {hashlib.sha256(canonical_json(part).encode('utf-8')).hexdigest()}]".ljust(size)[:size]


def block_tokens(block: dict[str, Any], formula: ImageFormula | None, where: str) -> int:
    """An Anthropic content block's tokens: its JSON (`count_json`) with every image in it (a tool result's too)
    counted by the formula instead, where that is known."""
    if block.get("type") not in ("image", "tool_result"):
        return count_json(block)
    images = 0

    def swap(value: Any) -> Any:
        nonlocal images
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if not isinstance(value, list):
            return value
        kept = []
        for item in value:
            tokens = image_tokens(item, formula, where) if is_image(item) else None
            if tokens is None:
                kept.append(swap(item))
            else:
                images += tokens
        return kept

    if is_image(block):
        tokens = image_tokens(block, formula, where)
        if tokens is not None:
            return tokens
    return count_json(swap(block)) + images


@functools.cache
def _unknown(reason: str) -> None:
    log.warning("twin: %s; it counts the image as its JSON bytes / 4, which is not the vendor's count", reason)
