"""The model catalog: versioned JSON files, validated at load, with the configuration cascade resolved once.

Layers, later wins per row key (model type id; model id; vendor id; (model, vendor, role)): the packaged
`catalogs/`, then each directory of `SEGUE_CATALOG_PATH` (os.pathsep-separated), then `extra_dirs`. Rows are
replaced whole, so an app's row says everything about that row. Within one directory an id is defined once.

Configuration bags cascade per serving path, later wins: model type < model < the vendor's `model_defaults` <
the inference provider's model-vendor row. Objects merge per key; arrays, scalars and explicit null replace;
absent keys inherit; model-developer rows never contribute. The table of every serving path (and a vendor-less
entry per model) is built once in `Catalog.load`; lookups afterwards are dict reads. Nothing about a vendor is
written in this module: it is all catalog data.
"""

from __future__ import annotations

import copy
import difflib
import functools
import importlib.resources
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Generic, TypeVar

import attrs

from segue._hooks import UNSET
from segue.errors import SegueError
from segue.generated import Model, ModelType, ModelVendor, Usage, Vendor, get_converter

__all__ = [
    "CURRENT_VERSION",
    "MIGRATIONS",
    "Catalog",
    "CatalogError",
    "CatalogLookupError",
    "ExplainedKey",
    "Prices",
    "Resolved",
    "Source",
    "check_dir",
    "known_versions",
    "merge_configs",
    "packaged_catalog_dir",
]

KeyPath = tuple[str, ...]
_T = TypeVar("_T")

#: The version this segue writes and resolves. Older files are migrated on load through MIGRATIONS.
CURRENT_VERSION: Final = 1
#: MIGRATIONS[n] turns a parsed version-n file into a version-(n + 1) file (it gets a deep copy; return the
#: new document). Shipping version 2 = bump CURRENT_VERSION, update the schema, add MIGRATIONS[1].
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}

_CATALOG_ENV = "SEGUE_CATALOG_PATH"
_KINDS: Final = ("model_types", "models", "vendors", "model_vendors")
_ROW_TYPES: Final[dict[str, type]] = {
    "model_types": ModelType,
    "models": Model,
    "vendors": Vendor,
    "model_vendors": ModelVendor,
}


class CatalogError(SegueError, ValueError):
    """A catalog file, row or lookup is wrong. `.file` and `.pointer` (JSON pointer) locate it; `.expected`
    says what would have been right. `.more` holds further problems found in the same load."""

    def __init__(self, message: str, *, file: str | None, pointer: str = "", expected: str = "") -> None:
        super().__init__(message)
        self.file = file
        self.pointer = pointer
        self.expected = expected
        self.more: list[CatalogError] = []

    def __str__(self) -> str:
        return str(self.args[0])


class CatalogLookupError(CatalogError, KeyError):
    """An unknown model, vendor or serving path asked of a loaded catalog (also a KeyError)."""


def _error(file: str | None, pointer: str, expected: str, got: Any = UNSET, hint: str = "") -> CatalogError:
    where = f"{file}#{pointer}" if file is not None else (pointer or "catalog")
    got_text = "" if got is UNSET else f", got {got!r}"
    return CatalogError(
        f"{where}: expected {expected}{got_text}" + (f"; {hint}" if hint else ""),
        file=file,
        pointer=pointer,
        expected=expected,
    )


def _close(word: str, choices: Iterable[str]) -> str:
    near = difflib.get_close_matches(word, sorted(set(choices)), n=3, cutoff=0.5)
    return f"did you mean {', '.join(repr(n) for n in near)}?" if near else ""


def _ptr(*parts: str | int) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def known_versions() -> list[int]:
    """Versions this segue reads: the current one and every older one with a migration chain to it."""
    versions, v = [CURRENT_VERSION], CURRENT_VERSION - 1
    while v in MIGRATIONS:
        versions.insert(0, v)
        v -= 1
    return versions


