"""Context blocks: extra text for the model, placed where it keeps the cache warm.

`ContextBlock` is the generated type (schemas/runs.schema.json): `dynamic` blocks (the default) fold into the new
user message; `stable` blocks form a stable head after the system prompt, cached with it, so change them rarely.
"""

from __future__ import annotations

from collections.abc import Sequence

from segue.generated import ContextBlock


def is_stable(block: ContextBlock) -> bool:
    return block.placement == "stable"


def render(block: ContextBlock) -> str:
    label = f' source="{block.source}"' if block.source else ""
    return f"<context{label}>\n{block.text}\n</context>"


def render_stable_head(blocks: Sequence[ContextBlock]) -> str | None:
    stable = [render(b) for b in blocks if is_stable(b)]
    return "\n\n".join(stable) if stable else None


def fold_dynamic(blocks: Sequence[ContextBlock], user_input: str) -> str:
    """The user message as sent: dynamic context first, then the input."""
    dynamic = [render(b) for b in blocks if not is_stable(b)]
    return "\n\n".join([*dynamic, user_input]) if dynamic else user_input
