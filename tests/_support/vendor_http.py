"""Mock vendor transports for the wire and provider tests: a TypedDict checker, recorded requests, SSE bodies.

`check_typed(value, SomeSdkParams)` walks a JSON body against the vendor SDK's own request TypedDicts: unknown
keys, missing Required keys, wrong literals and types are reported with their path, nested iterables included
(pydantic's TypeAdapter skips unknown keys and validates Iterable fields lazily, so it is not used). Extra keys
segue sends on purpose are allowed per TypedDict name, explicitly.

tests/wire/test_wire_support.py checks the checker itself.
"""

from __future__ import annotations

import collections.abc
import json
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx2
import typing_extensions

_WRAPPERS = {typing_extensions.Required, typing_extensions.NotRequired, typing_extensions.ReadOnly}
_LISTS = {list, collections.abc.Iterable, collections.abc.Sequence, collections.abc.Collection, typing.Iterable}
_MAPS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}


def check_typed(value: Any, tp: Any, *, extra: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """Problems with `value` as an instance of `tp` (a TypedDict, union, list, literal...); [] means valid."""
    return _check(value, tp, "$", {k: set(v) for k, v in (extra or {}).items()})


def assert_typed(value: Any, tp: Any, *, extra: Mapping[str, Iterable[str]] | None = None) -> None:
    problems = check_typed(value, tp, extra=extra)
    assert not problems, "body does not match the SDK's request types:\n  " + "\n  ".join(problems[:20])


def _check(value: Any, tp: Any, path: str, extra: dict[str, set[str]]) -> list[str]:
    origin = typing_extensions.get_origin(tp)
    args = typing_extensions.get_args(tp)
    if origin in _WRAPPERS or origin is typing_extensions.Annotated:
        return _check(value, args[0], path, extra)
    if tp is Any or tp is object:
        return []
    if tp is None or tp is type(None):
        return [] if value is None else [f"{path}: expected null, got {value!r}"]
    if origin in (typing.Union, types.UnionType):
        return _check_union(value, args, path, extra)
    if origin is typing_extensions.Literal or origin is typing.Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {list(args)}"]
    if typing_extensions.is_typeddict(tp):
        return _check_typeddict(value, tp, path, extra)
    if origin in _LISTS or tp in _LISTS or _is_sequence_alias(origin):
        if not isinstance(value, list):
            return [f"{path}: expected a list, got {type(value).__name__}"]
        item = args[0] if args else Any
        return [p for i, v in enumerate(value) for p in _check(v, item, f"{path}[{i}]", extra)]
    if origin in _MAPS or tp in _MAPS:
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {type(value).__name__}"]
        item = args[1] if len(args) == 2 else Any
        return [p for k, v in value.items() for p in _check(v, item, f"{path}.{k}", extra)]
    if isinstance(tp, type):
        if tp is float and isinstance(value, int) and not isinstance(value, bool):
            return []
        if tp is int and isinstance(value, bool):
            return [f"{path}: expected int, got bool"]
        return [] if isinstance(value, tp) else [f"{path}: expected {tp.__name__}, got {type(value).__name__}"]
    return [f"{path}: the checker does not understand the annotation {tp!r}"]


def _is_sequence_alias(origin: Any) -> bool:
    # The SDKs' SequenceNotStr is a Protocol at type-check time and plain Sequence at runtime.
    return getattr(origin, "__name__", "") == "SequenceNotStr"


def _check_union(value: Any, members: tuple[Any, ...], path: str, extra: dict[str, set[str]]) -> list[str]:
    results = []
    for member in members:
        problems = _check(value, member, path, extra)
        if not problems:
            return []
        # Report the member the value was most likely meant as: same JSON kind, same type/role tag, fewest problems.
        wrong_kind = any(p.startswith(f"{path}: expected") for p in problems)
        results.append((wrong_kind, not _discriminator_matches(value, member), len(problems), problems))
    results.sort(key=lambda r: r[:3])
    return results[0][3]


def _discriminator_matches(value: Any, member: Any) -> bool:
    if not (isinstance(value, dict) and typing_extensions.is_typeddict(member)):
        return False
    hints = _hints(member)
    for key in ("type", "role"):
        if key in value and key in hints:
            lit = hints[key]
            while typing_extensions.get_origin(lit) in _WRAPPERS:
                lit = typing_extensions.get_args(lit)[0]
            return value[key] in typing_extensions.get_args(lit)
    return False


def _hints(td: Any) -> dict[str, Any]:
    return typing.get_type_hints(td, include_extras=True)


def _required(td: Any, hints: dict[str, Any]) -> set[str]:
    # With postponed annotations the runtime __required_keys__ misses Required[...] markers: read the hints.
    marked = {k for k, h in hints.items() if typing_extensions.get_origin(h) is typing_extensions.Required}
    return marked | set(td.__required_keys__)


def _check_typeddict(value: Any, td: Any, path: str, extra: dict[str, set[str]]) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected an object ({td.__name__}), got {type(value).__name__}"]
    hints = _hints(td)
    allowed = set(extra.get(td.__name__, ()))
    problems = [
        f"{path}: unknown key {k!r} for {td.__name__} (known: {sorted(hints)})"
        for k in value
        if k not in hints and k not in allowed
    ]
    problems += [f"{path}: missing required key {k!r} of {td.__name__}" for k in _required(td, hints) if k not in value]
    for k, v in value.items():
        if k in hints:
            problems += _check(v, hints[k], f"{path}.{k}", extra)
    return problems


# ---- mock vendors ----


class Recorder:
    """An httpx2 MockTransport handler: records every request and answers from a queue of responses."""

    def __init__(self, *responses: httpx2.Response | Callable[[httpx2.Request], httpx2.Response]) -> None:
        self.responses = list(responses)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if not self.responses:
            raise AssertionError(f"unexpected extra request to {request.url}")
        answer = self.responses.pop(0)
        return answer(request) if callable(answer) else answer

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(self.requests[-1].content)

    @property
    def headers(self) -> httpx2.Headers:
        return self.requests[-1].headers

    def transport(self) -> httpx2.MockTransport:
        return httpx2.MockTransport(self)


def anthropic_client(rec: Recorder) -> Any:
    import anthropic

    http = httpx2.AsyncClient(transport=rec.transport())
    return anthropic.AsyncAnthropic(api_key="sk-ant-test", http_client=http, max_retries=0)


def openai_client(rec: Recorder, base_url: str | None = None) -> Any:
    import openai

    http = httpx2.AsyncClient(transport=rec.transport())
    return openai.AsyncOpenAI(api_key="sk-test", base_url=base_url, http_client=http, max_retries=0)


def json_response(data: Any, status: int = 200) -> httpx2.Response:
    return httpx2.Response(status, json=data)


def sse(events: Iterable[tuple[str | None, Any]], *, done: bool = False) -> httpx2.Response:
    """A text/event-stream body; `data` may be a dict (JSON-encoded) or raw text (to send malformed events)."""
    chunks = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        chunks.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    if done:
        chunks.append("data: [DONE]\n\n")
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content="".join(chunks).encode())
