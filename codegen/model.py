"""Stage one and two of codegen: validate each schema file, then load it into a small typed model.

The model knows only the JSON Schema subset segue uses. Anything else is rejected with the file, the
JSON pointer and the reason, so a typo never turns silently into `Any`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import attrs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as MetaSchemaError
from referencing import Registry, Resource

from codegen.errors import SchemaError
from codegen.naming import module_name, py_field_name
from codegen.schema_cycles import first_cycle

# The keywords codegen understands. A keyword outside this set is an error, not an omission.
SUPPORTED_KEYWORDS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "title",
        "description",
        "examples",
        "$defs",
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "oneOf",
        "$ref",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "protocol",
        "x-repr",
        "x-python-base",
    }
)
#: `x-repr: false` on a property leaves it out of the generated class's repr (a long note or a location that is
#: data, not something a REPL should print whole); the value is kept and serialised as usual.
#: `x-python-base: "package.module:Name"` on an object type makes the generated class derive from that hand-written
#: class: read-only attributes derived from the fields (generated types, hand-written hooks). The base holds no
#: fields and no state (`__slots__ = ()`), so structuring, unstructuring and equality stay the generated ones.
#: Keywords allowed only at a schema file's top level. `protocol` holds the JSON-RPC method table that
#: codegen/spec/protocol.py validates and renders (it is an annotation to JSON Schema validators).
TOP_LEVEL_ONLY_KEYWORDS = frozenset({"protocol"})
CONSTRAINT_KEYWORDS = ("minimum", "maximum", "minLength", "maxLength", "pattern", "minItems")
PRIMITIVES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
TAG = "type"

Kind = Literal["str", "int", "float", "bool", "any", "object", "map", "list", "named", "const", "enum", "union"]


@attrs.frozen(kw_only=True)
class TypeExpr:
    """A field's type: a primitive, a list, a map (string keys, `item` values), a reference to a named type, a
    literal, or a union of those."""

    kind: Kind
    item: TypeExpr | None = None
    name: str | None = None
    values: tuple[Any, ...] = ()
    members: tuple[TypeExpr, ...] = ()
    nullable: bool = False
    constraints: tuple[tuple[str, Any], ...] = ()


@attrs.frozen(kw_only=True)
class Field:
    json_name: str
    py_name: str
    type: TypeExpr
    required: bool
    description: str | None
    #: The property's `title`: a short gloss of what it holds, which a refused value's message quotes.
    title: str | None = None
    #: In the class's repr (schema `x-repr`, default true).
    shown: bool = True

    @property
    def is_const(self) -> bool:
        return self.type.kind == "const"


@attrs.frozen(kw_only=True)
class NamedType:
    """A `$defs` entry. `form` says which Python construct it becomes."""

    name: str
    module: str
    form: Literal["object", "union", "enum", "alias"]
    description: str | None
    fields: tuple[Field, ...] = ()
    extra: bool = False  # additionalProperties: true -> unknown keys kept in `extra`
    variants: tuple[tuple[str, str], ...] = ()  # union: (tag value, object type name)
    base: tuple[str, str] | None = None  # object: (module, class) of its hand-written base (`x-python-base`)
    values: tuple[Any, ...] = ()  # enum
    target: TypeExpr | None = None  # alias

    @property
    def tag_value(self) -> str | None:
        for f in self.fields:
            if f.json_name == TAG and f.is_const and isinstance(f.type.values[0], str):
                return f.type.values[0]
        return None


@attrs.frozen(kw_only=True)
class SchemaFile:
    path: str  # as shown to users, e.g. schemas/message.schema.json
    id: str
    module: str
    sha256: str
    raw: dict[str, Any]
    types: tuple[NamedType, ...]


@attrs.frozen(kw_only=True)
class Model:
    files: tuple[SchemaFile, ...]

    @property
    def types(self) -> dict[str, NamedType]:
        return {t.name: t for f in self.files for t in f.types}

    @property
    def owner(self) -> dict[str, str]:
        """Type name -> the module (schema file) that defines it."""
        return {t.name: t.module for f in self.files for t in f.types}

    def module_deps(self, f: SchemaFile) -> list[str]:
        """Other modules whose types this file's types reference, sorted."""
        owner = self.owner
        deps = {owner[n] for t in f.types for n in referenced_names(t)} - {f.module}
        return sorted(deps)


def referenced_names(t: NamedType) -> set[str]:
    found: set[str] = set()

    def walk(e: TypeExpr | None) -> None:
        if e is None:
            return
        if e.kind == "named" and e.name:
            found.add(e.name)
        walk(e.item)
        for m in e.members:
            walk(m)

    for f in t.fields:
        walk(f.type)
    walk(t.target)
    found.update(name for _, name in t.variants)
    return found


