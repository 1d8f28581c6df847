"""Schemas from outside cannot stall the process (issue 35, R3).

A client-chosen `output_type` whose `oneOf` branches are identical references to the next link of a chain made
jsonschema's work double per link: 0.4 / 4.8 / 21 / 85 s per check at 10 / 14 / 16 / 18 links, and in `serve`
eight such runs held the default executor, so a `runs/list` (a store read in that executor) took 58 s.

Now such a schema is refused when it is taken (`segue._core.schema_work.MAX_APPLICATIONS`, measured on the schema,
never by validating), every validation runs under a budget (MAX_VALIDATION_STEPS keyword checks,
VALIDATION_SECONDS) that stops it naming the budget, and validations run on threads of their own.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from mcp.types import Tool as McpTool

from segue import Agent, RunStore
from segue._core import json_types, schema_work
from segue._core.contracts import FINAL_ANSWER_TOOL
from segue._core.json_schema import local_validator
from segue._core.schema_work import MAX_APPLICATIONS, MAX_VALIDATION_STEPS
from segue.errors import InputError, ToolSourceError
from segue.mcp.definitions import build_definitions
from segue.testing import ScriptedProvider, call, text
from segue.tools import Tool


def doubling_chain(links: int) -> dict[str, Any]:
    """The probe's schema: each link a oneOf of two identical references to the next one (a linear document
    whose validation doubles per link)."""
    defs: dict[str, Any] = {"l0": {"type": "object"}}
    for i in range(1, links + 1):
        defs[f"l{i}"] = {"type": "object", "oneOf": [{"$ref": f"#/$defs/l{i - 1}"}, {"$ref": f"#/$defs/l{i - 1}"}]}
    return {"type": "object", "$defs": defs, "$ref": f"#/$defs/l{links}"}


#: The same doubling, one level of the value per link: {"a": {"a": ...}} checked against both branches at each.
DOUBLING_PER_LEVEL = {
    "type": "object",
    "oneOf": [{"properties": {"a": {"$ref": "#"}}}, {"properties": {"a": {"$ref": "#"}}}],
}
#: A discriminated union of 30 variants: fine for a schema, 150 keyword checks per item of `xs`.
UNION = {
    "type": "object",
    "properties": {
        "xs": {
            "type": "array",
            "items": {
                "oneOf": [{"type": "object", "properties": {"k": {"const": i}}, "required": ["k"]} for i in range(30)]
            },
        }
    },
    "required": ["xs"],
}


@pytest.mark.parametrize(
    ("schema", "depth"),
    [(doubling_chain(18), 0), (doubling_chain(30), 0), (DOUBLING_PER_LEVEL, 9)],
    ids=["chain-18", "chain-30", "per-value-level"],
)
async def test_a_schema_whose_validation_multiplies_is_refused_when_taken_naming_the_limit(
    schema: dict[str, Any], depth: int
) -> None:
    """On main: taken (the chain after minutes of probing it), then every check of an answer took as long."""
    message = (
        f"output_type: the schema cannot be used: validating a value against it would apply more than "
        f"{MAX_APPLICATIONS:,} subschemas at one place {depth} level(s) down in the value"
    )
    store = RunStore("sqlite:///:memory:")
    with pytest.raises(InputError, match=r"segue\._core\.schema_work\.MAX_APPLICATIONS") as raised:
        Agent(provider=ScriptedProvider.of(text("{}")), store=store, output_type=schema)
    assert str(raised.value).startswith(message), raised.value
    agent = Agent(provider=ScriptedProvider.of(text("{}")), store=store)
    with pytest.raises(InputError, match="MAX_APPLICATIONS"):
        await agent.run("hi", output_type=schema)
    events = [e async for e in agent.stream("hi", output_type=schema)]
    assert [e.type for e in events] == ["RUN_ERROR"] and "MAX_APPLICATIONS" in str(events[0].error)
    with pytest.raises(InputError, match=r"tool t parameters: the schema cannot be used: .*MAX_APPLICATIONS"):
        Tool(name="t", description="d", parameters=schema, fn=lambda **kw: kw)
    with pytest.raises(ToolSourceError, match=r"tool 't' has an input schema .*MAX_APPLICATIONS"):
        build_definitions("docs", [McpTool(name="t", inputSchema=schema)], None)
    assert store.list_runs() == []


def test_the_bound_counts_per_key_so_recursive_and_wide_schemas_are_taken() -> None:
    """What is refused is multiplication at one place, not size: a tree whose properties all refer back to the
    root, 500 properties that do, the draft 2020-12 meta-schema (recursive through $dynamicRef) and a chain of 12 links
    of one reference each are taken; a oneOf of two distinct branches that multiply is refused."""
    tree = {"type": "object", "properties": {"left": {"$ref": "#"}, "right": {"$ref": "#"}, "kids": {"items": {}}}}
    tree["properties"]["kids"]["items"] = {"$ref": "#"}
    wide = {"type": "object", "properties": {f"p{i}": {"$ref": "#"} for i in range(500)}}
    meta = {"type": "object", "properties": {"schema": {"$ref": "https://json-schema.org/draft/2020-12/schema"}}}
    single = {"type": "object", "$defs": {"l0": {"type": "object"}}, "$ref": "#/$defs/l12"}
    for i in range(1, 13):
        single["$defs"][f"l{i}"] = {"oneOf": [{"$ref": f"#/$defs/l{i - 1}"}]}
    for schema in (tree, wide, meta, single, UNION):
        local_validator(schema, "output_type")
    assert local_validator(tree, "t").is_valid({"left": {"right": {"kids": [{}, {"left": {}}]}}})
    with pytest.raises(InputError, match="MAX_APPLICATIONS"):
        local_validator(doubling_chain(11), "output_type")  # 3 x 2**11 applications at the root


def test_a_schema_that_refers_to_itself_in_place_is_refused_even_where_no_sample_value_reaches_the_loop() -> None:
    """On main a loop behind `if` was taken (no sample value reached it) and ran into a RecursionError later."""
    schema = {"type": "object", "if": {"type": "object", "required": ["loop"]}, "then": {"$ref": "#"}}
    with pytest.raises(InputError, match=r"output_type: the schema refers to itself"):
        local_validator(schema, "output_type")


async def test_a_validation_past_its_budget_is_cut_off_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A schema within the bound and a large value: the check stops at MAX_VALIDATION_STEPS, in the run's error,
    in a tool's error result and in the final-answer tool's; on main each was checked to the end. (The clock's
    budget is set out of reach: on a loaded machine it could stop the check first.)"""
    monkeypatch.setattr(schema_work, "VALIDATION_SECONDS", 600.0)
    answer = {"xs": [{"k": 29}] * 1000}  # 1,000 items x 121 keyword checks each: past 100,000
    budget = f"stopped after {MAX_VALIDATION_STEPS:,} schema keyword checks"
    store = RunStore("sqlite:///:memory:")
    agent = Agent(
        provider=ScriptedProvider.of(text(json.dumps(answer))), store=store, output_type=UNION, output_repairs=0
    )
    result = await agent.run("hi")
    assert result.status == "error" and budget in (result.error or ""), result.error
    assert "MAX_VALIDATION_STEPS" in (result.error or "")
    tool = Tool(name="t", description="d", parameters=UNION, fn=lambda **kw: "ran")
    outcome = await tool.invoke("c1", answer)
    assert outcome.result.is_error and budget in outcome.result.content, outcome.result.content
    final = Agent(
        provider=ScriptedProvider.of(call(FINAL_ANSWER_TOOL, answer)), store=store, output_type=UNION, output_repairs=0
    )
    result = await final.run("hi")
    assert result.status == "error" and budget in (result.error or ""), result.error
    # Within the budget the same schema takes the answer.
    small = {"xs": [{"k": 29}] * 20}
    ok = Agent(provider=ScriptedProvider.of(text(json.dumps(small))), store=store, output_type=UNION)
    assert (await ok.run("hi")).output == small


