"""How much work checking a value against a schema from outside (output_type, tool and MCP parameters) may take.

jsonschema applies every branch of `oneOf`/`anyOf`/`allOf` (and every `$ref` they reach) to the same place in
the value, so branches multiply: a chain of `$defs` each a `oneOf` of two references to the next doubles the work
per link (a client's `output_type` of 18 such links took 85 s per check, stalling every run sharing the process).
Three bounds keep a schema from doing that:

- When the schema is taken, `work_problem` counts, for the worst place in a value (down to MAX_NESTING levels),
  how many subschemas validation applies there. Past MAX_APPLICATIONS the schema is refused, naming the limit and
  the depth, before any row or any validation. The count is computed on the schema's graph, never by validating:
  references resolved once (`$dynamicRef` statically, as a `$ref`), places told apart by the keys that reach
  them, so that `properties` of distinct names do not add up and a recursive schema is explored once per shape.
- While validating, every keyword jsonschema evaluates counts against MAX_VALIDATION_STEPS and the wall clock
  against VALIDATION_SECONDS (a keyword the count cannot see, a slow `format`); past either, validation stops and
  the value is refused naming the budget. `errors_of` in `json_schema` sets the budget; `budgeted` makes the
  validator class that keeps it.
- Validations run on threads of their own (`validating`), never the default executor the store's calls share,
  so a slow one delays its own run, not `runs/list`.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

import attrs
import referencing.exceptions
from jsonschema.protocols import Validator
from jsonschema.validators import extend
from referencing import Resource, Specification
from referencing._core import Resolved, Resolver

#: Subschemas validation may apply to one place in a value (the schema's branching multiplied through its levels).
MAX_APPLICATIONS = 2_000
#: Distinct sets of subschemas the check when a schema is taken explores (the places of a value it tells apart).
MAX_SHAPES = 20_000
#: Keywords one validation may evaluate (about 1 to 2.5 s of pure Python on one idle core).
MAX_VALIDATION_STEPS = 100_000
#: Wall-clock seconds one validation may take.
VALIDATION_SECONDS = 5.0
_CHECK_EVERY = 1024  # steps between two looks at the clock

#: Keywords that apply subschemas to the same place in the value (draft 4 to 2020-12).
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAP = ("dependentSchemas", "dependencies")
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")

P = ParamSpec("P")
T = TypeVar("T")


class TooMuchWork(Exception):
    """A validation ran past its budget; str() names the budget."""


@attrs.define
class _Budget:
    steps: int = 0
    deadline: float = 0.0


_BUDGET: ContextVar[_Budget | None] = ContextVar("segue_validation_budget", default=None)


def _spend() -> None:
    budget = _BUDGET.get()
    if budget is None:
        return
    budget.steps += 1
    if budget.steps > MAX_VALIDATION_STEPS:
        raise TooMuchWork(
            f"its validation stopped after {MAX_VALIDATION_STEPS:,} schema keyword checks (segue's budget for one "
            "validation, segue._core.schema_work.MAX_VALIDATION_STEPS)"
        )
    if budget.steps % _CHECK_EVERY == 0 and time.monotonic() > budget.deadline:
        raise TooMuchWork(
            f"its validation stopped after {VALIDATION_SECONDS:g} s (segue's budget for one validation, "
            "segue._core.schema_work.VALIDATION_SECONDS)"
        )


def run_budgeted(check: Callable[[], T]) -> T:
    """`check()` with a fresh validation budget; TooMuchWork when it runs past it."""
    token = _BUDGET.set(_Budget(deadline=time.monotonic() + VALIDATION_SECONDS))
    try:
        return check()
    finally:
        _BUDGET.reset(token)


def _counted(keyword: Callable[..., Any]) -> Callable[..., Any]:
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _spend()
        return keyword(validator, value, instance, schema)

    return counted


_BUDGETED: dict[type[Validator], type[Validator]] = {}


def budgeted(dialect: type[Validator]) -> type[Validator]:
    """`dialect` with every keyword counted against the budget `run_budgeted` sets (uncounted outside it); one
    class per dialect."""
    if dialect not in _BUDGETED:
        keywords = {name: _counted(keyword) for name, keyword in dialect.VALIDATORS.items()}
        _BUDGETED[dialect] = extend(dialect, validators=keywords)
    return _BUDGETED[dialect]


_EXECUTOR = ThreadPoolExecutor(max_workers=4, thread_name_prefix="segue-validate")


async def validating(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` on the validation threads (asyncio.to_thread's contract, another executor)."""
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_EXECUTOR, call)


# -- the bound when a schema is taken ------------------------------------------------------------------------------