# --- provenance and merge ------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Source:
    """Where a resolved value came from: a file, the JSON pointer of the value, and the cascade layer."""

    file: str
    pointer: str
    layer: str

    def at(self, key: str) -> Source:
        return attrs.evolve(self, pointer=self.pointer + _ptr(key))

    def __str__(self) -> str:
        return f"{self.file}#{self.pointer}"


def _merge_into(
    target: dict[str, Any], layer: Mapping[str, Any], src: Source, prefix: KeyPath, prov: dict[KeyPath, Source]
) -> None:
    for key, value in layer.items():
        if value is UNSET:  # absent: inherit
            continue
        path = (*prefix, key)
        if isinstance(value, Mapping):
            existing = target.get(key)
            if not isinstance(existing, dict):
                _forget(prov, path)
                existing = target[key] = {}
            _merge_into(existing, value, src.at(key), path, prov)
        else:
            _forget(prov, path)
            target[key] = copy.deepcopy(value)  # arrays must not alias the layer
            prov[path] = src.at(key)


def _forget(prov: dict[KeyPath, Source], path: KeyPath) -> None:
    for p in [p for p in prov if p[: len(path)] == path]:
        del prov[p]


def _cascade(layers: Sequence[tuple[Any, Source]]) -> tuple[dict[str, Any], dict[KeyPath, Source]]:
    merged: dict[str, Any] = {}
    prov: dict[KeyPath, Source] = {}
    for bag, src in layers:
        if isinstance(bag, Mapping):  # non-object and null layers contribute nothing
            _merge_into(merged, bag, src, (), prov)
    return merged, prov


