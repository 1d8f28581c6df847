"""What an Anthropic response reports about the prompt the model saw: thinking blocks the vendor dropped (block
binding's `input_transformations`) and the context edits it applied (`context_management.applied_edits`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from segue._core.contracts import ProviderNote
from segue.generated.wire import anthropic as g


def binding_notes(
    transformations: list[dict[str, Any]], reported: bool, origins: Mapping[str, int]
) -> list[ProviderNote]:
    if not reported:
        return [
            ProviderNote(
                kind="unconfirmed",
                message="anthropic did not report input_transformations although thinking block binding was "
                "requested; whether it dropped replayed thinking blocks is unknown",
            )
        ]
    notes = []
    for t in transformations:
        dropped = g.parse_input_transformation(t)
        if isinstance(dropped, g.ThinkingDropped):
            notes.append(
                ProviderNote(
                    kind="vendor-dropped",
                    message=f"anthropic dropped the thinking block at {dropped.path} ({dropped.reason}): the model "
                    "did not see it",
                    message_index=origins.get(str(dropped.path)),
                )
            )
    return notes


def applied_edit_notes(applied: Sequence[g.AppliedEdit] | None) -> list[ProviderNote]:
    """One note per edit the response's `context_management.applied_edits` reports (what the model did not see)."""
    notes = []
    for edit in applied or ():
        uses = "" if edit.cleared_tool_uses is None else f" {edit.cleared_tool_uses} tool uses,"
        notes.append(
            ProviderNote(
                kind="context-edited",
                message=f"anthropic applied {edit.kind}: cleared{uses} {edit.cleared_input_tokens} "
                "input tokens before the prompt reached the model, so the model did not see them and the cached "
                "prefix moved to the edited prompt",
            )
        )
    return notes
