"""Issue 36: the images a tool call returned, journaled with its result (segue.store.tool_calls), so a recovered
round's tool message carries them (the kill-and-recover tests: tests/run/test_recovery_images.py). Written in the
result's transaction: a write the run's holder may not make leaves neither."""

from __future__ import annotations

import pytest

from segue.generated import Base64ImageSource, ImageBlock, ToolCallRecord, UrlImageSource
from segue.store import RunStore
from segue.store.leases import LeaseLost
from tests._support.store_rows import new_run, run_ids, user

PHOTO = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo="))
LINKED = ImageBlock(source=UrlImageSource(url="https://example.com/shelf.png"))


def result(call_id: str, iteration: int = 1) -> ToolCallRecord:
    return ToolCallRecord(
        call_id=call_id,
        iteration=iteration,
        name="snapshot",
        arguments={},
        result="ok",
        is_error=False,
        duration_ms=1.0,
    )


def test_a_finished_call_s_images_read_back_by_call(store: RunStore) -> None:
    (rid,) = run_ids(1)
    store.create_run(new_run(rid, lease_seconds=300, lease_owner="holder"), [user("q")])
    store.record_tool_call(rid, result("c1"), lease_seconds=300, owner="holder", images=[PHOTO, LINKED])
    store.record_tool_call(rid, result("c2"), lease_seconds=300, owner="holder")  # returned none
    store.record_tool_call(rid, result("c1", iteration=2), lease_seconds=300, owner="holder", images=[LINKED])
    assert store.tool_calls.images(rid, 1, ["c1", "c2", "c3"]) == {"c1": (PHOTO, LINKED)}
    assert store.tool_calls.images(rid, 2, ["c1"]) == {"c1": (LINKED,)}  # each iteration's call its own
    assert store.tool_calls.images(rid, 1, []) == {}
    detail = store.get_run(rid, tenant_id="t1")
    assert detail is not None and [c.result for c in detail.tool_calls] == ["ok", "ok", "ok"]


def test_a_refused_write_journals_neither_result_nor_images(store: RunStore) -> None:
    (rid,) = run_ids(1)
    store.create_run(new_run(rid, lease_seconds=300, lease_owner="holder"), [user("q")])
    before = store.counts()
    with pytest.raises(LeaseLost):
        store.record_tool_call(rid, result("c1"), lease_seconds=300, owner="another", images=[PHOTO])
    assert store.tool_calls.images(rid, 1, ["c1"]) == {}
    assert store.counts() == before
