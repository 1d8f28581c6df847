"""The app's own types (issue 26, point 6): pydantic models as output_type and tool parameters, dataclasses,
TypedDicts, enums, dates and `Annotated` constraints as tool parameters.

Each type's schema is asserted exactly (descriptions and constraints included, every object closed and every field
required, as strict modes need), the values the model sends are converted back to the types before the tool runs
(or the answer is returned), the schemas are byte-identical across processes, and pydantic is never imported by
segue itself: a plain agent runs without it in sys.modules.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any

import annotated_types as at
import pytest
from pydantic import BaseModel, Field, field_validator
from typing_extensions import TypedDict

from segue import Agent, tool
from segue._core.json_types import from_json, output_spec
from segue.providers import AnthropicProvider
from segue.testing import ScriptedProvider, call, text
from segue_twin import Twin
from segue_twin.scripted import ScriptedPolicy

REPO = Path(__file__).resolve().parents[2]


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Level(enum.IntEnum):
    ONE = 1
    TWO = 2


@dataclasses.dataclass
class Window:
    start: datetime.date
    end: datetime.date


class Address(TypedDict):
    city: str
    zip: Annotated[str, at.MinLen(4), at.MaxLen(10)]


class Customer(BaseModel):
    name: str = Field(description="Full name")
    age: Annotated[int, Field(ge=18, lt=130)]
    email: str | None = Field(default=None, pattern=r"^[^@]+@[^@]+$")
    address: Address

    @field_validator("name")
    @classmethod
    def no_digits(cls, value: str) -> str:
        if any(ch.isdigit() for ch in value):
            raise ValueError("a name has no digits")
        return value


CUSTOMER_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Full name"},
        "age": {"type": "integer", "minimum": 18, "exclusiveMaximum": 130},
        "email": {"anyOf": [{"type": "string", "pattern": r"^[^@]+@[^@]+$"}, {"type": "null"}]},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string", "minLength": 4, "maxLength": 10}},
            "required": ["city", "zip"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "age", "email", "address"],
    "additionalProperties": False,
}


def test_a_pydantic_model_becomes_a_closed_strict_schema_with_its_descriptions_and_constraints() -> None:
    spec = output_spec(Customer)
    assert spec.schema == CUSTOMER_SCHEMA
    assert spec.format.name == "Customer" and spec.format.strict is True and spec.target is Customer


def test_an_answer_is_validated_back_into_the_model_and_its_validators_run() -> None:
    spec = output_spec(Customer)
    good = {"name": "Ada", "age": 36, "email": None, "address": {"city": "Berlin", "zip": "10115"}}
    value, error = spec.check(good)
    assert error is None and isinstance(value, Customer) and value.address == {"city": "Berlin", "zip": "10115"}
    # A constraint the schema carries is named by its JSON path...
    assert spec.check({**good, "age": 12}) == (None, "at $.age: 12 is less than the minimum of 18")
    # ...and a pydantic validator the schema cannot carry still runs (pydantic's own model_validate).
    value, error = spec.check({**good, "name": "Ada 2"})
    assert value is None and error is not None and "a name has no digits" in error


async def test_a_pydantic_output_type_reaches_result_output_as_the_model_instance() -> None:
    answer = {"name": "Ada", "age": 36, "email": "ada@example.org", "address": {"city": "Berlin", "zip": "10115"}}
    twin = Twin(policy=ScriptedPolicy([json.dumps(answer)]))
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=twin.anthropic_client()), "You extract.")
    result = await agent.run("Ada, 36, ada@example.org, Berlin 10115", output_type=Customer)
    assert result.status == "success" and result.output == Customer.model_validate(answer)
    assert twin.exchanges[-1].request["output_config"]["format"]["schema"] == CUSTOMER_SCHEMA


def test_tool_parameters_take_models_dataclasses_typeddicts_enums_dates_and_constraints() -> None:
    @tool
    def book(
        customer: Customer,
        window: Window,
        priority: Priority,
        level: Level,
        at_time: datetime.datetime,
        seats: Annotated[int, Field(ge=1, le=9, description="How many seats")],
        ratio: Annotated[float, at.Interval(gt=0, le=1), at.MultipleOf(0.25)] = 0.5,
        tags: Annotated[list[str], at.Len(1, 3)] | None = None,
        fallback: Priority = Priority.LOW,
    ) -> str:
        """Book a table.

        Args:
            seats: Seats at the table.
        """
        return "ok"

    props = book.parameters["properties"]
    assert props["customer"] == CUSTOMER_SCHEMA
    assert props["window"] == {
        "type": "object",
        "properties": {"start": {"type": "string", "format": "date"}, "end": {"type": "string", "format": "date"}},
        "required": ["start", "end"],
        "additionalProperties": False,
    }
    assert props["priority"] == {"type": "string", "enum": ["low", "high"]}
    assert props["level"] == {"type": "integer", "enum": [1, 2]}
    assert props["at_time"] == {"type": "string", "format": "date-time"}
    # The docstring's description wins over Field's; Field's constraints stay.
    assert props["seats"] == {"type": "integer", "minimum": 1, "maximum": 9, "description": "Seats at the table."}
    assert props["ratio"] == {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1,
        "multipleOf": 0.25,
        "default": 0.5,
    }
    assert props["tags"] == {
        "anyOf": [{"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}, {"type": "null"}],
        "default": None,
    }
    assert props["fallback"] == {"type": "string", "enum": ["low", "high"], "default": "low"}
    assert book.parameters["required"] == ["customer", "window", "priority", "level", "at_time", "seats"]


async def test_tool_arguments_are_converted_back_into_the_types_before_the_call() -> None:
    received: dict[str, Any] = {}

    @tool
    def book(customer: Customer, window: Window, priority: Priority, at_time: datetime.datetime) -> str:
        """Book a table."""
        received.update(customer=customer, window=window, priority=priority, at_time=at_time)
        return "booked"

    arguments = {
        "customer": {"name": "Ada", "age": 36, "email": None, "address": {"city": "Berlin", "zip": "10115"}},
        "window": {"start": "2026-12-24", "end": "2026-12-26"},
        "priority": "high",
        "at_time": "2026-12-24T19:30:00+01:00",
    }
    provider = ScriptedProvider.of(call("book", arguments), text("Booked."))
    result = await Agent(provider, "You book.", [book]).run("Book for Ada")
    assert result.status == "success"
    assert received == {
        "customer": Customer.model_validate(arguments["customer"]),
        "window": Window(datetime.date(2026, 12, 24), datetime.date(2026, 12, 26)),
        "priority": Priority.HIGH,
        "at_time": datetime.datetime(2026, 12, 24, 19, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=1))),
    }
    assert type(received["customer"]) is Customer


async def test_arguments_that_do_not_convert_are_an_error_result_the_model_sees() -> None:
    calls: list[Any] = []

    @tool
    def remind(on: datetime.date, customer: Customer) -> str:
        """Set a reminder."""
        calls.append(on)
        return "ok"

    customer = {"name": "Ada", "age": 36, "email": None, "address": {"city": "Berlin", "zip": "10115"}}
    bad_date = await remind.invoke("c1", {"on": "24.12.2026", "customer": customer})
    bad_name = await remind.invoke("c2", {"on": "2026-12-24", "customer": {**customer, "name": "Ada 2"}})
    below = await remind.invoke("c3", {"on": "2026-12-24", "customer": {**customer, "age": 3}})
    assert bad_date.result.is_error and bad_date.result.content.startswith("invalid arguments for remind: ")
    assert "24.12.2026" in bad_date.result.content
    assert bad_name.result.is_error and "a name has no digits" in bad_name.result.content
    assert below.result.is_error and "customer/age: 3 is less than the minimum of 18" in below.result.content
    assert calls == []


@pytest.mark.parametrize(
    ("annotation", "says"),
    [
        (Annotated[int, at.Predicate(lambda v: v % 2 == 0)], "cannot describe the constraint Predicate"),
        (Annotated[str, at.Ge(1)], "the constraint Ge(ge=1) applies to a number, not to a value of JSON type 'string'"),
        (Annotated[int, Field(strict=True, max_digits=3)], "cannot describe the constraint(s) ['max_digits']"),
        (enum.Enum("Mixed", {"A": "a", "B": 2}), "the values of Enum Mixed must be all strings or all"),
    ],
)
def test_a_constraint_or_type_json_schema_cannot_say_is_refused_naming_the_argument(annotation: Any, says: str) -> None:
    def f(x: Any) -> None: ...

    f.__annotations__["x"] = annotation
    with pytest.raises(TypeError, match=r"tool argument f\(x\)") as caught:
        tool(f)
    assert says in str(caught.value)


def test_plain_tool_schemas_do_not_change() -> None:
    """The types tools took before keep their exact schemas, so the tool hashes of existing agents do not move."""

    @tool
    def lookup(sku: str, qty: int = 1, mode: str | None = None, tags: list[str] | None = None) -> str:
        """Look up a product."""
        return sku

    assert lookup.parameters == {
        "type": "object",
        "properties": {
            "sku": {"type": "string"},
            "qty": {"type": "integer", "default": 1},
            "mode": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": None},
        },
        "required": ["sku"],
        "additionalProperties": False,
    }


def test_from_json_passes_plain_values_through_unchanged() -> None:
    value = {"a": [1, 2]}
    assert from_json(value, dict[str, list[int]]) is value
    assert from_json(["x"], Annotated[list[str], at.MinLen(1)]) == ["x"]


TYPES_MODULE = """
import dataclasses, datetime, enum
from typing import Annotated
import annotated_types as at
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

