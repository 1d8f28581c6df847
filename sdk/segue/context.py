"""ContextBlock: extra text for the model, placed where it keeps the cache warm."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs

Placement = Literal["dynamic", "stable"]


@attrs.frozen
class ContextBlock:
    """`dynamic` blocks fold into the new user message; `stable` blocks form a stable head after the system
    prompt (cached with it, so change them rarely)."""

    text: str = attrs.field(validator=attrs.validators.instance_of(str))
    placement: Placement = attrs.field(default="dynamic", validator=attrs.validators.in_(("dynamic", "stable")))
    source: str | None = None

    def render(self) -> str:
        label = f' source="{self.source}"' if self.source else ""
        return f"<context{label}>\n{self.text}\n</context>"


def render_stable_head(blocks: Sequence[ContextBlock]) -> str | None:
    stable = [b.render() for b in blocks if b.placement == "stable"]
    return "\n\n".join(stable) if stable else None


def fold_dynamic(blocks: Sequence[ContextBlock], user_input: str) -> str:
    """The user message as sent: dynamic context first, then the input."""
    dynamic = [b.render() for b in blocks if b.placement == "dynamic"]
    return "\n\n".join([*dynamic, user_input]) if dynamic else user_input
