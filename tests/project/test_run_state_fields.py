"""Each field of RunState, the run's shared bookkeeping, says why it is kept (issue 42: a comment each)."""

from __future__ import annotations

import ast

from tests._support.environment import REPO


def test_every_run_state_field_has_a_comment_above_it() -> None:
    path = REPO / "sdk" / "segue" / "run" / "state.py"
    lines = path.read_text(encoding="utf-8").splitlines()
    (cls,) = [n for n in ast.parse("\n".join(lines)).body if isinstance(n, ast.ClassDef) and n.name == "RunState"]
    fields = [
        (n.target.id, n.lineno) for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    ]
    assert len(fields) > 30, "the fields were not read"
    bare = [name for name, line in fields if not lines[line - 2].strip().startswith("#:")]
    assert bare == []