class Mode(enum.Enum):
    Z = "z"
    A = "a"

class Spot(TypedDict):
    zeta: Annotated[float, at.Interval(ge=-90, le=90)]
    alpha: Annotated[float, Field(ge=-180, le=180, description="longitude")]

@dataclasses.dataclass
class Leg:
    when: datetime.datetime
    spot: Spot

class Trip(BaseModel):
    zz: list[Leg] = Field(description="the legs", min_length=1)
    aa: Mode
    mm: str | None = None
"""


def test_schemas_are_byte_identical_across_processes(tmp_path: Path) -> None:
    """The same types give the same tool definition and output format, byte for byte, in every process: the tool
    hashes and prefixes that depend on them do not move."""
    (tmp_path / "trip_types.py").write_text(TYPES_MODULE)
    code = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, sys.argv[1])
        from trip_types import Trip, Leg, Mode
        from segue import tool
        from segue._core.hashing import canonical_json
        from segue._core.json_types import output_spec
        from segue.generated import get_converter

        @tool
        def plan(trip: Trip, first: Leg, mode: Mode = Mode.A) -> str:
            '''Plan a trip.'''
            return ""

        definition = get_converter().unstructure(plan.definition)
        print(canonical_json(definition))
        print(output_spec(Trip).hash)
        """
    )
    outputs = [
        subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        ).stdout
        for seed in ("1", "2")
    ]
    assert outputs[0] == outputs[1]
    definition, digest = outputs[0].splitlines()
    assert digest.startswith("sha256:")
    parsed = json.loads(definition)
    assert parsed["parameters"]["properties"]["trip"]["properties"]["zz"]["minItems"] == 1
    assert parsed["parameters"]["properties"]["first"]["properties"]["spot"]["properties"]["alpha"] == {
        "type": "number",
        "minimum": -180,
        "maximum": 180,
        "description": "longitude",
    }


