"""Generated classes check their own fields (segue._support.checks, emitted by codegen/pytypes.py from each
property's schema): type, bounds, enum, pattern and items, with a message naming the class, the field (the item's
index), what it must be, the property's `title` as a gloss, and the value refused."""

from __future__ import annotations

from typing import Any

import pytest
from cattrs.errors import ClassValidationError

from segue.errors import FieldError, InputError
from segue.generated import Compaction, CompactionRef, ModelSettings, ReplayKnobs, get_converter

KNOBS: dict[str, Any] = {"runs": ["01JH8Z6Q4W5X2N3P7R9T0V1B2C"], "replay_last": "all", "replay_reasoning": True}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        # type: a bool is not a whole number, a str not a bool (JSON's rules, not Python's)
        (
            lambda: ReplayKnobs(**{**KNOBS, "replay_step": True}),
            "ReplayKnobs.replay_step must be a whole number >= 1 "
            r"\(how many runs the window moves at once\), got True \(bool\)$",
        ),
        (lambda: ReplayKnobs(**{**KNOBS, "replay_reasoning": "yes"}), "replay_reasoning must be True or False"),
        # minimum, and a float that is a whole number is told what to pass
        (lambda: ReplayKnobs(**{**KNOBS, "replay_keep": 2.0}), r"replay_keep must be .*got 2.0 \(float\); pass 2$"),
        (
            lambda: CompactionRef(run_id="r", runs=0, first="a", last="b"),
            "CompactionRef.runs must be a whole number >= 1",
        ),
        # a union of an int and a const
        (lambda: ReplayKnobs(**{**KNOBS, "replay_last": -1}), r"replay_last must be a whole number >= 0 or 'all' \("),
        # pattern, inside a list: the item is named by its index
        (
            lambda: ReplayKnobs(**{**KNOBS, "runs": [KNOBS["runs"][0], "run-2"]}),
            r"ReplayKnobs.runs\[1\] must be a "
            r"string matching '\^\[0-7\].*' \(run ids as stored: ULIDs.*got 'run-2'",
        ),
        (lambda: ReplayKnobs(**{**KNOBS, "runs": tuple(KNOBS["runs"])}), "runs must be a list of strings matching"),
        # maximum and minimum together; a number is finite
        (lambda: ModelSettings(top_p=1.5), r"ModelSettings.top_p must be a number from 0 to 1, got 1.5 \(float\)$"),
        (lambda: ModelSettings(temperature=float("nan")), "temperature must be a finite number >= 0, got nan"),
        (lambda: ModelSettings(max_tokens=2**53), "max_tokens must be a whole number from 1 to 9,007,199,254,740,991"),
        # enum, minLength, list items
        (lambda: ModelSettings(reasoning_effort="extreme"), "reasoning_effort must be one of 'none', 'minimal'"),
        (lambda: ModelSettings(tool_choice=""), r"tool_choice must be a non-empty string \(auto, required, none or"),
        (lambda: ModelSettings(stop=["END", ""]), r"stop\[1\] must be a non-empty string, got ''"),
        (lambda: Compaction(every=0), r"Compaction.every must be a whole number >= 1 \(runs that follow a compaction"),
        (lambda: Compaction(every=1, instruction="  "), "instruction must be a non-empty string matching"),
    ],
)
def test_a_bad_value_is_refused_by_its_class_naming_field_and_value(make: Any, message: str) -> None:
    with pytest.raises(FieldError, match=message) as refused:
        make()
    assert isinstance(refused.value, InputError) and isinstance(refused.value, ValueError)
    assert refused.value.problem.startswith(refused.value.field)
    assert str(refused.value) == f"{refused.value.owner}.{refused.value.problem}"


def test_good_values_pass_and_optional_fields_take_none() -> None:
    knobs = ReplayKnobs(**{**KNOBS, "replay_last": 0, "replay_budget_tokens": None, "replay_step": 2})
    assert knobs.replay_step == 2
    assert ModelSettings(top_p=1, temperature=0, stop=["###"], seed=-(2**53 - 1)).seed == -(2**53 - 1)
    assert Compaction(trigger_tokens=5000, instruction=" summarize ").every is None


def test_structuring_json_runs_the_same_checks() -> None:
    """The converter constructs the class, so what a JSON-RPC client sends is checked by the same validators."""
    with pytest.raises(ClassValidationError) as refused:
        get_converter().structure({**KNOBS, "replay_keep": 0}, ReplayKnobs)
    (cause,) = refused.value.exceptions
    assert isinstance(cause, FieldError) and cause.problem.startswith("replay_keep must be a whole number >= 1")


class _Text(str):
    """A str subclass: not the exact type the quick path takes, so `problem` decides."""


def test_a_shapes_quick_path_passes_only_what_its_full_check_passes() -> None:
    """`Shape.fits` is how most values are checked (one call, no label built); it must never let through a value
    the full check refuses. Every shape with a quick path, over values of every JSON kind and their edges."""
    from segue._support import checks as c

    shapes = [
        c.string(),
        c.string(min_len=1),
        c.boolean(),
        c.one_of(("system", "user")),
        c.one_of((1, "1")),
        c.anything(),
        c.list_of(c.anything()),
        c.list_of(c.string(min_len=1), min_items=1),
        c.list_of(c.integer(minimum=0)),
        c.map_of(c.string()),
        c.map_of(c.anything()),
    ]
    values: list[Any] = [
        "", "a", "user", "1", _Text("user"), 0, 1, -1, True, False, 1.0, float("nan"), None, [], [""], ["a"],
        ["a", 1], [0, 1], [True], ("a",), {}, {"k": "v"}, {"k": 1}, {1: "v"},
    ]  # fmt: skip
    checked = 0
    for shape in shapes:
        for value in values:
            if shape.fits is not None and shape.fits(value):
                checked += 1
                assert shape.problem("v", value) is None, (shape.expected, value)
    assert checked > 20  # the quick paths did pass values, so the implication was tested
