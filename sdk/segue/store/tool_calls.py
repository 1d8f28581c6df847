"""A run's tool steps in the store (`RunStore.tool_calls`): each call's row (its start, then its result) and the
images a finished call returned, written inside the run store's transactions (segue.store.run_store).

A round's tool message (its results in the calls' order, then the images its tools returned) is stored with the
round's last result (segue.run.tool_calls). A call that finished before it has its text in its tool_calls row and its
images here: one part of the body store (`request_parts`, segue.store.bodies) per call, written in the same
transaction as the call's result. No column of the call's row can name that part (the schema stays as it is), so its
key derives from where the call is (the run, the iteration, the call id) rather than from its text; a key still
always names the same text, as a call's result, and so its images, is written once. Recovery and resume read them
back for the round in flight (segue.run.recovery), so the tool message they make is the uninterrupted run's, byte
for byte.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence

from segue.generated import ImageBlock, ToolCallRecord, get_converter
from segue.store.bodies import Bodies, part_key
from segue.store.connection import Units
from segue.store.models import Bound
from segue.store.rows import tool_row
from segue.store.statements import Statements


def images_key(run_id: str, iteration: int, call_id: str) -> str:
    """The part key of a call's images: a hash of where the call is, in the key space of the bodies' parts."""
    return part_key(json.dumps(["segue.tool_images", run_id, iteration, call_id]))


class ToolCalls:
    def __init__(self, models: Bound, bodies: Bodies, units: Units, writes: Statements) -> None:
        self.models = models
        self.bodies = bodies
        self.units = units
        self.writes = writes  # the store's per-step writes, their SQL made once

    def write(self, run_id: str, call: ToolCallRecord, images: Sequence[ImageBlock] = ()) -> None:
        """Inside a write: a call's result, into the row its start wrote (`starts`) or a new row, and the images it
        returned."""
        rows = self.models.ToolCallRow
        row = tool_row(run_id, call)
        started = {"run_id": run_id, "iteration": call.iteration, "call_id": call.call_id, "result": None}
        if not self.writes.update(rows, row, started):
            self.writes.insert(rows, [row])
        if images:
            unstructure = get_converter().unstructure
            text = json.dumps([unstructure(image, ImageBlock) for image in images], ensure_ascii=False)
            self.bodies.insert({images_key(run_id, call.iteration, call.call_id): text})

    def starts(self, run_id: str, calls: Sequence[ToolCallRecord]) -> None:
        """Inside a write: the rows of calls that are starting, without a result."""
        self.writes.insert(self.models.ToolCallRow, [{**tool_row(run_id, c), "result": None} for c in calls])

    def images(self, run_id: str, iteration: int, call_ids: Collection[str]) -> dict[str, tuple[ImageBlock, ...]]:
        """The images that those of `call_ids` (calls of the run's `iteration`) returned, by call id (a call that
        returned none is left out)."""
        keys = {images_key(run_id, iteration, c): c for c in call_ids}
        if not keys:
            return {}
        found = self.units.read(lambda: self.bodies.fetch(set(keys)))
        structure = get_converter().structure
        return {keys[k]: tuple(structure(i, ImageBlock) for i in json.loads(text)) for k, text in found.items()}
