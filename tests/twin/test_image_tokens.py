"""Image input tokens by the vendors' formulas (segue._core.image_tokens), and the twin counting them.

Sources, quoted in segue/_core/image_tokens.py: Anthropic's "Images and vision" page ("tokens = (width px * height
px)/750"; an image whose "long edge is more than 1568 pixels, or ... more than ~1,600 tokens" is "scaled down,
preserving aspect ratio"); OpenAI's vision guide, "Calculating costs" (detail high: fit in 2048 x 2048, shortest
side 768, "Each of those squares costs 170 tokens. Another 85 tokens are always added").
"""

from __future__ import annotations

import base64
import json
import logging
import struct
from typing import Any

import pytest

from segue._core.image_tokens import base64_image_tokens, data_url_tokens, image_size, image_tokens
from segue_twin import Twin, images


def png(width: int, height: int) -> bytes:
    """A PNG's signature and IHDR chunk: all a size reader needs."""
    ihdr = struct.pack(">II", width, height) + bytes([8, 6, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\0\0\0\0"


def test_openai_detail_high_matches_the_guides_examples() -> None:
    """'A 1024 x 1024 square image in detail: high mode costs 765 tokens'; 'A 2048 x 4096 image in detail: high
    mode costs 1105 tokens' (OpenAI vision guide, calculating costs)."""
    assert image_tokens("tiles_85_170", 1024, 1024) == 765
    assert image_tokens("tiles_85_170", 2048, 4096) == 1105


def test_anthropic_pixels_over_750_with_the_pages_limits() -> None:
    """(width x height)/750; 1092 x 1092 is the page's largest 1:1 size that is not resized (~1,590 tokens), and a
    larger image is scaled to the limits first, so it never counts more than ~1,600 tokens."""
    assert image_tokens("pixels_750", 1000, 1000) == 1334
    assert image_tokens("pixels_750", 1092, 1092) == 1590
    assert image_tokens("pixels_750", 200, 200) == 54
    assert 1500 < image_tokens("pixels_750", 4000, 3000) <= 1600
    assert image_tokens("pixels_750", 3136, 400) == image_tokens("pixels_750", 1568, 200)  # long edge 1568


def test_sizes_are_read_from_png_gif_jpeg_and_webp_headers() -> None:
    jpeg = b"\xff\xd8" + b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0" + b"\0" * 9
    jpeg += b"\xff\xc0" + struct.pack(">HBHH", 17, 8, 480, 640) + b"\0" * 10
    vp8x = b"RIFF" + b"\0" * 4 + b"WEBPVP8X" + b"\0" * 8 + (799).to_bytes(3, "little") + (599).to_bytes(3, "little")
    assert image_size(png(1092, 300)) == (1092, 300)
    assert image_size(b"GIF89a" + struct.pack("<HH", 32, 16)) == (32, 16)
    assert image_size(jpeg) == (640, 480)
    assert image_size(vp8x) == (800, 600)
    assert image_size(b"not an image") is None


def test_a_url_image_has_no_known_cost() -> None:
    """Neither vendor gives a figure for an image it has not seen: a URL image's tokens are unknown (None)."""
    assert data_url_tokens("tiles_85_170", "https://example.com/a.png") is None
    data = base64.b64encode(png(1024, 1024)).decode()
    assert data_url_tokens("tiles_85_170", f"data:image/png;base64,{data}") == 765
    assert base64_image_tokens("pixels_750", data) == 1399


def _anthropic_input(twin: Twin, content: list[dict[str, Any]], model: str = "claude-sonnet-4-6") -> int:
    body = {"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": content}]}
    headers = {"x-api-key": "k", "content-type": "application/json", "anthropic-version": "2023-06-01"}
    answer = twin.handle("POST", "/v1/messages", headers, json.dumps(body).encode())
    assert answer.status == 200, answer.body
    return int(json.loads(answer.body)["usage"]["input_tokens"])


def test_the_twin_counts_an_anthropic_base64_image_by_the_formula() -> None:
    text = {"type": "text", "text": "What is in the picture?"}
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png(1092, 1092)).decode()},
    }
    without = _anthropic_input(Twin(), [text])
    assert _anthropic_input(Twin(), [image, text]) - without == 1590


def test_the_twin_counts_a_url_image_as_before_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """Unknown size: the twin keeps counting the image's JSON and logs that the count is not the vendor's."""
    text = {"type": "text", "text": "What is in the picture?"}
    image = {"type": "image", "source": {"type": "url", "url": "https://example.com/ant.jpg"}}
    images._unknown.cache_clear()  # logged once per process: another test may have logged it already
    with caplog.at_level(logging.WARNING, logger="segue.twin"):
        extra = _anthropic_input(Twin(), [image, text]) - _anthropic_input(Twin(), [text])
    assert 0 < extra < 40
    assert any("cannot read" in r.getMessage() for r in caplog.records)


def test_the_twin_counts_a_chat_data_url_image_by_the_formula() -> None:
    def prompt_tokens(content: Any) -> int:
        body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": content}]}
        headers = {"authorization": "Bearer k", "content-type": "application/json"}
        answer = Twin().handle("POST", "/v1/chat/completions", headers, json.dumps(body).encode())
        assert answer.status == 200, answer.body
        return int(json.loads(answer.body)["usage"]["prompt_tokens"])

    url = "data:image/png;base64," + base64.b64encode(png(1024, 1024)).decode()
    text = {"type": "text", "text": "What is in the picture?"}
    extra = prompt_tokens([text, {"type": "image_url", "image_url": {"url": url}}]) - prompt_tokens([text])
    # The image's 765, plus its piece's own few bytes in the prompt ({"content": ...} and the line break).
    assert 765 <= extra <= 770
