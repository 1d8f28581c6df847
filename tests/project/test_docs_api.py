"""docs/api.md keeps up with the runtime surface: every event type has its row in the events table and every
public method of Agent is documented (the types' fields are generated from the schemas: codegen --check)."""

from __future__ import annotations

import inspect
import re
from typing import get_args

from segue import Agent
from segue.generated import RunEventType, RunNoteKind
from tests._support.environment import REPO

PAGE = (REPO / "docs" / "api.md").read_text(encoding="utf-8")


def test_every_event_type_has_a_row_in_the_events_table() -> None:
    rows = re.findall(r"^\| `([A-Z_]+)` \|", PAGE, re.M)
    assert rows == list(get_args(RunEventType))


def test_every_public_agent_method_is_documented() -> None:
    public = [n for n, v in inspect.getmembers(Agent) if not n.startswith("_") and callable(v)]
    assert {"run", "run_sync", "stream", "retry", "resume", "resume_stream"} <= set(public)
    missing = [n for n in public if f"{n}(" not in PAGE]
    assert missing == []


def test_every_cache_note_kind_is_explained() -> None:
    cache_kinds = [k for k in get_args(RunNoteKind) if k.startswith("cache-")]
    assert len(cache_kinds) == 3
    for kind in cache_kinds:
        assert f"`{kind}` (" in PAGE
