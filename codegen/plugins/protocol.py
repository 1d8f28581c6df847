"""Plugin: the JSON-RPC method table -> the server's dispatch table and the TypeScript client.

- `protocol_methods.py`: `METHODS` (name -> params class, result class, kind, direction), `ErrorCode` and
  `ERROR_DATA`, which the server in `segue.protocol` dispatches with;
- `typescript/protocol-methods.d.ts`: the `SegueMethods` map (and its siblings) for TypeScript clients;
- `typescript/protocol-client.js` + `.d.ts`: a small typed client over a child process's stdio.

The table arrives checked (codegen/method_table.py).
"""

from __future__ import annotations

from codegen.emit import header, imports_by_module, render
from codegen.method_table import CANCEL_METHOD
from codegen.spec import Spec

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
    return {
        path: render(template, header=header([protocol.file], "#" if path.endswith(".py") else "//"), **context)
        for template, path in OUTPUTS.items()
    }


def _doc(text: str) -> str:
    """Text safe inside a /** */ comment."""
    return " ".join(text.split()).replace("*/", "*\\/")