def load_model(schema_dir: Path, display_root: Path | None = None) -> Model:
    """Validate and load every `*.schema.json` directly in `schema_dir` (sorted by file name)."""
    paths = sorted(schema_dir.glob("*.schema.json"))
    if not paths:
        raise SchemaError(str(schema_dir), "/", "no *.schema.json files found")
    root = display_root or schema_dir.parent
    raws: dict[str, tuple[str, dict[str, Any], bytes]] = {}
    for p in paths:
        shown, data, raw = read_json(p, root)
        _check_metaschema(shown, raw)
        sid = raw.get("$id")
        if not isinstance(sid, str) or not sid.startswith("urn:segue:schema:"):
            raise SchemaError(shown, "/$id", "expected a versioned $id such as urn:segue:schema:message:1")
        if sid in {v[1].get("$id") for v in raws.values()}:
            raise SchemaError(shown, "/$id", f"duplicate $id {sid!r}")
        raws[shown] = (sid, raw, data)
    registry = Registry().with_resources((sid, Resource.from_contents(raw)) for sid, raw, _ in raws.values())
    defs_by_id = {sid: set(raw.get("$defs", {})) for sid, raw, _ in raws.values()}
    owner: dict[str, str] = {}
    for shown, (_, raw, _) in raws.items():
        for name in raw.get("$defs", {}):
            if name in owner:
                raise SchemaError(shown, f"/$defs/{name}", f"type name {name!r} is already defined in {owner[name]}")
            owner[name] = shown
    files = []
    for shown, (sid, raw, data) in raws.items():
        loader = _Loader(shown, sid, module_name(shown), raw, defs_by_id, registry)
        files.append(
            SchemaFile(
                path=shown,
                id=sid,
                module=module_name(shown),
                sha256=hashlib.sha256(data).hexdigest(),
                raw=raw,
                types=tuple(loader.load_types()),
            )
        )
    model = Model(files=tuple(files))
    _check_unions(model)
    if cycle := first_cycle({f.module: set(model.module_deps(f)) for f in model.files}):
        path = next(f.path for f in model.files if f.module == cycle[-1])
        raise SchemaError(path, "/", f"schema files reference each other in a cycle: {' -> '.join(cycle)}")
    return model


def read_json(p: Path, root: Path) -> tuple[str, bytes, Any]:
    """(the path as shown, the bytes (for the header's hash), the parsed JSON) of an input file."""
    shown = shown_path(p, root)
    data = p.read_bytes()
    try:
        return shown, data, json.loads(data)
    except json.JSONDecodeError as e:
        raise SchemaError(shown, "/", f"not valid JSON: {e}") from None


def shown_path(p: Path, root: Path) -> str:
    """A file's path as error messages and headers show it: relative to `root` when it is inside."""
    try:
        return p.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def _check_metaschema(shown: str, raw: Any) -> None:
    try:
        Draft202012Validator.check_schema(raw)
    except MetaSchemaError as e:
        pointer = "/" + "/".join(str(p) for p in e.path)
        raise SchemaError(shown, pointer, f"invalid against the draft 2020-12 metaschema: {e.message}") from None


