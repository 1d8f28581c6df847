"""Plugin: the JSON-RPC method table -> the server's dispatch table and the TypeScript client.

- `protocol_methods.py`: `METHODS` (name -> params class, result class, kind, direction), `ErrorCode` and
  `ERROR_DATA`, which the server in `segue.protocol` dispatches with;
- `typescript/protocol-methods.d.ts`: the `SegueMethods` map (and its siblings) for TypeScript clients;
- `typescript/protocol-client.js` + `.d.ts`: small typed clients, over a child process's stdio and over HTTP;
- `protocol.json`: the method table as a document of its own, for the exported bundle;
- `protocol.md`: the method reference (each method's params, result and errors; the error codes), which
  `python -m codegen` also writes into docs/protocol.md (codegen/docs.py).

The table arrives checked (codegen/spec/protocol.py).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from codegen.emit import header, imports_by_module, render
from codegen.model import Model, NamedType, referenced_names
from codegen.pytypes import field_table, md_cell, ts_type
from codegen.spec import Spec
from codegen.spec.protocol import CANCEL_METHOD, KEYWORD, Protocol

#: Template -> the file it renders, relative to the generated package.
OUTPUTS = {
    "protocol_methods.py.jinja": "protocol_methods.py",
    "protocol-methods.d.ts.jinja": "typescript/protocol-methods.d.ts",
    "protocol-client.d.ts.jinja": "typescript/protocol-client.d.ts",
    "protocol-client.js.jinja": "typescript/protocol-client.js",
}


def generate(spec: Spec, package: str) -> dict[str, str]:
    """The dispatch table and TypeScript client files; {} when no schema has a method table."""
    protocol = spec.protocol
    if protocol is None:
        return {}
    used = {n for m in protocol.methods for n in (m.params, m.result) if n} | {
        e.data for e in protocol.errors if e.data
    }
    context = {
        "package": package,
        "protocol": protocol,
        "imports": imports_by_module(used, spec.model.owner),
        "requests": protocol.of("request", "clientToServer"),
        "client_notifications": protocol.of("notification", "clientToServer"),
        "notifications": protocol.of("notification", "serverToClient"),
        "server_requests": protocol.of("request", "serverToClient"),
        "cancel_method": CANCEL_METHOD if any(m.name == CANCEL_METHOD for m in protocol.methods) else None,
        "doc": _doc,
    }
    files = {
        path: render(template, header=header([protocol.file], "#" if path.endswith(".py") else "//"), **context)
        for template, path in OUTPUTS.items()
    }
    files["protocol.json"] = json.dumps(method_table(protocol), indent=2, ensure_ascii=False) + "\n"
    files["protocol.md"] = reference(protocol, spec.model)
    return files


def reference(protocol: Protocol, model: Model) -> str:
    """The method reference in Markdown: the method table, each method's params / result / errors with their
    fields, the protocol's own types those use, and the error codes."""
    types = model.types
    inline = {n for m in protocol.methods for n in (m.params, m.result) if n}
    seen: list[str] = []
    pending = [n for m in protocol.methods for n in (m.params, m.result) if n]
    pending += [e.data for e in protocol.errors if e.data]
    while pending:
        name = pending.pop(0)
        if name in seen:
            continue
        seen.append(name)
        if model.owner[name] == protocol.file.module:  # other files' types are named, not described here
            pending += sorted(referenced_names(types[name]))
    local = sorted((types[n] for n in seen if n not in inline and model.owner[n] == protocol.file.module), key=_name)
    external = sorted((n, _file_of(model, n)) for n in seen if model.owner[n] != protocol.file.module)
    codes = {e.name: e.code for e in protocol.errors}

    def fields(label: str, name: str) -> str:
        return f"{label} `{name}`:\n\n{_table(types[name])}"

    return render(
        "protocol.md.jinja",
        header=header([protocol.file], "").replace("\n ", "\n").strip(),
        protocol=protocol,
        local_types=local,
        external_types=external,
        fields=fields,
        table=_table,
        cell=md_cell,
        ts_type=ts_type,
        arrow=lambda direction: _ARROWS[direction],
        error_ref=lambda name: f"{name} ({codes[name]})",
    )


_ARROWS = {"clientToServer": "client → server", "serverToClient": "server → client", "both": "either way"}


def _table(t: NamedType) -> str:
    return field_table(t) if t.fields else "No fields: send `{}`."


def _name(t: NamedType) -> str:
    return t.name


def _file_of(model: Model, name: str) -> str:
    return next(f.path for f in model.files if f.module == model.owner[name])


def method_table(protocol: Protocol) -> dict[str, Any]:
    """The `protocol` keyword as a document of its own, for the bundle: JSON Schema validators in strict mode
    (ajv's default) refuse an unknown keyword at a schema's root, so the bundled schema leaves it out. Type
    references name the bundled schema by its $id."""
    raw = copy.deepcopy(protocol.file.raw[KEYWORD])
    for node in [*raw["methods"].values(), *raw["errors"].values()]:
        for key in ("params", "result", "data"):
            if key in node:
                node[key]["$ref"] = f"{protocol.file.id}#/$defs/{node[key]['$ref'].rsplit('/', 1)[1]}"
    return {
        "$comment": f"Generated by `python -m codegen` from {protocol.file.path}: the JSON-RPC method table.",
        "schema": protocol.file.id,
        **raw,
    }


def _doc(text: str) -> str:
    """Text safe inside a /** */ comment."""
    return " ".join(text.split()).replace("*/", "*\\/")
