"""A stored OpenRouter request read back: OpenRouter takes Chat Completions messages (its cache markers and
`reasoning_details` ride on them), so its messages read as Chat Completions' do; the dispatcher is
segue.wire.stored."""

from __future__ import annotations

from segue.wire.openai_chat.stored import read_message

__all__ = ["read_message"]