class _Loader:
    def __init__(
        self,
        shown: str,
        sid: str,
        module: str,
        raw: dict[str, Any],
        defs_by_id: dict[str, set[str]],
        registry: Registry[Any],
    ) -> None:
        self.shown, self.sid, self.module, self.raw = shown, sid, module, raw
        self.defs_by_id, self.registry = defs_by_id, registry

    def fail(self, pointer: str, reason: str) -> SchemaError:
        return SchemaError(self.shown, pointer, reason)

    def load_types(self) -> Iterable[NamedType]:
        self._check_keywords(self.raw, "")
        extra_top = set(self.raw) - {"$schema", "$id", "$comment", "title", "description", "$defs", "protocol"}
        if extra_top:
            raise self.fail(
                "/",
                f"top level may only hold $schema, $id, title, description, $defs and protocol; "
                f"found {sorted(extra_top)}",
            )
        for name, node in self.raw.get("$defs", {}).items():
            yield self.load_named(name, node, f"/$defs/{name}")

    def _check_keywords(self, node: Any, pointer: str) -> None:
        if not isinstance(node, dict):
            return
        unknown = sorted(set(node) - SUPPORTED_KEYWORDS)
        misplaced = sorted(set(node) & TOP_LEVEL_ONLY_KEYWORDS) if pointer else []
        if misplaced:
            raise self.fail(pointer, f"keyword {misplaced[0]!r} is only allowed at the top level of a schema file")
        if unknown:
            raise self.fail(
                pointer,
                f"unsupported or misspelled keyword {unknown[0]!r}; codegen understands {sorted(SUPPORTED_KEYWORDS)}",
            )
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for k, v in value.items():
                    self._check_keywords(v, f"{pointer}/{key}/{k}")
            elif key in ("items", "additionalProperties"):
                self._check_keywords(value, f"{pointer}/{key}")
            elif key == "oneOf":
                for i, v in enumerate(value):
                    self._check_keywords(v, f"{pointer}/{key}/{i}")

    def load_named(self, name: str, node: dict[str, Any], pointer: str) -> NamedType:
        desc = node.get("description")
        if not name.isidentifier() or not name[0].isupper():
            raise self.fail(pointer, f"type names must be CapWords identifiers, got {name!r}")
        if node.get("type") == "object" and ("properties" in node or "additionalProperties" in node):
            if "properties" not in node and _is_value_schema(node.get("additionalProperties")):
                return NamedType(  # a map of string keys to one value type
                    name=name, module=self.module, form="alias", description=desc, target=self.load_expr(node, pointer)
                )
            return self.load_object(name, node, pointer)
        if "oneOf" in node and all(self._is_object_ref(m) for m in node["oneOf"]):
            variants = []
            for i, m in enumerate(node["oneOf"]):
                target = self._ref_name(m["$ref"], f"{pointer}/oneOf/{i}")
                variants.append(target)
            return NamedType(
                name=name, module=self.module, form="union", description=desc, variants=tuple(("", v) for v in variants)
            )
        if "oneOf" in node and any(self._is_object_ref(m) or m.get("type") == "object" for m in node["oneOf"]):
            raise self.fail(
                pointer,
                "a union mixing objects and other types cannot be tagged; "
                "make every member an object with a const `type`",
            )
        if (
            "enum" in node
            and all(isinstance(v, str) for v in node["enum"])
            and set(node) <= {"enum", "description", "$comment"}
        ):
            return NamedType(name=name, module=self.module, form="enum", description=desc, values=tuple(node["enum"]))
        return NamedType(
            name=name, module=self.module, form="alias", description=desc, target=self.load_expr(node, pointer)
        )

    def _is_object_ref(self, m: Any) -> bool:
        if not isinstance(m, dict) or "$ref" not in m:
            return False
        target = self._resolve(m["$ref"])
        return isinstance(target, dict) and target.get("type") == "object"

    def _resolve(self, ref: str) -> Any:
        try:
            return self.registry.resolver(base_uri=self.sid).lookup(ref).contents
        except Exception:
            return None

    def _ref_name(self, ref: str, pointer: str) -> str:
        base, _, frag = ref.partition("#")
        sid = base or self.sid
        if not frag.startswith("/$defs/") or frag.count("/") != 2:
            raise self.fail(pointer, f"$ref {ref!r} must point at a named type: '#/$defs/Name' or '<$id>#/$defs/Name'")
        name = frag.removeprefix("/$defs/")
        if sid not in self.defs_by_id:
            raise self.fail(pointer, f"dangling $ref {ref!r}: no schema has $id {sid!r}")
        if name not in self.defs_by_id[sid]:
            raise self.fail(pointer, f"dangling $ref {ref!r}: {sid} has no $defs entry {name!r}")
        return name

    def load_object(self, name: str, node: dict[str, Any], pointer: str) -> NamedType:
        if "additionalProperties" not in node:
            raise self.fail(
                pointer,
                "object types must state additionalProperties (false, or true to keep unknown fields in `extra`)",
            )
        extra = node["additionalProperties"]
        if extra not in (True, False):
            raise self.fail(f"{pointer}/additionalProperties", "additionalProperties must be true or false")
        props: dict[str, Any] = node.get("properties", {})
        required = node.get("required", [])
        for r in required:
            if r not in props:
                raise self.fail(f"{pointer}/required", f"required property {r!r} is not in properties")
        fields = []
        seen: dict[str, str] = {}
        for json_name, sub in props.items():
            fp = f"{pointer}/properties/{json_name}"
            expr = self.load_expr(sub, fp)
            py = py_field_name(json_name)
            if py in seen:
                raise self.fail(fp, f"property {json_name!r} and {seen[py]!r} both become Python name {py!r}")
            seen[py] = json_name
            is_required = json_name in required
            if is_required and expr.nullable:
                raise self.fail(
                    fp, "a required property cannot be nullable; make it optional (absent and null then differ)"
                )
            fields.append(
                Field(
                    json_name=json_name,
                    py_name=py,
                    type=expr,
                    required=is_required,
                    description=sub.get("description"),
                    title=sub.get("title"),
                    shown=sub.get("x-repr", True) is not False,
                )
            )
        return NamedType(
            name=name,
            module=self.module,
            form="object",
            description=node.get("description"),
            fields=tuple(fields),
            extra=bool(extra),
            base=self._base(node, pointer),
        )

    def _base(self, node: dict[str, Any], pointer: str) -> tuple[str, str] | None:
        base = node.get("x-python-base")
        if base is None:
            return None
        module, _, name = base.partition(":") if isinstance(base, str) else ("", "", "")
        if not name.isidentifier() or not all(part.isidentifier() for part in module.split(".")):
            raise self.fail(
                f"{pointer}/x-python-base",
                f"x-python-base must name a class as 'package.module:Name', got {base!r}",
            )
        return module, name

    def load_expr(self, node: Any, pointer: str) -> TypeExpr:
        if node is True or node == {} or (isinstance(node, dict) and set(node) <= {"description", "title", "$comment"}):
            return TypeExpr(kind="any")
        if not isinstance(node, dict):
            raise self.fail(pointer, "expected a schema object")
        constraints = tuple((k, node[k]) for k in CONSTRAINT_KEYWORDS if k in node)
        if "$ref" in node:
            if set(node) - {"$ref", "description", "title", "$comment"}:
                raise self.fail(pointer, "$ref may only be combined with description and title")
            target = self._ref_name(node["$ref"], pointer)
            return TypeExpr(kind="named", name=target)
        if "const" in node:
            return TypeExpr(kind="const", values=(node["const"],))
        if "enum" in node:
            values = tuple(node["enum"])
            nullable = None in values
            return TypeExpr(kind="enum", values=tuple(v for v in values if v is not None), nullable=nullable)
        if "oneOf" in node:
            members = tuple(self.load_expr(m, f"{pointer}/oneOf/{i}") for i, m in enumerate(node["oneOf"]))
            if any(m.kind == "named" for m in members):
                raise self.fail(pointer, "name unions of objects in $defs, and give each member a const `type` tag")
            return TypeExpr(kind="union", members=members)
        types = node.get("type")
        if types is None:
            raise self.fail(pointer, "missing `type` (or $ref, const, enum, oneOf)")
        names = [types] if isinstance(types, str) else list(types)
        nullable = "null" in names
        names = [n for n in names if n != "null"]
        if len(names) != 1:
            raise self.fail(pointer, f"type lists may only add 'null' to one type, got {types!r}")
        t = names[0]
        if t in PRIMITIVES:
            return TypeExpr(kind=PRIMITIVES[t], nullable=nullable, constraints=constraints)  # type: ignore[arg-type]
        if t == "array":
            if "items" not in node:
                raise self.fail(pointer, "arrays must declare `items`")
            item = self.load_expr(node["items"], f"{pointer}/items")
            return TypeExpr(kind="list", item=item, nullable=nullable, constraints=constraints)
        if t == "object":
            if "properties" in node:
                raise self.fail(
                    pointer, "inline objects with properties are not supported: name this object in $defs and $ref it"
                )
            if _is_value_schema(node.get("additionalProperties")):
                item = self.load_expr(node["additionalProperties"], f"{pointer}/additionalProperties")
                return TypeExpr(kind="map", item=item, nullable=nullable)
            return TypeExpr(kind="object", nullable=nullable)
        raise self.fail(pointer, f"unsupported type {t!r}")


