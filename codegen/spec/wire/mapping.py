"""Stage two for the wire: schemas/wire/<wire>.json mapping files -> checked, merged `Mapping`s.

A mapping file says, field by field, what segue writes to one vendor's wire (`to_vendor`: blocks, messages,
request envelopes, cache markers) and how it reads what comes back (`from_vendor`: response blocks, usage,
envelopes, stream events, errors), plus the vendor's vocabulary (`constants`: stop reasons, header names). Each
file is validated against codegen's grammar for mapping files (schemas/wire/wire-mapping.schema.json), merged
with the files it `extends`, then checked against the canonical model and the vendor SDKs (codegen/spec/wire/check.py),
so a typo fails here with the file and JSON pointer rather than as a 400 from the vendor.
codegen/plugins/wire/ renders the checked mappings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from codegen.errors import SchemaError
from codegen.model import Model, SchemaFile, read_json
from codegen.spec.wire.check import Checker
from codegen.spec.wire.rules import Mapping, Rule

__all__ = ["GRAMMAR", "Mapping", "Rule", "iter_wire_files", "load_mappings"]

MAPPING_SCHEMA = "wire-mapping.schema.json"
#: The sections a wire inherits from the wire it extends, rule by rule.
SECTIONS = ("to_vendor", "dispatch", "from_vendor", "parse_dispatch", "constants")
#: The grammar of mapping files. It describes what this module understands, so it is read from codegen's own
#: checkout whichever schema folder is being generated (a mapping folder cannot bring a grammar of its own).
GRAMMAR = Path(__file__).resolve().parents[3] / "schemas" / "wire" / MAPPING_SCHEMA


def load_mappings(wire_dir: Path, model: Model, display_root: Path | None = None) -> dict[str, Mapping]:
    """Every mapping file in `wire_dir`, merged with its parents and checked; {} when the folder does not exist."""
    root = display_root or wire_dir.parent.parent
    validator = Draft202012Validator(json.loads(GRAMMAR.read_text(encoding="utf-8")))
    raw_files: dict[str, SchemaFile] = {}
    for p in iter_wire_files(wire_dir):
        shown, data, raw = read_json(p, root)
        err = best_match(validator.iter_errors(raw))
        if err is not None:
            raise SchemaError(shown, _pointer(err.absolute_path), f"invalid wire mapping: {err.message}")
        if raw["wire"] != p.stem:
            raise SchemaError(shown, "/wire", f"wire {raw['wire']!r} must equal the file name {p.stem!r}")
        sha = hashlib.sha256(data).hexdigest()
        raw_files[p.stem] = SchemaFile(
            path=shown, id=f"urn:segue:wire:{p.stem}", module=p.stem, sha256=sha, raw=raw, types=()
        )
    mappings = {wire: _merge(wire, raw_files) for wire in raw_files}
    for m in mappings.values():
        Checker(m, model).check()
    return mappings


def _merge(wire: str, files: dict[str, SchemaFile]) -> Mapping:
    chain: list[SchemaFile] = []
    name: str | None = wire
    while name is not None:
        if name not in files:
            raise SchemaError(chain[-1].path, "/extends", f"extends unknown wire {name!r}; known: {sorted(files)}")
        if files[name] in chain:
            raise SchemaError(files[wire].path, "/extends", f"wires extend each other in a cycle through {name!r}")
        chain.append(files[name])
        name = files[name].raw.get("extends")
    sections: dict[str, dict[str, Rule]] = {}
    for section in SECTIONS:
        merged: dict[str, Rule] = {}
        for f in reversed(chain):  # the farthest ancestor first, so nearer files replace its rules
            for rule_name, spec in f.raw.get(section, {}).items():
                merged[rule_name] = Rule(
                    name=rule_name, spec=spec, file=f.path, pointer=f"/{section}/{rule_name}", wire=f.module
                )
        sections[section] = merged
    return Mapping(
        wire=wire,
        file=chain[0],
        chain=tuple(chain),
        parent=chain[0].raw.get("extends"),
        to_vendor=sections["to_vendor"],
        dispatch=sections["dispatch"],
        from_vendor=sections["from_vendor"],
        parse_dispatch=sections["parse_dispatch"],
        constants=sections["constants"],
    )


def iter_wire_files(wire_dir: Path) -> Iterator[Path]:
    """The mapping files: every *.json in `wire_dir` except the grammar (kept beside them for editors)."""
    if not wire_dir.is_dir():
        return iter(())
    return (p for p in sorted(wire_dir.glob("*.json")) if p.name != MAPPING_SCHEMA)


def _pointer(path: Any) -> str:
    return "/" + "/".join(str(p) for p in path)
