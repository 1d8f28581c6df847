"""RunParams (schemas/protocol.schema.json) is the one definition of a run request. Agent.run and Agent.stream keep
explicit, typed signatures; these tests hold them to the schema, so a field added to one and not the other fails
here: the names, the types each accepts, the defaults, and the way the protocol and retry reach them."""

from __future__ import annotations

import collections.abc
import inspect
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import attrs
import pytest

from segue import Agent, RunStore
from segue.generated import RunParams, StoredRequest, get_converter
from segue.run.request import PYTHON_ONLY, TRANSPORT_FIELDS, Rules, run_arguments, validate
from segue.testing import ScriptedProvider, text

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
FIXTURES = sorted((SCHEMAS / "fixtures" / "RunParams" / "valid").glob("*.json"))
RULES = Rules(single_call=False, has_store=True, vendors=("scripted",), max_input_chars=1_000_000)
#: The Python name of RunParams.input (the first, positional argument).
INPUT = "user_input"


def run_fields() -> dict[str, Any]:
    """RunParams' fields a caller of Agent.run sets, with their generated types (None removed)."""
    hints = typing.get_type_hints(RunParams)
    out = {}
    for f in attrs.fields(RunParams):
        if f.name in TRANSPORT_FIELDS:
            continue
        members = [a for a in get_args(hints[f.name]) if a is not type(None)] if _is_union(hints[f.name]) else []
        hint = (members[0] if len(members) == 1 else typing.Union[tuple(members)]) if members else hints[f.name]  # noqa: UP007
        out[INPUT if f.name == "input" else f.name] = hint
    return out


def _is_union(t: Any) -> bool:
    return get_origin(t) in (typing.Union, types.UnionType)


def accepts(annotation: Any, value: Any) -> bool:
    """Whether a parameter annotated `annotation` accepts every value of type `value` (the few shapes a run's
    arguments use: unions, literals, classes, lists / sequences and dicts / mappings)."""
    if annotation is Any:
        return True
    if _is_union(value) or (get_origin(value) is Literal and len(get_args(value)) > 1):
        members = get_args(value) if _is_union(value) else [Literal[v] for v in get_args(value)]
        return all(accepts(annotation, m) for m in members)
    if _is_union(annotation):
        return any(accepts(a, value) for a in get_args(annotation))
    if get_origin(annotation) is Literal:
        return get_origin(value) is Literal and set(get_args(value)) <= set(get_args(annotation))
    if get_origin(value) is Literal:
        return all(isinstance(v, annotation) for v in get_args(value)) if isinstance(annotation, type) else False
    a_origin, v_origin = get_origin(annotation) or annotation, get_origin(value) or value
    if not (isinstance(a_origin, type) and isinstance(v_origin, type) and issubclass(v_origin, a_origin)):
        return False
    a_args, v_args = get_args(annotation), get_args(value)
    if not a_args:
        return True
    if issubclass(a_origin, collections.abc.Mapping):
        return accepts(a_args[1], v_args[1] if v_args else Any)
    return accepts(a_args[0], v_args[0] if v_args else Any)


@pytest.mark.parametrize("method", [Agent.run, Agent.stream], ids=["run", "stream"])
def test_the_signature_names_every_run_params_field(method: Any) -> None:
    params = list(inspect.signature(method).parameters.values())[1:]  # after self
    assert params[0].name == INPUT and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])
    assert sorted(p.name for p in params if p.name not in PYTHON_ONLY) == sorted(run_fields())
    assert {p.name for p in params} >= PYTHON_ONLY  # the app's live objects (deps=), not RunParams fields


@pytest.mark.parametrize("method", [Agent.run, Agent.stream], ids=["run", "stream"])
def test_each_parameter_accepts_its_schema_type(method: Any) -> None:
    hints = typing.get_type_hints(method)
    refused = {name: (hints[name], schema) for name, schema in run_fields().items() if not accepts(hints[name], schema)}
    assert refused == {}


def test_the_type_check_can_refuse() -> None:
    """accepts() is what the test above relies on: it refuses a narrower or a different annotation."""
    assert accepts(collections.abc.Sequence[str] | None, list[str])
    assert not accepts(int, int | Literal["all"])
    assert not accepts(str, list[str])
    assert not accepts(collections.abc.Mapping[str, int], dict[str, Any] | dict[str, str])