def _is_value_schema(node: Any) -> bool:
    """`additionalProperties` holding a schema for every value (not true/false/{}) makes an object a map."""
    return isinstance(node, dict) and bool(set(node) - {"description", "$comment"})


def _check_unions(model: Model) -> None:
    """Every object union must be tagged: each member has a distinct const `type` (a string)."""
    types = model.types
    fixed_files = []
    for f in model.files:
        new_types = []
        for t in f.types:
            if t.form == "union":
                variants: list[tuple[str, str]] = []
                for _, member in t.variants:
                    m = types[member]
                    tag = m.tag_value
                    if m.form != "object" or tag is None:
                        raise SchemaError(
                            f.path,
                            f"/$defs/{t.name}",
                            f"untagged object union: member {member!r} has no const string `{TAG}` property; "
                            f'add "{TAG}": {{"const": "..."}} to it and list it in required',
                        )
                    if tag in {v for v, _ in variants}:
                        raise SchemaError(f.path, f"/$defs/{t.name}", f"two members share the tag {tag!r}")
                    variants.append((tag, member))
                t = attrs.evolve(t, variants=tuple(variants))
            new_types.append(t)
        fixed_files.append(attrs.evolve(f, types=tuple(new_types)))
    object.__setattr__(model, "files", tuple(fixed_files))
