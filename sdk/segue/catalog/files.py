"""Loading catalog directories: parse, validate against the schema, migrate old versions, check references."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from segue._core.json_schema import MAX_NESTING, nesting, past_the_limit
from segue._support.hooks import UNSET
from segue._support.resources import data_dir
from segue.catalog.errors import (
    _CATALOG_ENV,
    _KINDS,
    _ROW_TYPES,
    CatalogError,
    _close,
    _error,
    _ptr,
)
from segue.generated import get_converter

# --- loading ---------------------------------------------------------------------------------------------------


#: The version this segue writes and resolves. Older files are migrated on load through MIGRATIONS.
CURRENT_VERSION: Final = 2

#: Where each row kind keeps its configuration bag (the part the cascade merges).
_BAGS: Final = (
    ("model_types", "configuration"),
    ("models", "configuration"),
    ("vendors", "model_defaults"),
    ("model_vendors", "configuration"),
)


_V1_WRITE_KEYS: Final = (("cache_write_5m", "5m"), ("cache_write_1h", "1h"))


def _v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    """Version 1 priced cache writes as `cache_write_5m` / `cache_write_1h`; version 2 keys one `cache_write`
    map by the TTL names the serving path offers (`llm.cache_ttls`), so any vendor's lifetimes fit."""
    for kind, bag_key in _BAGS:
        rows = doc.get(kind)
        for row in rows if isinstance(rows, list) else []:
            bag = row.get(bag_key) if isinstance(row, dict) else None
            pricing = bag.get("pricing") if isinstance(bag, dict) else None
            if not isinstance(pricing, dict):
                continue
            writes = {ttl: pricing.pop(old) for old, ttl in _V1_WRITE_KEYS if old in pricing}
            if writes:
                pricing["cache_write"] = writes
    return doc


#: MIGRATIONS[n] turns a parsed version-n file into a version-(n + 1) file (it gets a deep copy; return the
#: new document). Shipping version n + 1 = bump CURRENT_VERSION, update the schema, add MIGRATIONS[n].
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


def known_versions() -> list[int]:
    """Versions this segue reads: the current one and every older one with a migration chain to it."""
    versions, v = [CURRENT_VERSION], CURRENT_VERSION - 1
    while v in MIGRATIONS:
        versions.insert(0, v)
        v -= 1
    return versions


def packaged_catalog_dir() -> Path:
    """`segue/_catalogs` inside an installed wheel, else the repository's `catalogs/` next to `sdk/`."""
    return data_dir("catalogs")


@functools.cache
def _validator() -> Any:
    import jsonschema

    path = data_dir("schemas") / "catalog.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator({**schema, "$ref": "#/$defs/CatalogFile"})


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _schema_error(file: str, err: Any) -> CatalogError:
    pointer = _ptr(*err.absolute_path)
    inst, kind, arg = err.instance, err.validator, err.validator_value
    if kind == "additionalProperties" and isinstance(inst, dict):
        known = sorted(err.schema.get("properties", {}))
        extra = sorted(k for k in inst if k not in known)
        bad = extra[0] if extra else "?"
        hint = _close(bad, known)
        return CatalogError(
            f"{file}#{pointer}: unknown key {bad!r}"
            + (f" ({hint})" if hint else "")
            + "; expected one of: "
            + ", ".join(known),
            file=file,
            pointer=pointer,
            expected="one of the keys " + ", ".join(known),
        )
    if kind == "required":
        missing = next((k for k in arg if isinstance(inst, dict) and k not in inst), "?")
        return _error(file, pointer, f"a {missing!r} key", hint=f"add {missing!r} to this object")
    if kind == "type":
        expected = " or ".join(f"{'an' if t[0] in 'aeiou' else 'a'} {t}" for t in _aslist(arg))
    elif kind == "enum":
        expected = "one of " + ", ".join(json.dumps(v) for v in arg)
    elif kind in ("minimum", "minLength", "pattern"):
        expected = {"minimum": f"a number >= {arg}", "minLength": "a non-empty string"}.get(
            kind, f"a string matching {arg}"
        )
    else:
        expected = str(err.message)
    return _error(file, pointer, expected, inst)


def _aslist(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list) else [v]


@attrs.frozen(kw_only=True)
class _Row:
    key: Any
    value: Any  # the generated row class
    raw: dict[str, Any]
    file: str
    pointer: str