def test_segue_never_imports_pydantic_itself() -> None:
    """pydantic is the app's (and the vendor SDKs'): importing segue and running a plain agent with tools and
    structured output leaves it out of sys.modules."""
    code = textwrap.dedent(
        """
        import asyncio, dataclasses, sys
        import segue
        from segue import Agent, tool
        from segue.testing import ScriptedProvider, call, text

        @dataclasses.dataclass
        class Answer:
            n: int

        @tool
        def count(word: str) -> int:
            '''Count.'''
            return len(word)

        provider = ScriptedProvider.of(call("count", {"word": "abc"}), text('{"n": 3}'))
        result = asyncio.run(Agent(provider, "p", [count], output_type=Answer).run("count abc"))
        assert result.output == Answer(3), result
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pydantic_core", "annotated_types")))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


async def test_a_tool_may_return_the_apps_types_as_json() -> None:
    @tool
    def profile(name: str) -> Customer:
        """A customer's profile."""
        return Customer(name=name, age=36, address={"city": "Berlin", "zip": "10115"})

    @tool
    def window(priority: Priority) -> list[Window]:
        """Open windows."""
        return [Window(datetime.date(2026, 12, 24), datetime.date(2026, 12, 26))]

    shown = await profile.invoke("c1", {"name": "Ada"})
    assert json.loads(shown.result.content) == {
        "name": "Ada",
        "age": 36,
        "email": None,
        "address": {"city": "Berlin", "zip": "10115"},
    }
    listed = await window.invoke("c2", {"priority": "low"})
    assert json.loads(listed.result.content) == [{"start": "2026-12-24", "end": "2026-12-26"}]
    # compact JSON, the way pydantic and PydanticAI send it: no spaces after "," and ":"
    assert listed.result.content == '[{"start":"2026-12-24","end":"2026-12-26"}]'
    assert not shown.result.is_error and not listed.result.is_error


async def test_a_pydantic_field_as_a_parameter_default_gives_its_constraints_and_its_default() -> None:
    """`x: int = Field(default=3, ge=1)` (pydantic's spelling): the schema has the constraint and the default, and
    an argument the model leaves out gets the default, not the FieldInfo Python would pass."""
    got: list[Any] = []

    @tool
    def page(
        query: str,
        size: int = Field(default=3, ge=1, description="Rows"),
        tags: list[str] = Field(default_factory=list),  # noqa: B008 - pydantic's spelling of a default
    ) -> str:
        """Search."""
        got.append((size, tags))
        return "ok"

    assert page.parameters["properties"]["size"] == {
        "type": "integer",
        "minimum": 1,
        "description": "Rows",
        "default": 3,
    }
    assert page.parameters["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert page.parameters["required"] == ["query"]
    await page.invoke("c1", {"query": "x"})
    refused = await page.invoke("c2", {"query": "x", "size": 0})
    assert (
        got == [(3, [])]
        and refused.result.is_error
        and "size: 0 is less than the minimum of 1" in refused.result.content
    )