def merge_configs(*layers: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Merge configuration bags, later wins: objects per key, arrays/scalars/null replace, absent inherits.

    Returns None when no layer contributes. Inputs are never mutated, and the result shares no containers
    with them."""
    anon = Source(file="<memory>", pointer="", layer="")
    merged, _ = _cascade([(layer, anon) for layer in layers])
    return merged if any(isinstance(layer, Mapping) for layer in layers) else None


# --- resolved serving paths --------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Prices:
    """Dollars per million tokens. A missing cache_read or cache_write_5m price is the input price (no
    discount known); a missing cache_write_1h price is the cache_write_5m price."""

    input: float
    output: float
    cache_read: float
    cache_write_5m: float
    cache_write_1h: float

    def cost(self, usage: Usage) -> float:
        """Dollars for one usage record (input_tokens is the whole prompt; missing cache counts are 0)."""
        read = usage.cache_read_tokens or 0
        write = usage.cache_write_tokens or 0
        write_1h = min(usage.cache_write_1h_tokens or 0, write)
        if read + write > usage.input_tokens:
            raise ValueError(
                f"usage.cache_read_tokens + cache_write_tokens ({read} + {write}) exceed input_tokens "
                f"({usage.input_tokens}); input_tokens must count the whole prompt, cached parts included"
            )
        uncached = usage.input_tokens - read - write
        return (
            uncached * self.input
            + read * self.cache_read
            + (write - write_1h) * self.cache_write_5m
            + write_1h * self.cache_write_1h
            + usage.output_tokens * self.output
        ) / 1_000_000


@attrs.frozen(kw_only=True)
class ExplainedKey:
    """One resolved leaf: its key path, value, and the file + JSON pointer + layer that supplied it."""

    path: KeyPath
    value: Any
    file: str
    pointer: str
    layer: str


def _read_only(prov: Mapping[KeyPath, Source]) -> Mapping[KeyPath, Source]:
    return MappingProxyType(dict(prov))


class _LlmKey(Generic[_T]):
    """A typed read of the `llm` key of the same name: None when absent, null or of another type."""

    def __init__(self, kind: type[_T]) -> None:
        self.kind = kind

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    def __get__(self, obj: Any, owner: type | None = None) -> _T | None:
        if obj is None:  # looked up on the class (help(), introspection)
            return None
        v = obj.get("llm", self.key)
        ok = isinstance(v, self.kind) and (self.kind is bool or not isinstance(v, bool))
        return v if ok else None


@attrs.frozen(kw_only=True)
class Resolved:
    """The cascade resolved for one serving path (vendor None = model type and model layers only).

    `config` returns a fresh copy, so callers can never change the catalog; `get` reads without copying."""

    model: str
    vendor: str | None
    api_name: str | None
    wire: str | None
    priority: int | None
    layers: tuple[str, ...]
    _config: dict[str, Any] = attrs.field(alias="config", repr=False)
    provenance: Mapping[KeyPath, Source] = attrs.field(converter=_read_only, repr=False)

    @property
    def config(self) -> dict[str, Any]:
        return copy.deepcopy(self._config)

    def get(self, *path: str, default: Any = None) -> Any:
        node: Any = self._config
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return default
            node = node[key]
        return copy.deepcopy(node) if isinstance(node, dict | list) else node

    def source(self, *path: str) -> Source | None:
        return self.provenance.get(path)

    @property
    def label(self) -> str:
        return f"{self.model}@{self.vendor}" if self.vendor else self.model

    @property
    def prefix_prompt_cache(self) -> bool:
        """Only a literal true counts: null, absent, "yes" or 1 all read as False."""
        return self.get("llm", "prefix_prompt_cache") is True

    cache_kind = _LlmKey(str)
    cache_min_tokens = _LlmKey(int)
    cache_increment_tokens = _LlmKey(int)
    cache_max_breakpoints = _LlmKey(int)
    cache_lookback_blocks = _LlmKey(int)
    context_window = _LlmKey(int)
    supports_native_tools = _LlmKey(bool)
    supports_reasoning = _LlmKey(bool)

    @property
    def pricing(self) -> Prices | None:
        """The five prices, or None when the input or output price is unknown for this path."""
        p = self.get("pricing") or {}
        num = {k: v for k, v in p.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        if "input" not in num or "output" not in num:
            return None
        w5m = float(num.get("cache_write_5m", num["input"]))
        return Prices(
            input=float(num["input"]),
            output=float(num["output"]),
            cache_read=float(num.get("cache_read", num["input"])),
            cache_write_5m=w5m,
            cache_write_1h=float(num.get("cache_write_1h", w5m)),
        )

    def cost(self, usage: Usage) -> float:
        prices = self.pricing
        if prices is None:
            raise CatalogLookupError(
                f"no pricing for {self.label}: the catalog has no input/output price for this serving path; add "
                "`pricing` to its model or model-vendor row in a catalog layer",
                file=None,
                expected="pricing.input and pricing.output",
            )
        return prices.cost(usage)

    def explain(self) -> list[ExplainedKey]:
        return [
            ExplainedKey(path=p, value=self.get(*p), file=s.file, pointer=s.pointer, layer=s.layer)
            for p, s in sorted(self.provenance.items())
        ]


# --- loading ---------------------------------------------------------------------------------------------------


def packaged_catalog_dir() -> Path:
    """`segue/_catalogs` inside an installed wheel, else the repository's `catalogs/` next to `sdk/`."""
    return _data_dir("_catalogs", "catalogs")


def _data_dir(packaged: str, repo: str) -> Path:
    res = importlib.resources.files("segue") / packaged
    if res.is_dir():
        return Path(str(res))
    return Path(__file__).resolve().parents[2] / repo


@functools.cache
def _validator() -> Any:
    import jsonschema

    path = _data_dir("_schemas", "schemas") / "catalog.schema.json"
    if not path.is_file():  # a source tree without schemas/: the generated copy is the same file
        path = Path(__file__).resolve().parent / "generated" / "schemas" / "catalog.schema.json"
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


# --- the catalog -------------------------------------------------------------------------------------------------


class Catalog:
    """A loaded, validated catalog with every serving path resolved. Build it with `Catalog.load`."""

    def __init__(self, loader: _Loader) -> None:
        rows = loader.rows
        self.files: tuple[str, ...] = tuple(loader.files)
        self._types: dict[str, ModelType] = {k: r.value for k, r in rows["model_types"].items()}
        self._models: dict[str, Model] = {k: r.value for k, r in rows["models"].items()}
        self._vendors: dict[str, Vendor] = {k: r.value for k, r in rows["vendors"].items()}
        self._rows: dict[tuple[str, str, str], ModelVendor] = {k: r.value for k, r in rows["model_vendors"].items()}
        self._table: dict[tuple[str, str | None], Resolved] = {}
        self._api_names: dict[str, list[tuple[str, str]]] = {}

        def layer(row: _Row, key: str, label: str) -> tuple[Any, Source]:
            return row.raw.get(key), Source(file=row.file, pointer=f"{row.pointer}/{key}", layer=label)

        base: dict[str, list[tuple[Any, Source]]] = {}
        for mid, mrow in rows["models"].items():
            trow = rows["model_types"][mrow.raw["model_type"]]
            base[mid] = [
                layer(trow, "configuration", f"model type {trow.key}"),
                layer(mrow, "configuration", f"model {mid}"),
            ]
            self._table[(mid, None)] = self._resolved(mid, None, None, base[mid])
        for (mid, vid, role), row in rows["model_vendors"].items():
            if role != "inference_provider":  # developer rows describe authorship, never configuration
                continue
            vrow = rows["vendors"][vid]
            layers = [
                *base[mid],
                layer(vrow, "model_defaults", f"vendor {vid} model_defaults"),
                layer(row, "configuration", f"model-vendor {mid}@{vid}"),
            ]
            self._table[(mid, vid)] = self._resolved(mid, vid, row.value, layers)
            self._api_names.setdefault(row.value.api_name or mid, []).append((mid, vid))

    def _resolved(
        self, mid: str, vid: str | None, row: ModelVendor | None, layers: list[tuple[Any, Source]]
    ) -> Resolved:
        config, prov = _cascade(layers)
        return Resolved(
            model=mid,
            vendor=vid,
            api_name=row.api_name or mid if row else None,
            wire=self._vendors[vid].wire if vid else None,
            priority=row.priority if row else None,
            layers=tuple(src.layer for _, src in layers),
            config=config,
            provenance=prov,
        )

    @classmethod
    def load(cls, extra_dirs: Sequence[str | Path] = (), *, env: bool = True) -> Catalog:
        """Packaged catalog < each `SEGUE_CATALOG_PATH` dir (when env) < `extra_dirs`. Raises CatalogError."""
        dirs = [packaged_catalog_dir()]
        if env:
            dirs += [Path(p) for p in os.environ.get(_CATALOG_ENV, "").split(os.pathsep) if p.strip()]
        dirs += [Path(d) for d in extra_dirs]
        loader = _collect(dirs)
        if loader.errors:
            first, *more = loader.errors
            first.more = more
            if more:
                first.args = (f"{first} (and {len(more)} more problem(s); `segue catalog check DIR` lists all)",)
            raise first
        return cls(loader)

    # lookups -------------------------------------------------------------------------------------------------

    def model_for(self, name: str, vendor: str | None = None) -> str:
        """The catalog model id for a model id or a row's api_name (restricted to `vendor` when given)."""
        if name in self._models:
            return name
        hits = {m for m, v in self._api_names.get(name, []) if vendor is None or v == vendor}
        if len(hits) == 1:
            return hits.pop()
        if hits:
            raise CatalogLookupError(
                f"api name {name!r} names several models ({', '.join(sorted(hits))}); pass vendor= to choose",
                file=None,
                expected="an unambiguous model id or api_name",
            )
        names = list(self._models) + list(self._api_names)
        hint = _close(name, names) or f"known models: {', '.join(sorted(self._models))}"
        raise CatalogLookupError(
            f"unknown model {name!r}" + (f" for vendor {vendor!r}" if vendor else "") + f"; {hint} (add it "
            f"to a catalog directory via extra_dirs or {_CATALOG_ENV} if it is new)",
            file=None,
            expected="a catalog model id or api_name",
        )

    def resolve(self, model: str, vendor: str | None = None) -> Resolved:
        """The resolved configuration of a serving path; vendor None = model type and model layers only."""
        mid = self.model_for(model, vendor)
        if vendor is not None and vendor not in self._vendors:
            hint = _close(vendor, self._vendors) or f"known vendors: {', '.join(sorted(self._vendors))}"
            raise CatalogLookupError(f"unknown vendor {vendor!r}; {hint}", file=None, expected="a catalog vendor id")
        found = self._table.get((mid, vendor))
        if found is None:
            served = ", ".join(r.vendor for r in self.inference_vendors(mid, include_inactive=True)) or "none"
            raise CatalogLookupError(
                f"vendor {vendor!r} has no inference_provider row for model {mid!r} (its inference providers: "
                f"{served}); add a model_vendors row to serve it there",
                file=None,
                expected="a (model, vendor) serving path",
            )
        return found

    def inference_vendors(self, model: str, *, include_inactive: bool = False) -> list[ModelVendor]:
        """The model's inference-provider rows, preferred first (priority descending, then vendor id)."""
        mid = self.model_for(model)
        rows = [
            r
            for (m, _, role), r in self._rows.items()
            if m == mid and role == "inference_provider" and (include_inactive or r.status != "inactive")
        ]
        return sorted(rows, key=lambda r: (-r.priority, r.vendor))

    def vendor(self, vendor_id: str) -> Vendor:
        try:
            return self._vendors[vendor_id]
        except KeyError:
            hint = _close(vendor_id, self._vendors) or f"known vendors: {', '.join(sorted(self._vendors))}"
            raise CatalogLookupError(
                f"unknown vendor {vendor_id!r}; {hint}", file=None, expected="a vendor id"
            ) from None

    def model(self, model: str) -> Model:
        return self._models[self.model_for(model)]

    def model_type(self, type_id: str) -> ModelType:
        return self._types[type_id]

    @property
    def model_ids(self) -> list[str]:
        return sorted(self._models)

    @property
    def vendor_ids(self) -> list[str]:
        return sorted(self._vendors)

    def serving_paths(self) -> list[tuple[str, str | None]]:
        """Every resolvable (model, vendor) pair, with (model, None) for each model."""
        return sorted(self._table, key=lambda k: (k[0], k[1] or ""))

    def cost(self, usage: Usage, model: str, vendor: str | None = None) -> float:
        """Dollars for `usage` on a serving path, from the catalog pricing."""
        return self.resolve(model, vendor).cost(usage)

    def explain(self, model: str, vendor: str | None = None) -> list[ExplainedKey]:
        return self.resolve(model, vendor).explain()

    def explain_text(self, model: str, vendor: str | None = None) -> str:
        """A readable table of every resolved key with the layer, file and JSON pointer it came from."""
        r = self.resolve(model, vendor)
        head = r.label + (f"  (api_name {r.api_name}, wire {r.wire}, priority {r.priority})" if r.vendor else "")
        rows = [(".".join(k.path), json.dumps(k.value), k.layer, f"{k.file}#{k.pointer}") for k in r.explain()]
        table = [("key", "value", "layer", "source"), *rows]
        widths = [max(len(row[i]) for row in table) for i in range(3)]
        lines = [head, "cascade: " + " < ".join(r.layers), ""]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3] for row in table]
        if not rows:
            lines.append("(no configuration: every layer is empty)")
        return "\n".join(lines)


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