class _Loader:
    """Collects every problem of the files; `Catalog.load` raises the first, `check_dir` returns them all."""

    def __init__(self) -> None:
        self.errors: list[CatalogError] = []
        self.rows: dict[str, dict[Any, _Row]] = {k: {} for k in _KINDS}
        self.half_known: dict[str, set[str]] = {k: set() for k in _KINDS}  # ids in files that failed
        self.files: list[str] = []
        self.migrated: dict[str, int] = {}  # file -> the version it was written in, when older than CURRENT

    def load_dir(self, directory: Path) -> None:
        shown = _display(directory)
        if not directory.is_dir():
            self.errors.append(
                _error(shown, "", "a catalog directory", hint=f"check the path (extra_dirs / {_CATALOG_ENV})")
            )
            return
        layer: dict[str, dict[Any, _Row]] = {k: {} for k in _KINDS}
        for path in sorted(directory.glob("*.json")):
            for kind, row in self._load_file(path):
                twin = layer[kind].get(row.key)
                if twin is not None:
                    self.errors.append(
                        _error(
                            row.file,
                            row.pointer,
                            f"one definition of {kind[:-1]} {row.key!r} per catalog directory",
                            hint=f"also at {twin.file}#{twin.pointer}; later directories override earlier ones",
                        )
                    )
                    continue
                layer[kind][row.key] = row
        for kind in _KINDS:
            self.rows[kind].update(layer[kind])

    def _load_file(self, path: Path) -> list[tuple[str, _Row]]:
        file = _display(path)
        self.files.append(file)
        key = _file_key(path, file)
        known = _VALID_FILES.get(key) if key else None
        if known is not None:
            if known[1] is not None:
                self.migrated[file] = known[1]
            return list(known[0])
        before = len(self.errors)
        rows = self._parse_file(path, file)
        if key and len(self.errors) == before:  # only valid files are remembered; errors are reported afresh
            _VALID_FILES[key] = (tuple(rows), self.migrated.get(file))
        return rows

    def _parse_file(self, path: Path, file: str) -> list[tuple[str, _Row]]:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_object)
        except json.JSONDecodeError as e:
            self.errors.append(
                CatalogError(
                    f"{file}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}",
                    file=file,
                    pointer="",
                    expected="valid JSON",
                )
            )
            return []
        except (OSError, UnicodeDecodeError) as e:
            self.errors.append(_error(file, "", "a readable UTF-8 JSON file", hint=str(e)))
            return []
        except RecursionError:  # nested far past the limit below: the decoder ran out of stack before we could count
            doc = _TOO_DEEP
        if doc is _TOO_DEEP or nesting(doc) > MAX_NESTING:  # before anything below recurses into it
            self.errors.append(
                CatalogError(
                    f"{file}: {past_the_limit('the file')}",
                    file=file,
                    pointer="",
                    expected=f"JSON nested at most {MAX_NESTING} levels",
                )
            )
            return []
        if not isinstance(doc, dict):
            self.errors.append(_error(file, "", 'a JSON object with "$schema" and "version"', type(doc).__name__))
            return []
        repeated = _repeated_keys(file, doc, "")
        if repeated:  # json keeps the last value silently: the file does not say what its author meant
            self.errors.extend(repeated)
            return []
        doc = self._migrate(file, doc)
        if doc is None:
            return []
        problems = [_schema_error(file, e) for e in _validator().iter_errors(doc)]
        if problems:
            self.errors.extend(problems)
            for kind in _KINDS:  # so references to these ids do not add noise to the report
                listed = doc.get(kind)
                for raw in listed if isinstance(listed, list) else []:
                    if isinstance(raw, dict) and isinstance(raw.get("id"), str):
                        self.half_known[kind].add(raw["id"])
            return []
        out = []
        conv = get_converter()
        for kind in _KINDS:
            for i, raw in enumerate(doc.get(kind, [])):
                pointer = _ptr(kind, i)
                try:
                    value: Any = conv.structure(raw, _ROW_TYPES[kind])
                except Exception as e:  # the schema and the classes are generated together; defensive only
                    self.errors.append(_error(file, pointer, f"a valid {_ROW_TYPES[kind].__name__} row", hint=str(e)))
                    continue
                out.append((kind, _Row(key=_row_key(kind, raw), value=value, raw=raw, file=file, pointer=pointer)))
        return out

    def _migrate(self, file: str, doc: dict[str, Any]) -> dict[str, Any] | None:
        version = doc.get("version", UNSET)
        known = known_versions()
        expected = "a catalog version this segue reads: " + ", ".join(map(str, known))
        if version is UNSET:
            self.errors.append(_error(file, "", f'a "version" key ({expected})'))
            return None
        if not isinstance(version, int) or isinstance(version, bool) or version not in known:
            newer = isinstance(version, int) and not isinstance(version, bool) and version > CURRENT_VERSION
            hint = "the file was written for a newer segue; upgrade segue" if newer else "fix the version"
            self.errors.append(_error(file, "/version", expected, version, hint))
            return None
        if version < CURRENT_VERSION:
            self.migrated[file] = version
        while version < CURRENT_VERSION:
            doc = MIGRATIONS[version](copy.deepcopy(doc))
            version += 1
            doc["version"] = version
        return doc

    def check_references(self) -> None:
        ids = {k: set(self.rows[k]) | self.half_known[k] for k in ("model_types", "models", "vendors")}
        for row in self.rows["models"].values():
            self._ref(row, "model_type", ids["model_types"], "model type")
        for row in self.rows["model_vendors"].values():
            self._ref(row, "model", ids["models"], "model")
            self._ref(row, "vendor", ids["vendors"], "vendor")
        for row in self.rows["left_out"].values():
            self._ref(row, "vendor", ids["vendors"], "vendor")
        for row in self.rows["vendors"].values():
            self._check_patterns(row)
        self._check_names()
        defaults = [r for r in self.rows["model_types"].values() if r.raw.get("default_for_unknown_models") is True]
        for row in defaults[1:]:
            self.errors.append(
                _error(
                    row.file,
                    f"{row.pointer}/default_for_unknown_models",
                    "one model type with default_for_unknown_models: true",
                    hint=f"{defaults[0].key!r} ({defaults[0].file}#{defaults[0].pointer}) is already the default",
                )
            )

    def _check_patterns(self, row: _Row) -> None:
        """Each `model_patterns[].match` is a regular expression Python compiles."""
        for i, pat in enumerate(row.raw.get("model_patterns", [])):
            try:
                re.compile(pat["match"])
            except re.error as e:
                self.errors.append(
                    _error(
                        row.file,
                        f"{row.pointer}/model_patterns/{i}/match",
                        "a Python regular expression (re.fullmatch against the model id)",
                        pat["match"],
                        f"it does not compile: {e}",
                    )
                )

    def _check_names(self) -> None:
        """Every model id and alias names one model, and no left-out entry contradicts a model the catalog has."""
        owner: dict[str, str] = {mid: mid for mid in self.rows["models"]}
        for mid, row in self.rows["models"].items():
            for i, alias in enumerate(row.raw.get("aliases", [])):
                if alias in owner:
                    self.errors.append(
                        _error(
                            row.file,
                            f"{row.pointer}/aliases/{i}",
                            "an alias no other model id or alias uses",
                            alias,
                            f"it already names model {owner[alias]!r}",
                        )
                    )
                else:
                    owner[alias] = mid
        for row in self.rows["left_out"].values():
            name = row.raw["id"]
            if name in owner:
                self.errors.append(
                    _error(
                        row.file,
                        f"{row.pointer}/id",
                        "an id the catalog has no model row or alias for",
                        name,
                        f"model {owner[name]!r} has it; remove the left_out entry or the row",
                    )
                )

    def _ref(self, row: _Row, key: str, known: set[str], what: str) -> None:
        value = row.raw[key]
        if value not in known:
            self.errors.append(
                _error(row.file, f"{row.pointer}/{key}", f"an existing {what} id", value, _close(value, known))
            )


