"""What the vendor SDKs say about a shape, asked at generation time: keys, required keys, value kinds, literals.

The wire mappings name SDK types by dotted path: request TypedDicts (`anthropic.types.TextBlockParam`) and
response models (`openai.types.responses.ResponseUsage`, pydantic). This module imports them and answers the
checker's questions in one vocabulary, so a TypedDict and a model (or a union of either) are checked alike:
which keys a shape may have, which it must have, what kind of value sits under a key, and which object types
are nested under it (to check `function.name` or `output_tokens_details.thinking_tokens` all the way down).
"""

from __future__ import annotations

import collections.abc
import importlib
import types
import typing
from typing import Any

import attrs
import typing_extensions

#: Value kinds, the common vocabulary of SDK annotations and mapping types.
KINDS = frozenset({"str", "int", "float", "bool", "object", "list", "none", "any"})
_WRAPPERS = (
    typing_extensions.Required,
    typing_extensions.NotRequired,
    typing_extensions.ReadOnly,
    typing_extensions.Annotated,
)
_LISTS = (list, tuple, collections.abc.Iterable, collections.abc.Sequence, collections.abc.Collection)
_MAPS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


class SdkLookupError(Exception):
    """A dotted path that does not name what the mapping says it does; the message says what was found."""


@attrs.frozen(kw_only=True)
class SdkShape:
    """The keys of one SDK object type, or of a union of them (a key is known if any member has it)."""

    path: str
    keys: dict[str, Any]  # JSON key -> annotation (a union of the members' annotations)
    required: frozenset[str]  # keys every member requires
    typeddict: bool
    union: bool  # several members: a value is typed as one of them only once its tag is known


