"""Loading catalog directories: parse, validate against the schema, migrate old versions, check references."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from segue._hooks import UNSET
from segue._resources import data_dir
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
CURRENT_VERSION: Final = 1
#: MIGRATIONS[n] turns a parsed version-n file into a version-(n + 1) file (it gets a deep copy; return the
#: new document). Shipping version 2 = bump CURRENT_VERSION, update the schema, add MIGRATIONS[1].
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


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
    """Collects every problem; `Catalog.load` raises the first, `check_dir` returns them all."""

    def __init__(self) -> None:
        self.errors: list[CatalogError] = []
        self.rows: dict[str, dict[Any, _Row]] = {k: {} for k in _KINDS}
        self.half_known: dict[str, set[str]] = {k: set() for k in _KINDS}  # ids in files that failed
        self.files: list[str] = []

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
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
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
        if not isinstance(doc, dict):
            self.errors.append(_error(file, "", 'a JSON object with "$schema" and "version"', type(doc).__name__))
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
                key = (raw["model"], raw["vendor"], raw["role"]) if kind == "model_vendors" else raw["id"]
                out.append((kind, _Row(key=key, value=value, raw=raw, file=file, pointer=pointer)))
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

    def _ref(self, row: _Row, key: str, known: set[str], what: str) -> None:
        value = row.raw[key]
        if value not in known:
            self.errors.append(
                _error(row.file, f"{row.pointer}/{key}", f"an existing {what} id", value, _close(value, known))
            )


def _collect(dirs: Sequence[Path]) -> _Loader:
    loader = _Loader()
    for d in dirs:
        loader.load_dir(d)
    loader.check_references()
    return loader


def check_dir(path: str | Path) -> list[CatalogError]:
    """Every problem of an app's catalog directory layered over the packaged catalog (empty list = valid)."""
    directory = Path(path)
    loader = _collect([packaged_catalog_dir(), directory])
    if directory.is_dir() and not any(directory.glob("*.json")):
        loader.errors.append(_error(_display(directory), "", "at least one *.json catalog file"))
    return loader.errors