#: Valid files already parsed, validated and structured in this process, by `_file_key`: the packaged catalog
#: is read by every `Catalog.load`, and schema validation is most of a load's time. Rows are never mutated.
#: What a catalog file nested too deep for the JSON decoder to finish reads as.
_TOO_DEEP: Final = object()
_VALID_FILES: dict[tuple[Any, ...], tuple[tuple[tuple[str, _Row], ...], int | None]] = {}


def _file_key(path: Path, shown: str) -> tuple[Any, ...] | None:
    """Identifies a file's bytes as read by this code: path, size and mtime, and the migrations that apply."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (str(path.resolve()), shown, stat.st_size, stat.st_mtime_ns, CURRENT_VERSION, tuple(MIGRATIONS.items()))


def dirs_key(dirs: Sequence[Path]) -> tuple[Any, ...] | None:
    """Identifies what `Catalog.load` would read from `dirs` (each file's `_file_key`, in the order read); None when
    a directory or file cannot be read, so that the load reports it."""
    found: list[Any] = []
    for d in dirs:
        if not d.is_dir():
            return None
        for path in sorted(d.glob("*.json")):
            key = _file_key(path, _display(path))
            if key is None:
                return None
            found.append(key)
        found.append(str(d))  # a directory's end: the same files split differently are other layers
    return tuple(found)


def _row_key(kind: str, raw: dict[str, Any]) -> Any:
    if kind == "model_vendors":
        return (raw["model"], raw["vendor"], raw["role"])
    if kind == "left_out":
        return (raw["id"], raw["vendor"])
    return raw["id"]


class _Object(dict[str, Any]):
    """A parsed JSON object that repeated a key (json.loads keeps the last value without a word)."""

    repeated: list[str]


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    repeated = []
    for key, value in pairs:
        if key in obj and key not in repeated:
            repeated.append(key)
        obj[key] = value
    if not repeated:
        return obj
    marked = _Object(obj)
    marked.repeated = repeated
    return marked


def _repeated_keys(file: str, node: Any, pointer: str) -> list[CatalogError]:
    found = []
    if isinstance(node, _Object):
        for key in node.repeated:
            found.append(
                _error(
                    file,
                    pointer,
                    "each key once per object",
                    hint=f"{key!r} appears more than once; JSON would silently keep only the last one, so keep one",
                )
            )
    children: list[tuple[str | int, Any]] = (
        list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) else []
    )
    for step, child in children:
        found += _repeated_keys(file, child, pointer + _ptr(step))
    return found


def _collect(dirs: Sequence[Path]) -> _Loader:
    loader = _Loader()
    for d in dirs:
        loader.load_dir(d)
    loader.check_references()
    return loader