def resolve(path: str) -> Any:
    """The object a dotted path names: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                raise SdkLookupError(f"cannot import {path!r}: {'.'.join(parts[:cut])} has no {name!r}")
            obj = getattr(obj, name)
        return obj
    raise SdkLookupError(f"cannot import {path!r}: is the SDK installed and the name right?")


def shape(path: str) -> SdkShape:
    """The SDK type at `path` as a shape; SdkLookupError when it is not a TypedDict, a model or a union of them."""
    found = object_types(resolve(path))
    if not found:
        raise SdkLookupError(f"{path} is not a TypedDict, a pydantic model or a union of them")
    return _merge(path, found)


def nested_keys(annotation: Any) -> dict[str, Any] | None:
    """The keys of the objects an annotation holds (merged over a union); None when it holds no SDK object."""
    found = [] if annotation is None else object_types(annotation)
    if not found:
        return None
    keys: dict[str, Any] = {}
    for tp in found:
        for key, value in _keys(tp)[0].items():
            keys.setdefault(key, value)
    return keys


def field_annotation(path: str) -> Any:
    """The annotation of `module.Type.key` (a model field or a TypedDict key)."""
    owner, _, key = path.rpartition(".")
    sdk = shape(owner)
    if key not in sdk.keys:
        raise SdkLookupError(f"{owner} has no key {key!r} (it has {sorted(sdk.keys)})")
    return sdk.keys[key]


def object_types(annotation: Any) -> list[type]:
    """The TypedDicts and models an annotation may hold directly (through Optional, unions and wrappers)."""
    annotation = _strip(annotation)
    if typing_extensions.is_typeddict(annotation) or _is_model(annotation):
        return [annotation]
    if _is_union(annotation):
        return [t for member in typing_extensions.get_args(annotation) for t in object_types(member)]
    return []


def item_annotation(annotation: Any) -> Any | None:
    """The element annotation of a list annotation (through Optional and unions); None when it is no list."""
    annotation = _strip(annotation)
    if _is_union(annotation):
        items = [i for m in typing_extensions.get_args(annotation) if (i := item_annotation(m)) is not None]
        return typing.Union[tuple(items)] if items else None  # noqa: UP007 - built from a runtime tuple
    origin = typing_extensions.get_origin(annotation)
    if origin in _LISTS or _is_sequence_alias(origin):
        args = typing_extensions.get_args(annotation)
        return args[0] if args else Any
    return None


def kinds(annotation: Any, *, with_literals: bool = True) -> set[str]:
    """The value kinds an annotation admits, e.g. Optional[Literal['a']] -> {'str', 'none'}; without literals,
    only the kinds admitted whole (Literal['a'] | str -> {'str'}, Literal['a'] -> set())."""
    annotation = _strip(annotation)
    if annotation is Any or annotation is object:
        return {"any"}
    if annotation is None or annotation is type(None):
        return {"none"}
    origin = typing_extensions.get_origin(annotation)
    if _is_union(annotation):
        members = typing_extensions.get_args(annotation)
        return set().union(*(kinds(m, with_literals=with_literals) for m in members))
    if origin in (typing.Literal, typing_extensions.Literal):
        return {_value_kind(v) for v in typing_extensions.get_args(annotation)} if with_literals else set()
    if typing_extensions.is_typeddict(annotation) or _is_model(annotation) or origin in _MAPS or annotation in _MAPS:
        return {"object"}
    if origin in _LISTS or annotation in _LISTS or _is_sequence_alias(origin):
        return {"list"}
    for kind, tp in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if annotation is tp:
            return {kind}
    return {"any"}  # a type the mapping vocabulary has no word for: not checked


def admits(annotation: Any, value: Any) -> bool:
    """Whether a JSON constant fits an annotation: its kind is admitted and, where only literals are, it is one."""
    kind = "object" if isinstance(value, dict) else "list" if isinstance(value, list) else _value_kind(value)
    if not accepts(annotation, kind):
        return False
    whole = kinds(annotation, with_literals=False)
    return kind in whole or "any" in whole or value in literals(annotation)


def accepts(annotation: Any, kind: str) -> bool:
    """Whether a value of mapping kind `kind` fits the annotation (int fits float, anything fits any)."""
    found = kinds(annotation)
    return kind == "any" or "any" in found or kind in found or (kind == "int" and "float" in found)


def literals(annotation: Any) -> set[Any]:
    """Every Literal value an annotation admits (through Optional, unions and wrappers)."""
    annotation = _strip(annotation)
    if typing_extensions.get_origin(annotation) in (typing.Literal, typing_extensions.Literal):
        return set(typing_extensions.get_args(annotation))
    if _is_union(annotation):
        return set().union(*(literals(m) for m in typing_extensions.get_args(annotation)))
    return set()


def value_source(path: str) -> str | None:
    """For a dotted path naming a key (`module.Type.key`) whose values are literals or one primitive, that type as
    Python source (`Literal['5m', '1h']`), None when the path names a TypedDict or model (use it by name)."""
    try:
        if object_types(resolve(path)):
            return None
    except SdkLookupError:
        pass
    annotation = _strip(field_annotation(path))
    members = typing_extensions.get_args(annotation) if _is_union(annotation) else (annotation,)
    members = tuple(m for m in members if m is not None and m is not type(None))
    literal = (typing.Literal, typing_extensions.Literal)
    if members and all(typing_extensions.get_origin(_strip(m)) in literal for m in members):
        values = [v for m in members for v in typing_extensions.get_args(_strip(m))]
        return "Literal[" + ", ".join(repr(v) for v in dict.fromkeys(values)) + "]"
    if len(members) == 1 and members[0] in (str, int, float, bool):
        return str(members[0].__name__)
    raise SdkLookupError(f"{path} is neither an SDK object type nor a key holding literals or one primitive")


def _merge(path: str, found: list[type]) -> SdkShape:
    keys: dict[str, list[Any]] = {}
    required: set[str] | None = None
    for tp in found:
        own, must = _keys(tp)
        for key, annotation in own.items():
            keys.setdefault(key, []).append(annotation)
        required = must if required is None else required & must
    return SdkShape(
        path=path,
        keys={k: v[0] if len(v) == 1 else typing.Union[tuple(v)] for k, v in keys.items()},  # noqa: UP007
        required=frozenset(required or ()),
        typeddict=all(typing_extensions.is_typeddict(tp) for tp in found),
        union=len(found) > 1,
    )


def _keys(tp: type) -> tuple[dict[str, Any], set[str]]:
    if typing_extensions.is_typeddict(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        # With postponed annotations __required_keys__ can miss Required[...] markers: read them from the hints.
        required = set(getattr(tp, "__required_keys__", ())) | {
            k for k, h in hints.items() if typing_extensions.get_origin(h) is typing_extensions.Required
        }
        return hints, required
    fields = tp.model_fields  # type: ignore[attr-defined]
    keys = {(f.alias or name): f.annotation for name, f in fields.items()}
    return keys, {(f.alias or name) for name, f in fields.items() if f.is_required()}


def _strip(annotation: Any) -> Any:
    while typing_extensions.get_origin(annotation) in _WRAPPERS:
        annotation = typing_extensions.get_args(annotation)[0]
    return annotation


def _is_union(annotation: Any) -> bool:
    return typing_extensions.get_origin(annotation) in (typing.Union, types.UnionType)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and hasattr(annotation, "model_fields")


def _is_sequence_alias(origin: Any) -> bool:
    # The SDKs' SequenceNotStr is a Protocol at type-check time and plain Sequence at runtime.
    return getattr(origin, "__name__", "") == "SequenceNotStr"


def _value_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    return {str: "str", int: "int", float: "float"}.get(type(value), "any")