@attrs.define
class _Node:
    """One subschema object: what it applies in place, and what it applies one level down, by key."""

    in_place: list[int] = attrs.field(factory=list)
    #: Objects: `properties` by name; `additionalProperties` (the names not in `named`); every key's.
    named: dict[str, list[int]] = attrs.field(factory=dict)
    other: list[int] = attrs.field(factory=list)
    every_key: list[int] = attrs.field(factory=list)
    #: Arrays: by index (`prefixItems`, draft 4's list `items`); from an index on (`items`); every item's.
    indexed: dict[int, list[int]] = attrs.field(factory=dict)
    from_index: list[tuple[int, int]] = attrs.field(factory=list)
    every_item: list[int] = attrs.field(factory=list)

    @property
    def descends(self) -> bool:
        return bool(self.named or self.other or self.every_key or self.indexed or self.from_index or self.every_item)

    def add(self, target: int, key: tuple[Any, ...] | None) -> None:
        if key is None:
            self.in_place.append(target)
        elif key[0] == "name":
            self.named.setdefault(key[1], []).append(target)
        elif key[0] == "index":
            self.indexed.setdefault(key[1], []).append(target)
        elif key[0] == "from":
            self.from_index.append((key[1], target))
        else:
            {"other": self.other, "key": self.every_key, "item": self.every_item}[key[0]].append(target)


def work_problem(schema: Any, root: Resolver[Any], dialect: Specification[Any], levels: int) -> str | None:
    """Why validating values against `schema` could take too long (naming the limit), or None: more than
    MAX_APPLICATIONS subschemas applied at one place of a value down to `levels` levels. InPlaceCycle when
    subschemas apply each other in place without end (validating a value that reaches them never ends).

    A place of the value is reached by a path of keys; what is applied there (which subschemas, how many times
    each) depends only on that path. Paths are explored breadth first, one key at a time, every property name the
    subschemas applied there name, one other name, every index they name and one index past them; a set of
    applications met before is not explored again, so a recursive schema ends. Past MAX_SHAPES distinct sets,
    the schema is refused as too intricate to bound."""
    work = _Work(_graph(schema, root, dialect))
    start = work.closure(id(schema))
    seen = {_frozen(work.descending(start))}
    frontier = [start]
    for depth in range(levels + 1):
        following: list[Counter[int]] = []
        for place in frontier:
            if place.total() > MAX_APPLICATIONS:
                return (
                    f"validating a value against it would apply more than {MAX_APPLICATIONS:,} subschemas at one "
                    f"place {depth} level(s) down in the value (its oneOf/anyOf/allOf branches and $refs multiply; "
                    "segue's limit is segue._core.schema_work.MAX_APPLICATIONS); merge identical branches or flatten "
                    "the schema"
                )
            for reached in work.one_level_down(place):
                key = _frozen(work.descending(reached))  # two places alike in what applies lower down are one
                if reached.total() > MAX_APPLICATIONS or key not in seen:
                    seen.add(key)
                    following.append(reached)
            if len(seen) > MAX_SHAPES:
                return (
                    f"its subschemas combine in more than {MAX_SHAPES:,} ways down to {depth} level(s) of a value, "
                    "too many for segue to bound the work of validating against it "
                    "(segue._core.schema_work.MAX_SHAPES); flatten the schema"
                )
        frontier = following
    return None


def _frozen(place: Counter[int]) -> frozenset[tuple[int, int]]:
    return frozenset(place.items())


class InPlaceCycle(Exception):
    """Subschemas that apply each other at the same place of the value."""


class _Work:
    """Counts over the schema's graph: how many times each subschema is applied in place from a node (its
    closure, computed once per node), and what one key more applies."""

    def __init__(self, nodes: dict[int, _Node]) -> None:
        self.nodes = nodes
        self._closures: dict[int, Counter[int]] = {}

    def closure(self, start: int) -> Counter[int]:
        """Each subschema applied in place from `start` (itself included), with how many times: one entry
        counted MAX_APPLICATIONS + 1 times when there are more. InPlaceCycle when the in-place graph loops.
        Each node's closure is the sum of its children's, computed once, children first (iteratively)."""
        on_path: set[int] = set()
        stack: list[tuple[int, Iterator[int]]] = []
        if start not in self._closures:
            on_path.add(start)
            stack.append((start, iter(self.nodes[start].in_place)))
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                on_path.discard(node)
                self._closures[node] = _capped(
                    Counter({node: 1}), ((c, 1) for c in self.nodes[node].in_place), self._closures.__getitem__
                )
            elif child in on_path:
                raise InPlaceCycle
            elif child not in self._closures:
                on_path.add(child)
                stack.append((child, iter(self.nodes[child].in_place)))
        return self._closures[start]

    def descending(self, place: Counter[int]) -> Counter[int]:
        """The part of `place` that applies anything one level down."""
        return Counter({n: c for n, c in place.items() if self.nodes[n].descends})

    def one_level_down(self, place: Counter[int]) -> Iterator[Counter[int]]:
        """What is applied one level below `place`, for each kind of key it tells apart: each property name a
        subschema there names, any other name, each index named and any index past them (empty sets left out)."""
        nodes = [(self.nodes[n], count) for n, count in place.items()]
        every_key = self._applied((t, c) for node, c in nodes for t in node.every_key)
        other = self._applied((t, c) for node, c in nodes for t in node.other)
        for name in sorted({name for node, _ in nodes for name in node.named}):
            having = [(node, c) for node, c in nodes if name in node.named]
            reached = every_key + other
            reached.subtract(self._applied((t, c) for node, c in having for t in node.other))
            reached.update(self._applied((t, c) for node, c in having for t in node.named[name]))
            yield +reached
        if every_key or other:
            yield every_key + other
        every_item = self._applied((t, c) for node, c in nodes for t in node.every_item)
        starts = {i for node, _ in nodes for i in node.indexed} | {i for node, _ in nodes for i, _ in node.from_index}
        for index in [*sorted(starts), max(starts, default=-1) + 1]:
            reached = every_item + self._applied(
                [(t, c) for node, c in nodes for t in node.indexed.get(index, ())]
                + [(t, c) for node, c in nodes for start, t in node.from_index if start <= index]
            )
            if reached:
                yield reached

    def _applied(self, targets: Iterable[tuple[int, int]]) -> Counter[int]:
        """Every subschema the targets apply in place, each target counted `count` times (capped)."""
        return _capped(Counter(), targets, self.closure)


