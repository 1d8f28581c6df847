"""The context-window fit counts an image by its path's formula (catalog llm.image_tokens), not its base64 text.

Anthropic's "Images and vision" page: "tokens = (width px * height px)/750" (segue._core.image_tokens). A 200 x 200
image costs 54 tokens there, while its base64 is tens of kilobytes of text: counted as text, a run sending it
would be refused as too large for a window it fits easily.
"""

from __future__ import annotations

import base64
import struct
from pathlib import Path

from segue import Agent, RunStore
from segue.catalog import Catalog
from segue.generated import Base64ImageSource, ImageBlock, Message, TextBlock
from segue.providers import AnthropicProvider
from segue_twin import Twin
from tests._support.helpers import catalog_layer


def png(width: int, height: int, padding: int) -> bytes:
    """A PNG's signature and IHDR chunk, then ``padding`` bytes of image data the size reader never needs."""
    ihdr = struct.pack(">II", width, height) + bytes([8, 6, 0, 0, 0])
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\0\0\0\0" + b"\x07" * padding


def window(tmp_path: Path, tokens: int) -> Catalog:
    return catalog_layer(tmp_path, {"context_window": tokens}, file="window.json")


async def test_a_base64_image_counts_its_formulas_tokens_in_the_window_fit(store: RunStore, tmp_path: Path) -> None:
    data = base64.b64encode(png(200, 200, padding=30_000)).decode()  # ~10,000 tokens as text, 54 as an image
    image = ImageBlock(source=Base64ImageSource(media_type="image/png", data=data))
    history = [
        Message(role="user", content=[image, TextBlock(text="Here is the shop's logo.")]),
        Message(role="assistant", content=[TextBlock(text="Noted.")]),
    ]
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=Twin().anthropic_client()),  # max_tokens 4096
        "You answer briefly.",
        [],
        store,
        catalog=window(tmp_path, 5_700),
    )
    result = await agent.run("What colour is it?", history=history)
    assert result.status == "success", result.error
