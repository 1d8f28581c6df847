"""Anthropic's own context management on the wire: ModelSettings.context_editing and .compaction as
`context_management` edits with their betas, and what a response reports back about them.

- Context editing (`clear_tool_uses_20250919`, `clear_thinking_20251015`, beta `context-management-2025-06-27`):
  "Applied before the prompt reaches Claude" (the context-editing page), so the model sees the edited prompt and
  an applied edit moves the cached prefix; the response's `context_management.applied_edits` (the pinned SDK's
  BetaContextManagementResponse) says what was cleared, which becomes a run note.
- Compaction (`compact_20260112`, beta `compact-2026-01-12`): past the trigger ("Defaults to 150000 input
  tokens", the pinned SDK's BetaCompact20260112EditParam.trigger) the response carries a `compaction` block that
  later requests send back ("Users should round-trip these blocks from responses to subsequent requests",
  BetaCompactionBlockParam); its sampling is reported in `usage.iterations` and "A `compaction` entry's tokens are
  not included in the top-level `usage` fields" (BetaUsage.iterations), so segue prices those entries too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from segue.errors import WireError
from segue.generated import ClearThinking, ClearToolUses, ModelSettings, Usage
from segue.generated.wire import anthropic as g

#: The betas the two features need (schemas/wire/anthropic.json constants, with their sources).
EDITING_BETA = g.EDITING_BETA
COMPACTION_BETA = g.COMPACTION_BETA


def check_context_settings(settings: ModelSettings) -> None:
    """Refuse what the vendor would refuse or ignore: context editing with no strategy, a clear_tool_uses with two
    triggers (the pinned SDK's BetaClearToolUses20250919EditParam takes one `trigger`, input_tokens or tool_uses)."""
    editing = settings.context_editing
    if editing is None:
        return
    if editing.clear_tool_uses is None and editing.clear_thinking is None:
        raise WireError(
            "model_settings.context_editing names no strategy; set clear_tool_uses and/or clear_thinking (for "
            "example ContextEditing(clear_tool_uses=ClearToolUses())), or leave context_editing unset"
        )
    uses = editing.clear_tool_uses
    if uses is not None and uses.trigger_tokens is not None and uses.trigger_tool_uses is not None:
        raise WireError(
            f"model_settings.context_editing.clear_tool_uses sets both trigger_tokens={uses.trigger_tokens} and "
            f"trigger_tool_uses={uses.trigger_tool_uses}; Anthropic takes one trigger: keep one of them"
        )


def context_management(settings: ModelSettings) -> tuple[Any, list[str]]:
    """The `context_management` value for the settings (None without any) and the betas it needs."""
    edits: list[Any] = []
    betas: list[str] = []
    editing = settings.context_editing
    if editing is not None:
        if editing.clear_thinking is not None:
            edits.append(_clear_thinking(editing.clear_thinking))
        if editing.clear_tool_uses is not None:
            edits.append(_clear_tool_uses(editing.clear_tool_uses))
        betas.append(EDITING_BETA)
    compaction = settings.compaction
    if compaction is not None:
        trigger = compaction.trigger_tokens
        edits.append(
            g.compact(
                trigger=None if trigger is None else g.input_tokens_count(value=trigger),
                pause_after_compaction=compaction.pause_after,
                instructions=compaction.instructions,
            )
        )
        betas.append(COMPACTION_BETA)
    if not edits:
        return None, []
    return g.context_management(edits=edits), betas


def _clear_tool_uses(uses: ClearToolUses) -> Any:
    tokens, count = uses.trigger_tokens, uses.trigger_tool_uses
    trigger = (
        g.input_tokens_count(value=tokens)
        if tokens is not None
        else (None if count is None else g.tool_uses_count(value=count))
    )
    return g.clear_tool_uses(
        trigger=trigger,
        keep=None if uses.keep_tool_uses is None else g.tool_uses_count(value=uses.keep_tool_uses),
        clear_at_least=None
        if uses.clear_at_least_tokens is None
        else g.input_tokens_count(value=uses.clear_at_least_tokens),
        exclude_tools=list(uses.exclude_tools) if uses.exclude_tools is not None else None,
        clear_tool_inputs=uses.clear_tool_inputs,
    )


def _clear_thinking(thinking: ClearThinking) -> Any:
    keep = thinking.keep_turns
    if keep is None:
        return g.clear_thinking()
    # keep_turns is a number of turns or the schema's one word, all
    return g.clear_thinking(
        keep=g.thinking_turns_count(value=keep) if isinstance(keep, int) else g.all_thinking_turns()
    )


def compaction_usage(iterations: Sequence[g.Iteration] | None) -> list[Usage]:
    """The usage of each compaction iteration in `usage.iterations`, as canonical Usage (input_tokens the whole
    prompt of that sampling, cached parts included, as every canonical Usage counts it)."""
    return [g.parse_usage(it.usage) for it in iterations or () if it.kind == g.COMPACTION_ITERATION]
