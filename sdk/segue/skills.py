"""Skill: named instructions rendered into the system prompt in a stable order."""

from __future__ import annotations

from collections.abc import Sequence

import attrs


@attrs.frozen
class Skill:
    name: str = attrs.field(validator=attrs.validators.min_len(1))
    instructions: str = attrs.field(validator=attrs.validators.instance_of(str))


def render_system(prompt: str, skills: Sequence[Skill]) -> str:
    """Prompt, then skills sorted by name: the same set always renders to the same bytes."""
    names = [s.name for s in skills]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"skills must have unique names; repeated: {duplicates}")
    parts = [prompt.rstrip()]
    for skill in sorted(skills, key=lambda s: s.name):
        parts.append(f"## Skill: {skill.name}\n{skill.instructions.strip()}")
    return "\n\n".join(p for p in parts if p)