def _capped(
    found: Counter[int], parts: Iterable[tuple[int, int]], closure: Callable[[int], Counter[int]]
) -> Counter[int]:
    """`found` plus each part's closure `count` times; past MAX_APPLICATIONS, one entry counted just past it
    (the limit is what matters, not by how much a count passes it), found before anything is added up."""
    closures = [(closure(target), count) for target, count in parts]
    if found.total() + sum(applied.total() * count for applied, count in closures) > MAX_APPLICATIONS:
        return Counter({next(iter(found)) if found else next(iter(closures[0][0])): MAX_APPLICATIONS + 1})
    for applied, count in closures:
        if count == 1:
            found.update(applied)
        else:
            found.update({node: times * count for node, times in applied.items()})
    return found


def _graph(schema: Any, root: Resolver[Any], dialect: Specification[Any]) -> dict[int, _Node]:
    """Every subschema object validation may apply from `schema` (through its keywords and its resolvable
    references), by id. A reference that does not resolve is left out (json_schema names it)."""
    nodes: dict[int, _Node] = {}
    looked_up: dict[tuple[int, str], tuple[Resolver[Any], Resolved[Any] | None]] = {}
    pending: list[tuple[Any, Resolver[Any], bool]] = [(schema, root, True)]
    while pending:
        contents, resolver, resolved = pending.pop()
        if not isinstance(contents, dict) or id(contents) in nodes:
            continue
        if not resolved:  # a reference's target comes with its resolver; a subschema may set a new base ($id)
            resolver = resolver.in_subresource(Resource.from_contents(contents, default_specification=dialect))
        node = nodes[id(contents)] = _Node()
        for keyword, value in contents.items():
            for child, key in _applied(keyword, value, contents):
                if isinstance(child, dict):
                    node.add(id(child), key)
                    pending.append((child, resolver, False))
            if keyword in _REFS and isinstance(value, str):
                target = _lookup(resolver, value, looked_up)
                if target is None:
                    continue
                if isinstance(target.contents, dict):
                    node.add(id(target.contents), None)
                    pending.append((target.contents, target.resolver, True))
    return nodes


def _lookup(
    resolver: Resolver[Any], ref: str, looked_up: dict[tuple[int, str], tuple[Resolver[Any], Resolved[Any] | None]]
) -> Resolved[Any] | None:
    """What `ref` points at from `resolver`, or None; each looked up once per resolver (subschemas without an
    `$id` of their own share their parent's), as a schema may repeat a reference thousands of times."""
    key = (id(resolver), ref)
    if key not in looked_up:
        try:
            found: Resolved[Any] | None = resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            found = None
        looked_up[key] = (resolver, found)  # the resolver kept alive, so its id is not reused meanwhile
    return looked_up[key][1]


def _applied(keyword: str, value: Any, schema: dict[str, Any]) -> Iterator[tuple[Any, tuple[Any, ...] | None]]:
    """The subschemas `keyword` applies: in place (key None) or one level down with the keys they reach."""
    if keyword in _IN_PLACE_ONE:
        yield value, None
    elif keyword in _IN_PLACE_MANY and isinstance(value, list):
        yield from ((child, None) for child in value)
    elif keyword in _IN_PLACE_MAP and isinstance(value, dict):
        yield from ((child, None) for child in value.values())
    elif keyword == "properties" and isinstance(value, dict):
        yield from ((child, ("name", name)) for name, child in value.items())
    elif keyword == "patternProperties" and isinstance(value, dict):
        yield from ((child, ("key",)) for child in value.values())
    elif keyword == "additionalProperties":
        yield value, ("other",)
    elif keyword in ("propertyNames", "unevaluatedProperties"):  # propertyNames: the key, counted as its value
        yield value, ("key",)
    elif keyword in ("contains", "unevaluatedItems"):
        yield value, ("item",)
    elif keyword in ("prefixItems", "items") and isinstance(value, list):  # items as a list: drafts 4 to 2019-09
        yield from ((child, ("index", index)) for index, child in enumerate(value))
    elif keyword == "items":
        prefix = schema.get("prefixItems")
        yield value, ("from", len(prefix) if isinstance(prefix, list) else 0)
    elif keyword == "additionalItems":
        items = schema.get("items")
        yield value, ("from", len(items) if isinstance(items, list) else 0)
