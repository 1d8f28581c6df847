"""Hostile JSON Schemas and answers (issue 24, N2 and N10).

N2: jsonschema's default registry fetched any `http://` `$ref` while validating, on the event loop, twice per run,
and quoted what it fetched in the run's error. A loopback server counts the fetches: there must be none, and the
schema is refused naming the `$ref` before any row. N10: answers and schemas nested past Python's recursion
limit, and a dangling `$ref`, escaped `run()` and `stream()` as RecursionError / a referencing error.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from mcp.types import Tool as McpTool

from segue import Agent, RunStore
from segue._core import json_types
from segue._core.contracts import FINAL_ANSWER_TOOL
from segue._core.json_schema import MAX_NESTING, nesting
from segue._core.json_types import OutputSpec
from segue.errors import InputError, ToolSourceError
from segue.mcp.definitions import build_definitions
from segue.testing import ScriptedProvider, call, text
from segue.tools import Tool
from segue_twin.structured import conform


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    """A loopback server a `$ref` points at; it answers a schema that would reveal the fetch, and counts hits."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = json.dumps({"type": "string", "const": "FETCHED-SECRET"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/schema.json", hits
    finally:
        server.shutdown()
        server.server_close()


def remote(url: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": {"$ref": url}}, "required": ["x"]}


def nest(levels: int, leaf: Any = "v") -> str:
    """A JSON object `levels` deep: {"c": {"c": ... leaf}}."""
    return '{"c":' * levels + json.dumps(leaf) + "}" * levels


RECURSIVE = {
    "$defs": {"node": {"type": "object", "properties": {"c": {"$ref": "#/$defs/node"}}}},
    "$ref": "#/$defs/node",
    "type": "object",
}
DANGLING = {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}


def deep_schema(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"c": schema}}
    return schema


def store_runs(store: RunStore) -> int:
    return len(store.list_runs())


async def test_a_remote_ref_is_refused_by_name_and_never_fetched(schema_server: tuple[str, list[str]]) -> None:
    url, hits = schema_server
    store = RunStore("sqlite:///:memory:")
    with pytest.raises(InputError, match=rf"output_type: \$ref '{url}' at /properties/x points outside the schema"):
        Agent(provider=ScriptedProvider.of(text('{"x": "a"}')), store=store, output_type=remote(url))
    agent = Agent(provider=ScriptedProvider.of(text('{"x": "a"}')), store=store)
    with pytest.raises(InputError, match="never fetches"):
        await agent.run("hi", output_type=remote(url))
    events = [e async for e in agent.stream("hi", output_type={"type": "object", "$ref": url})]
    assert [e.type for e in events] == ["RUN_ERROR"] and "points outside the schema" in str(events[0].error)
    with pytest.raises(InputError, match=r"tool lookup parameters: \$ref .* points outside the schema"):
        Tool(name="lookup", description="d", parameters=remote(url), fn=lambda x: x)
    # An MCP server's input schema: that server's tool error, before any run.
    listed = [McpTool(name="lookup", inputSchema=remote(url))]
    with pytest.raises(ToolSourceError, match=r"tool 'lookup' has an input schema .*points outside the schema"):
        build_definitions("docs", listed, None)
    # The twin, asked to conform an answer to such a schema, does not fetch either (counted below).
    assert isinstance(json.loads(conform('{"x": "a"}', remote(url))), dict)
    assert hits == [] and store_runs(store) == 0


def test_local_refs_ids_and_the_bundled_meta_schema_still_resolve() -> None:
    schema = {
        "$id": "https://example.com/root.json",
        "type": "object",
        "$defs": {"a": {"$id": "a.json", "$defs": {"b": {"type": "string"}}, "$ref": "#/$defs/b"}},
        "properties": {
            "x": {"$ref": "a.json"},
            "y": {"$ref": "https://example.com/a.json#/$defs/b"},
            "z": {"$ref": "#anchor"},
            "meta": {"$ref": "https://json-schema.org/draft/2020-12/schema"},
        },
        "additionalProperties": {"$anchor": "anchor", "type": "integer"},
    }
    tool = Tool(name="t", description="d", parameters=schema, fn=lambda **kw: kw)
    assert tool.argument_errors({"x": "s", "y": "s", "z": 1, "meta": {"type": "string"}}) == []
    assert tool.argument_errors({"x": 1}) == ["x: 1 is not of type 'string'"]


async def run_and_stream(agent: Agent) -> list[tuple[str, str]]:
    """The run's (status, error) from run() and from stream()'s last event."""
    result = await agent.run("hi")
    events = [e async for e in agent.stream("hi")]
    streamed = events[-1].result
    assert streamed is not None
    return [(result.status, result.error or ""), (streamed.status, streamed.error or "")]


