"""What Anthropic refuses in a prewarm (`max_tokens: 0`), checked before anything is sent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from segue._core.contracts import OutputFormat
from segue.errors import WireError
from segue.generated import ModelSettings
from segue.wire.settings import TOOL_CHOICE_MODES


def check_prewarmable(
    thinking: Mapping[str, Any] | None, thinks: bool, output: OutputFormat | None, settings: ModelSettings
) -> None:
    """Refuse, before anything is sent, a prewarm the vendor refuses: `max_tokens: 0` with thinking on or with
    structured outputs is a 400 (the prompt-caching page, "pre-warming the cache"). Sending the prefix without them
    would warm nothing the next run reads: both are part of the prefix the run sends (thinking and effort invalidate
    the message entries; the output format is in the request). A forced `tool_choice` is refused with it too; a
    prewarm is never streamed, the fourth."""
    refused = []
    auto, _, none = TOOL_CHOICE_MODES
    if settings.tool_choice not in (None, auto, none):
        refused.append(
            f"tool_choice {settings.tool_choice!r} (the vendor refuses a forced tool_choice with max_tokens: 0)"
        )
    if thinks:
        refused.append(f"thinking {dict(thinking or {})!r} (the vendor refuses thinking with max_tokens: 0)")
    if output is not None:
        refused.append("an output_type (structured outputs, output_config.format, are refused with max_tokens: 0)")
    if refused:
        raise WireError(
            f"Anthropic cannot prewarm this prefix: {'; '.join(refused)}, and the next run's prefix holds them. Send "
            "the next run without a prewarm (its first request writes the cache), or prewarm an agent configured "
            "without thinking, output_type and a forced tool_choice"
        )