def test_an_absent_field_means_the_signature_default() -> None:
    """The protocol leaves unset fields out (run_arguments), so Agent.run's defaults apply: the run it makes is the
    one a RunParams with only agent and input asks for, with the defaults the schema describes."""
    signature = inspect.signature(Agent.run)
    defaults = {
        n: p.default
        for n, p in signature.parameters.items()
        if p.default is not inspect.Parameter.empty and n not in PYTHON_ONLY
    }
    request = validate({INPUT: "hello", **defaults}, RULES, agent="analyst")
    assert run_arguments(request.params) == {INPUT: "hello", **_set(defaults), "replay_last": "all"}
    assert (request.replay_last, request.replay_reasoning, request.tenant_id) == ("all", True, "default")
    assert request.knobs is None and request.history == [] and request.context == [] and request.metadata == {}


def _set(arguments: dict[str, Any]) -> dict[str, Any]:
    """What validation fills in for the defaults (empty lists and dicts for None)."""
    filled = {"history": [], "context": [], "metadata": {}}
    return {k: filled.get(k, v) for k, v in arguments.items() if v is not None or k in filled}


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_every_field_reaches_the_run_unchanged(path: Path) -> None:
    """A RunParams from the schema's fixtures, passed the way the protocol passes it, binds to Agent.run and comes
    out of validation as the same RunParams (the run ids as stored, context blocks with their placement)."""
    data = json.loads(path.read_text())
    params = get_converter().structure(data, RunParams)
    arguments = run_arguments(params)
    inspect.signature(Agent.run).bind(object(), **arguments)  # raises TypeError if a field has no parameter
    defaults = {
        n: p.default for n, p in inspect.signature(Agent.run).parameters.items() if n not in ("self", *PYTHON_ONLY)
    }
    request = validate({**defaults, **arguments}, RULES, agent=params.agent)
    expected = attrs.evolve(
        params,
        events=None,
        context=[attrs.evolve(b, placement=b.placement or "dynamic") for b in params.context or []],
        runs=[r.upper() for r in params.runs] if params.runs else None,
    )
    got = request.params
    for field in attrs.fields(RunParams):
        value = getattr(expected, field.name)
        if value is not None:
            assert getattr(got, field.name) == value, field.name


def test_stored_request_properties_are_run_params_properties() -> None:
    """StoredRequest (what retry and resume rebuild a request from) repeats some RunParams properties: each is the
    same schema as RunParams' own."""
    runs = json.loads((SCHEMAS / "runs.schema.json").read_text())["$defs"]["StoredRequest"]["properties"]
    params = json.loads((SCHEMAS / "protocol.schema.json").read_text())["$defs"]["RunParams"]["properties"]

    def same(node: Any) -> Any:
        """The schema without descriptions, each $ref as the type name it points at."""
        if isinstance(node, dict):
            return {
                k: (v.rsplit("/", 1)[-1] if k == "$ref" else same(v)) for k, v in node.items() if k != "description"
            }
        if isinstance(node, list):
            return [same(v) for v in node]
        return node

    assert set(runs) <= set(params)
    assert {k: same(v) for k, v in runs.items()} == {k: same(params[k]) for k in runs}
    assert {f.name for f in attrs.fields(StoredRequest)} <= {f.name for f in attrs.fields(RunParams)}


async def test_retry_rebuilds_the_same_request(tmp_path: Path) -> None:
    """retry validates the request it rebuilt from the run's RunMeta: the same fields as the run it retries."""
    store = RunStore(f"sqlite:///{tmp_path / 'r.db'}")
    agent = Agent(ScriptedProvider.of(text("one"), text("two"), text("three")), "p", [], store)
    try:
        first = await agent.run("hello", history=[], model="scripted-2", tenant_id="t")
        again = await agent.retry(first.run_id, tenant_id="t")
        runs = {r.run_id: r for r in store.list_runs(tenant_id="t")}
        a, b = store.get_run(first.run_id, tenant_id="t"), store.get_run(again.run_id, tenant_id="t")
    finally:
        store.close()
    assert a is not None and b is not None and a.meta is not None and b.meta is not None
    assert b.retry_of == first.run_id and b.input == a.input and set(runs) == {first.run_id, again.run_id}
    assert b.meta.segue_request == a.meta.segue_request


def test_an_agent_needs_a_name_for_its_runs() -> None:
    """RunParams.agent (and the store's agent_name) is a non-empty string: an empty name fails when the agent is
    built, not on its first run."""
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        Agent(ScriptedProvider.of(), "p", name="")
