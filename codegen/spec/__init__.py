"""Everything the plugins render from, loaded and checked in one step before any plugin runs.

A `Spec` is the schema model (codegen/model.py), the vendor wire mappings (codegen/spec/wire/mapping.py) and the
JSON-RPC method table (codegen/spec/protocol.py). `load_spec` raises `SchemaError` for any bad input, so once it
returns, rendering cannot fail on the input and nothing is written for a bad schema.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from codegen.model import Model, load_model
from codegen.spec.protocol import Protocol, load_protocol
from codegen.spec.wire.mapping import Mapping, load_mappings

#: The wire mapping files live in this subfolder of the schema folder.
WIRE_SUBDIR = "wire"


@attrs.frozen(kw_only=True)
class Spec:
    model: Model
    #: Wire name -> its mapping, merged with the mappings it extends; empty when the schema folder has no wire/.
    wires: dict[str, Mapping]
    #: None when no schema file has a `protocol` keyword.
    protocol: Protocol | None


def load_spec(schema_dir: Path, display_root: Path | None = None) -> Spec:
    """Validate and load `schema_dir/*.schema.json`, `schema_dir/wire/*.json` and the method table, in that order.

    Paths in errors and headers are shown relative to `display_root` (default: the schema folder's parent).
    """
    root = display_root or schema_dir.parent
    model = load_model(schema_dir, display_root=root)
    wires = load_mappings(schema_dir / WIRE_SUBDIR, model, display_root=root)
    return Spec(model=model, wires=wires, protocol=load_protocol(model))