def test_the_clock_budget_names_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema_work, "VALIDATION_SECONDS", 0.0)
    spec = json_types.output_spec(UNION)
    value, error = spec.check({"xs": [{"k": 29}] * 20})
    assert value is None and error is not None
    assert "stopped after 0 s" in error and "segue._core.schema_work.VALIDATION_SECONDS" in error, error


async def test_validations_never_wait_for_or_hold_the_stores_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's calls run in the event loop's default executor (asyncio.to_thread), as `serve`'s `runs/list`
    does. On main a run's schema and answer checks ran there too: slow checks held every thread and a store read
    waited behind them (58 s in the probe). Here the default executor has 2 threads and 3 runs' checks are held
    until a store read has been answered."""
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=2))
    release = threading.Event()
    threads: list[str] = []
    take = json_types.local_validator

    def held(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        release.wait(30)
        return take(*args, **kwargs)

    monkeypatch.setattr(json_types, "local_validator", held)
    store = RunStore("sqlite:///:memory:")
    schema = {"type": "object", "properties": {"x": {"type": "string"}}}
    agent = Agent(provider=ScriptedProvider.of(*[text('{"x": "a"}')] * 3), store=store)
    runs = [asyncio.create_task(agent.run("hi", output_type=schema)) for _ in range(3)]
    while len(threads) < 2:
        await asyncio.sleep(0.01)
    try:
        listed = await asyncio.wait_for(asyncio.to_thread(store.list_runs), timeout=10)
    finally:
        release.set()
    assert listed == []
    assert [r.status for r in await asyncio.gather(*runs)] == ["success"] * 3
    assert len(threads) == 3 and all(name.startswith("segue-validate") for name in threads), threads
