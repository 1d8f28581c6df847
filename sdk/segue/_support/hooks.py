"""Hand-written cattrs hooks that the generated converter is configured with (lsprotocol's `_hooks.py` split).

One general mechanism for every generated class, driven by attrs field metadata, instead of per-type hooks:
- optional fields are omitted when unset (None, or UNSET for nullable ones where null means "explicitly cleared");
- `metadata={"json": ...}` renames a field on the wire;
- a field with `metadata={"extra": True}` collects properties the schema does not name, and gives them back;
- object unions dispatch on their tag through a table the generator emits;
- primitives are checked, not coerced: "5" is not an int and 1 is not a string. A JSON number with no fraction
  (1.0) is an integer, as JSON Schema's `integer` says, so what the schema accepts the classes accept too.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, get_args, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override


class Unset(enum.Enum):
    """Marks an optional, nullable property that was absent (inherit), as opposed to null (cleared)."""

    UNSET = "UNSET"

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET


def unset_or(validator: Callable[[Any, Any, Any], None]) -> Callable[[Any, Any, Any], None]:
    """Run `validator` only on real values (not UNSET, not None)."""

    def check(inst: Any, attribute: Any, value: Any) -> None:
        if value is not UNSET and value is not None:
            validator(inst, attribute, value)

    return check


def _strict(kind: type) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if kind is int and isinstance(value, float) and value.is_integer():
            return int(value)
        # bool is an int subclass in Python, but not in JSON.
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__} {value!r:.60}")
        return value

    return structure


def _structure_float(value: Any, _: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {type(value).__name__} {value!r:.60}")
    return float(value)


def _is_union(t: Any) -> bool:
    return get_origin(t) in (typing.Union, types.UnionType)


def configure_converter(
    conv: cattrs.Converter,
    *,
    classes: tuple[type, ...],
    tagged_unions: Mapping[Any, tuple[str, Mapping[str, type]]],
) -> cattrs.Converter:
    for kind in (str, int, bool):
        conv.register_structure_hook(kind, _strict(kind))
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(Any, lambda v, _: v)
    conv.register_structure_hook_factory(_is_list, lambda t: _list_hook(conv, t))
    conv.register_structure_hook_factory(_is_dict, lambda t: _dict_hook(conv, t))

    # Factories run lazily, on first use, so every hook exists before any class hook is built from them.
    for union, (tag, table) in tagged_unions.items():
        conv.register_structure_hook(union, _tagged_union_hook(conv, tag, dict(table)))
        conv.register_unstructure_hook(union, lambda v: conv.unstructure(v, unstructure_as=type(v)))
    conv.register_structure_hook_factory(
        lambda t: _is_union(t) and t not in tagged_unions, lambda t: _plain_union_hook(conv, t)
    )
    class_set = frozenset(classes)
    conv.register_structure_hook_factory(lambda t: t in class_set, lambda t: _class_structure_hook(conv, t))
    conv.register_unstructure_hook_factory(lambda t: t in class_set, lambda t: _class_unstructure_hook(conv, t))
    conv.register_unstructure_hook(Unset, lambda v: None)
    return conv


def _is_list(t: Any) -> bool:
    return get_origin(t) is list


def _is_dict(t: Any) -> bool:
    return t is dict or get_origin(t) is dict


def _list_hook(conv: cattrs.Converter, t: Any) -> Callable[[Any, Any], Any]:
    (item,) = get_args(t) or (Any,)
    if item is Any:

        def structure_any(value: Any, _: Any) -> list[Any]:
            if not isinstance(value, list):
                raise TypeError(f"expected a list, got {type(value).__name__}")
            return list(value)

        return structure_any
    item_hook = conv.get_structure_hook(item)

    def structure(value: Any, _: Any) -> list[Any]:
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        return [item_hook(v, item) for v in value]

    return structure


def _dict_hook(conv: cattrs.Converter, t: Any) -> Callable[[Any, Any], Any]:
    """`dict[str, Any]` keeps the object as is; a map `dict[str, V]` structures every value as a V."""
    args = get_args(t)
    value_type = args[1] if len(args) == 2 else Any
    value_hook = None if value_type is Any else conv.get_structure_hook(value_type)

    def structure(value: Any, _: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, got {type(value).__name__}")
        if value_hook is None:
            return dict(value)
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"expected string keys, got {type(key).__name__} {key!r:.60}")
            try:
                out[key] = value_hook(item, value_type)
            except Exception as e:
                raise TypeError(f"value of key {key!r}: {e}") from e
        return out

    return structure


def _tagged_union_hook(conv: cattrs.Converter, tag: str, table: dict[str, type]) -> Callable[[Any, Any], Any]:
    hooks: dict[str, Callable[[Any, Any], Any]] = {}

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object with a {tag!r} tag, got {type(value).__name__}")
        cls_tag = value.get(tag)
        cls = table.get(cls_tag) if isinstance(cls_tag, str) else None
        if cls is None:
            raise ValueError(f"unknown {tag} {cls_tag!r}; expected one of {sorted(table)}")
        hook = hooks.get(cls_tag)  # type: ignore[arg-type]
        if hook is None:  # looked up on first use: the class hooks are factories
            hook = hooks[cls_tag] = conv.get_structure_hook(cls)  # type: ignore[index]
        return hook(value, cls)

    return structure


def _plain_union_hook(conv: cattrs.Converter, t: Any) -> Callable[[Any, Any], Any]:
    """Unions of primitives, literals, None and UNSET: the first member that accepts the value wins."""
    members = get_args(t)

    def structure(value: Any, _: Any) -> Any:
        if value is None and type(None) in members:
            return None
        errors = []
        for m in members:
            if m is type(None) or m is Unset:
                continue
            try:
                return conv.structure(value, m)
            except Exception as e:  # try the next member
                errors.append(f"{_type_name(m)}: {e}")
        raise TypeError(f"{value!r:.60} matches none of " + "; ".join(errors))

    return structure


def _type_name(t: Any) -> str:
    if get_origin(t) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(t))
    return getattr(t, "__name__", repr(t))


def _optional(a: attrs.Attribute[Any]) -> bool:
    return a.default is None or a.default is UNSET


def _extra_field(cls: type) -> str | None:
    for a in attrs.fields(cls):
        if a.metadata.get("extra"):
            return str(a.name)
    return None


def _class_structure_hook(conv: cattrs.Converter, cls: type) -> Callable[[Any, Any], Any]:
    attrs.resolve_types(cls)
    extra = _extra_field(cls)
    overrides = {a.name: override(rename=a.metadata["json"]) for a in attrs.fields(cls) if "json" in a.metadata}
    if extra:
        overrides[extra] = override(omit=True)
    base: Callable[[Any, Any], Any] = make_dict_structure_fn(
        cls,
        conv,
        _cattrs_forbid_extra_keys=extra is None,
        **overrides,  # type: ignore[arg-type]
    )
    if extra is None:
        return base
    known = {a.metadata.get("json", a.name) for a in attrs.fields(cls) if a.name != extra}

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object for {cls.__name__}, got {type(value).__name__}")
        obj = base({k: v for k, v in value.items() if k in known}, cls)
        rest = {k: v for k, v in value.items() if k not in known}
        return attrs.evolve(obj, **{extra: rest}) if rest else obj

    return structure


def _class_unstructure_hook(conv: cattrs.Converter, cls: type) -> Callable[[Any], Any]:
    attrs.resolve_types(cls)
    extra = _extra_field(cls)
    overrides = {}
    for a in attrs.fields(cls):
        if a.name == extra:
            overrides[a.name] = override(omit=True)
        elif _optional(a) or "json" in a.metadata:
            overrides[a.name] = override(omit_if_default=_optional(a), rename=a.metadata.get("json"))
    base: Callable[[Any], Any] = make_dict_unstructure_fn(cls, conv, **overrides)  # type: ignore[arg-type]
    if extra is None:
        return base

    def unstructure(obj: Any) -> dict[str, Any]:
        out: dict[str, Any] = base(obj)
        out.update(getattr(obj, extra))
        return out

    return unstructure