@pytest.mark.parametrize(
    ("output_type", "answer"),
    [({"type": "object"}, nest(990)), (RECURSIVE, nest(300, {})), ({"type": "object"}, "[" * 100_000)],
    ids=["deep-answer-990", "recursive-schema-answer-300", "answer-100000-deep"],
)
async def test_answers_nested_past_the_limit_end_the_run_error_naming_it(output_type: Any, answer: str) -> None:
    replies = [text(answer)] * 4
    store = RunStore("sqlite:///:memory:")
    agent = Agent(provider=ScriptedProvider.of(*replies), store=store, output_type=output_type, output_repairs=1)
    for status, error in await run_and_stream(agent):
        assert status == "error"
        assert f"nests deeper than {MAX_NESTING} levels of objects and arrays" in error, error
    # Within the limit, the same recursive schema takes the answer.
    ok = Agent(provider=ScriptedProvider.of(text(nest(MAX_NESTING - 1, {}))), store=store, output_type=RECURSIVE)
    assert (await ok.run("hi")).status == "success"


async def test_deep_final_answer_tool_arguments_and_tool_arguments_are_bounded() -> None:
    deep = json.loads(nest(300))
    tool = Tool(name="t", description="d", parameters=RECURSIVE, fn=lambda **kw: "ok")
    assert tool.argument_errors(deep) == [
        f"(arguments): the arguments object nests deeper than {MAX_NESTING} levels of objects and arrays "
        "(segue's limit for JSON it validates); flatten it"
    ]
    outcome = await tool.invoke("c1", deep)
    assert outcome.result.is_error and "nests deeper than 64 levels" in outcome.result.content
    agent = Agent(
        provider=ScriptedProvider.of(call("t", json.loads(nest(100))), text("done")),
        store=RunStore("sqlite:///:memory:"),
        tools=[tool],
    )
    result = await agent.run("hi")
    assert result.status == "success"  # the model saw the error result and answered


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (deep_schema(100), f"output_type: the schema nests deeper than {MAX_NESTING} levels"),
        (deep_schema(500), f"output_type: the schema nests deeper than {MAX_NESTING} levels"),
        (DANGLING, r"output_type: \$ref '#/\$defs/missing' at /properties/x points at nothing in the schema"),
        ({"type": "object", "properties": {"x": {"$ref": "#nowhere"}}}, "points at nothing in the schema"),
    ],
    ids=["schema-100-deep", "schema-500-deep", "dangling-pointer", "dangling-anchor"],
)
async def test_deep_schemas_and_dangling_refs_are_input_errors_before_any_row(schema: Any, message: str) -> None:
    store = RunStore("sqlite:///:memory:")
    with pytest.raises(InputError, match=message):
        Agent(provider=ScriptedProvider.of(text("{}")), store=store, output_type=schema)
    agent = Agent(provider=ScriptedProvider.of(text("{}")), store=store)
    with pytest.raises(InputError, match=message):
        await agent.run("hi", output_type=schema)
    with pytest.raises(InputError, match=message.replace("output_type", "tool t parameters")):
        Tool(name="t", description="d", parameters=schema, fn=lambda **kw: kw)
    assert store_runs(store) == 0


async def test_answers_are_validated_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []
    check = OutputSpec.check

    def recording(self: OutputSpec, value: Any) -> tuple[Any, str | None]:
        seen.append(threading.get_ident())
        return check(self, value)

    monkeypatch.setattr(OutputSpec, "check", recording)
    replies = [text('{"x": "a"}'), call(FINAL_ANSWER_TOOL, {"x": "b"})]
    schema = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
    for reply in replies:
        agent = Agent(provider=ScriptedProvider.of(reply), store=RunStore("sqlite:///:memory:"), output_type=schema)
        assert (await agent.run("hi")).status == "success"
    assert len(seen) == 2 and loop_thread not in seen
    # A run's own schema is checked off the loop too: a large one takes seconds against the meta-schema.
    checked: list[int] = []
    take = json_types.local_validator

    def taking(*args: Any, **kwargs: Any) -> Any:
        checked.append(threading.get_ident())
        return take(*args, **kwargs)

    monkeypatch.setattr(json_types, "local_validator", taking)
    agent = Agent(
        provider=ScriptedProvider.of(text('{"x": "a"}'), text('{"x": "b"}')), store=RunStore("sqlite:///:memory:")
    )
    assert (await agent.run("hi", output_type=schema)).status == "success"
    assert [e.type async for e in agent.stream("hi", output_type=schema)][-1] == "RUN_COMPLETED"
    assert len(checked) == 2 and loop_thread not in checked


def test_nesting_is_counted_without_recursion() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    assert nesting(deep) == MAX_NESTING + 1  # counting stops past the limit
    assert nesting(1) == 0 and nesting({"a": [1]}) == 2 and nesting([[], {}]) == 2


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "$ref": "#"},
        {"type": "object", "allOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": {"$ref": "#"}}},
    ],
    ids=["ref-to-itself", "allof-cycle"],
)
def test_a_schema_that_loops_without_nesting_is_an_input_error(schema: Any) -> None:
    with pytest.raises(InputError, match=r"output_type: the schema refers to itself \(a \$ref or allOf cycle\)"):
        Agent(provider=ScriptedProvider.of(text("{}")), store=RunStore("sqlite:///:memory:"), output_type=schema)
    with pytest.raises(InputError, match="refers to itself"):
        Tool(name="t", description="d", parameters=schema, fn=lambda **kw: kw)
