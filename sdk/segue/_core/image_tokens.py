"""What an image costs in input tokens, by the vendors' documented formulas (not its JSON bytes).

A serving path's formula is catalog data (`llm.image_tokens`); the formulas themselves, with their sources:

- ``pixels_750`` (Anthropic, "Images and vision"): "tokens = (width px * height px)/750"; "If your image's long
  edge is more than 1568 pixels, or your image is more than ~1,600 tokens, it will first be scaled down,
  preserving aspect ratio, until it's within the size limits." The image is scaled to both limits first (the
  page's "~1,600" taken as 1,600) and the count rounded up.
- ``tiles_85_170`` (OpenAI, vision guide "Calculating costs", `detail: high`, which `auto` is for a large image):
  "images are first scaled to fit within a 2048 x 2048 square, maintaining their aspect ratio. Then, they are
  scaled such that the shortest side of the image is 768px long. Finally, we count how many 512px squares the
  image consists of. Each of those squares costs 170 tokens. Another 85 tokens are always added to the final
  total." (The guide's example: "A 1024 x 1024 square image in detail: high mode costs 765 tokens".) An image
  whose short side is already under 768 px is not scaled up (the guide does not say either way; measured counts
  on OpenAI's forum, 500 x 500 costing 255 tokens, show it is not).

Both need the image's size. It is read from the bytes of a base64 image (PNG, GIF, JPEG and WebP headers, no
decoder needed); a URL image's size is unknown offline, so its cost is unknown too (None): neither vendor gives a
figure for an image it has not seen.
"""

from __future__ import annotations

import base64
import binascii
import functools
import math
import struct
from typing import Literal

from segue.generated import Base64ImageSource, ImageBlock

ImageFormula = Literal["pixels_750", "tiles_85_170"]
FORMULAS: tuple[ImageFormula, ...] = ("pixels_750", "tiles_85_170")

#: Anthropic: pixels per token and the sizes above which an image is scaled down first.
ANTHROPIC_PIXELS_PER_TOKEN = 750
ANTHROPIC_MAX_EDGE = 1568
ANTHROPIC_MAX_TOKENS = 1600
#: OpenAI `detail: high`: the square an image is fitted in, its short side after scaling, the tile and its costs.
OPENAI_FIT = 2048
OPENAI_SHORT_SIDE = 768
OPENAI_TILE = 512
OPENAI_BASE_TOKENS = 85
OPENAI_TILE_TOKENS = 170


def image_tokens(formula: ImageFormula, width: int, height: int) -> int:
    """Input tokens of a ``width`` x ``height`` image under ``formula``."""
    if width < 1 or height < 1:
        raise ValueError(f"an image has positive sides, got {width}x{height}")
    if formula == "pixels_750":
        return _pixels_750(width, height)
    if formula == "tiles_85_170":
        return _tiles_85_170(width, height)
    raise ValueError(f"unknown image-token formula {formula!r}; expected one of {list(FORMULAS)}")


def _pixels_750(width: int, height: int) -> int:
    scale = min(
        1.0,
        ANTHROPIC_MAX_EDGE / max(width, height),
        math.sqrt(ANTHROPIC_MAX_TOKENS * ANTHROPIC_PIXELS_PER_TOKEN / (width * height)),
    )
    w, h = max(1, math.floor(width * scale)), max(1, math.floor(height * scale))
    return -(-(w * h) // ANTHROPIC_PIXELS_PER_TOKEN)


def _tiles_85_170(width: int, height: int) -> int:
    w, h = float(width), float(height)
    if max(w, h) > OPENAI_FIT:
        fit = OPENAI_FIT / max(w, h)
        w, h = w * fit, h * fit
    if min(w, h) > OPENAI_SHORT_SIDE:
        short = OPENAI_SHORT_SIDE / min(w, h)
        w, h = w * short, h * short
    tiles = math.ceil(w / OPENAI_TILE) * math.ceil(h / OPENAI_TILE)
    return OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS * tiles


@functools.lru_cache(maxsize=256)
def base64_image_tokens(formula: ImageFormula, data: str) -> int | None:
    """Tokens of a base64 image, its size read from its header; None when the bytes are no image segue reads."""
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return None
    size = image_size(raw)
    return None if size is None else image_tokens(formula, *size)


def block_tokens(block: ImageBlock, formula: ImageFormula | None) -> int | None:
    """A canonical image block's tokens under ``formula``; None when they cannot be known (no formula for the
    path, a URL image, bytes that are no image segue reads)."""
    source = block.source
    if formula is None or not isinstance(source, Base64ImageSource):
        return None
    return base64_image_tokens(formula, source.data)


def data_url_tokens(formula: ImageFormula, url: str) -> int | None:
    """Tokens of an image URL: a `data:...;base64,` URL is read like a base64 image; any other URL: None."""
    head, sep, data = url.partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        return None
    return base64_image_tokens(formula, data)


def image_size(raw: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, GIF, JPEG or WebP header; None for anything else or a truncated header."""
    try:
        if raw.startswith(b"\x89PNG\r\n\x1a\n") and raw[12:16] == b"IHDR":
            return _positive(*struct.unpack(">II", raw[16:24]))
        if raw[:6] in (b"GIF87a", b"GIF89a"):
            return _positive(*struct.unpack("<HH", raw[6:10]))
        if raw.startswith(b"\xff\xd8"):
            return _jpeg_size(raw)
        if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
            return _webp_size(raw)
    except struct.error:
        return None
    return None


#: JPEG start-of-frame markers (baseline, progressive, lossless, ...): the ones that carry the frame's size.
_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 4 <= len(raw):
        if raw[i] != 0xFF:
            return None
        marker = raw[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        (length,) = struct.unpack(">H", raw[i + 2 : i + 4])
        if marker in _SOF:
            height, width = struct.unpack(">HH", raw[i + 5 : i + 9])
            return _positive(width, height)
        i += 2 + length
    return None


def _webp_size(raw: bytes) -> tuple[int, int] | None:
    chunk = raw[12:16]
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", raw[26:30])
        return _positive(width & 0x3FFF, height & 0x3FFF)
    if chunk == b"VP8L":
        b0, b1, b2, b3 = raw[21:25]
        return _positive(1 + (b0 | (b1 & 0x3F) << 8), 1 + (b1 >> 6 | b2 << 2 | (b3 & 0x0F) << 10))
    if chunk == b"VP8X":
        width = int.from_bytes(raw[24:27], "little") + 1
        height = int.from_bytes(raw[27:30], "little") + 1
        return _positive(width, height)
    return None


def _positive(width: int, height: int) -> tuple[int, int] | None:
    return (width, height) if width > 0 and height > 0 else None
