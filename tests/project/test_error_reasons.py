"""The reasons segue's errors carry are the protocol schema's.

`segue.errors` sits at the bottom tier (generated code imports it through `_support`), so it cannot import the
generated Literals and spells them again; this test holds the two spellings to one list, value for value and in
order, so a reason added on one side (as recovery added three) cannot be missed on the other.
"""

from __future__ import annotations

from typing import get_args

from segue import errors
from segue.generated import protocol


def test_the_hand_written_reasons_are_the_schemas() -> None:
    assert get_args(errors.RunRefusalReason) == get_args(protocol.RunRefusalReason)
    assert get_args(errors.ReplayReason) == get_args(protocol.ReplayErrorReason)
