"""codegen's method table: schemas/protocol.schema.json `protocol` -> dispatch table, TypeScript map and client.

A bad table fails codegen with the file, the JSON pointer and the reason, and nothing is written.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codegen.errors import SchemaError
from codegen.model import load_model
from codegen.spec.protocol import load_protocol
from segue.apps.protocol import Control, make_dispatcher
from segue.apps.protocol.methods import Methods
from segue.apps.protocol.rpc import Dispatcher
from segue.generated.protocol import ServerLimits
from segue.generated.protocol_methods import ERROR_DATA, LEGACY_CODES, METHODS, PROTOCOL_VERSION, ErrorCode
from tests._support.codegen_runner import codegen

REPO = Path(__file__).resolve().parents[2]
GENERATED = Path("sdk/segue/generated")
SCHEMA = json.loads((REPO / "schemas" / "protocol.schema.json").read_text())


def test_the_dispatch_table_is_the_schemas_method_table() -> None:
    table = SCHEMA["protocol"]["methods"]
    assert (
        set(METHODS)
        == set(table)
        == {
            "initialize",
            "initialized",
            "shutdown",
            "exit",
            "run",
            "retry",
            "resume",
            "run/recover",
            "prewarm",
            "runs/list",
            "runs/get",
            "runs/explain",
            "runs/sweep",
            "catalog/explain",
            "agents/list",
            "agents/get",
            "catalog/list",
            "$/cancelRequest",
            "run/event",
            "tool/call",
        }
    )
    for name, spec in table.items():
        method = METHODS[name]
        assert (method.kind, method.direction) == (spec["kind"], spec["direction"])
        assert method.params.__name__ == spec["params"]["$ref"].rsplit("/", 1)[1]
        assert (method.result.__name__ if method.result else None) == (
            spec["result"]["$ref"].rsplit("/", 1)[1] if "result" in spec else None
        )
    codes = {name: e["code"] for name, e in SCHEMA["protocol"]["errors"].items()}
    assert {e.name: e.value for e in ErrorCode} == {
        "PARSE_ERROR": -32700,
        "INVALID_REQUEST": -32600,
        "METHOD_NOT_FOUND": -32601,
        "INVALID_PARAMS": -32602,
        "INTERNAL_ERROR": -32603,
        "SERVER_NOT_INITIALIZED": -32002,
        "REPLAY_RUN_ERROR": -32001,
        "IDEMPOTENCY_CONFLICT": -32008,
        "INPUT_ERROR": -32003,
        "REQUEST_IN_FLIGHT": -32004,
        "RUN_NOT_FOUND": -32005,
        "CATALOG_LOOKUP_ERROR": -32006,
        "TENANT_NOT_ALLOWED": -32007,
        "UNSUPPORTED_PROTOCOL_VERSION": -32009,
        "SERVER_BUSY": -32010,
        "PROVIDER_FAILED": -32011,
        "REQUEST_CANCELLED": -32800,
    }
    # IdempotencyConflict was -32002 in protocol 1.0, before LSP's ServerNotInitialized took that code: a session
    # that speaks 1.0 still receives -32002 for it.
    assert LEGACY_CODES == {ErrorCode.IDEMPOTENCY_CONFLICT: {"1.0": -32002}}
    assert PROTOCOL_VERSION == SCHEMA["protocol"]["version"] == "1.2"
    assert {n for n, m in METHODS.items() if m.since == "1.0"} == {
        "run",
        "retry",
        "resume",
        "runs/list",
        "runs/get",
        "catalog/explain",
        "$/cancelRequest",
        "run/event",
        "tool/call",
    }, "the methods of protocol 1.0 (what the frozen 1.0 client in tests/node/fixtures knows) keep since 1.0"
    assert sorted(codes.values()) == sorted(e.value for e in ErrorCode)
    assert ERROR_DATA[ErrorCode.REPLAY_RUN_ERROR].__name__ == "ReplayRunErrorData"
    # The server serves every client-to-server request of the table (Dispatcher refuses a partial handler set).
    control = Control(transport="stdio", limits=ServerLimits(max_message_bytes=1, shutdown_timeout_seconds=1.0))
    make_dispatcher(app=None, control=control)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="handlers must cover exactly"):
        Dispatcher(Methods(app=None).handlers())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="notification handlers must cover exactly"):
        Dispatcher(make_dispatcher(None, control).handlers, {"exit": control.exit})  # type: ignore[arg-type]


def test_typescript_map_and_client_are_in_the_export_bundle(tmp_path: Path) -> None:
    from segue.apps.cli.main import main

    assert main(["schema", "export", str(tmp_path / "bundle")]) == 0
    ts = tmp_path / "bundle" / "typescript"
    methods = (ts / "protocol-methods.d.ts").read_text()
    assert '"run": { params: RunParams; result: RunResponse };' in methods
    assert '"tool/call": { params: ToolCallParams; result: ToolCallResult };' in methods
    assert "ReplayRunError: ReplayRunErrorData;" in methods
    client_js = (ts / "protocol-client.js").read_text()
    assert "ReplayRunError: -32001," in client_js and '"$/cancelRequest"' in client_js
    assert "export declare class SegueClient" in (ts / "protocol-client.d.ts").read_text()
    bundled = json.loads((tmp_path / "bundle" / "schemas" / "protocol.schema.json").read_text())
    assert "protocol" not in bundled, "strict validators refuse an unknown keyword at a schema's root"
    table = json.loads((tmp_path / "bundle" / "protocol.json").read_text())
    assert table["methods"]["run"]["result"] == {"$ref": "urn:segue:schema:protocol:1#/$defs/RunResponse"}
    assert {"RunResult", "RunEvent", "ToolCallBlock"} <= set(bundled["$defs"]), "refs resolved into the bundle"


def _edit(fn: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    schema = copy.deepcopy(SCHEMA)
    fn(schema)
    return schema


def _methods(schema: dict[str, Any]) -> dict[str, Any]:
    methods: dict[str, Any] = schema["protocol"]["methods"]
    return methods


BAD_TABLES: dict[str, tuple[dict[str, Any], str, str]] = {
    "misspelled_key": (
        _edit(lambda s: _methods(s)["run"].update(parms=_methods(s)["run"].pop("params"))),
        "#/protocol/methods/run",
        "'parms' was unexpected",
    ),
    "request_without_result": (
        _edit(lambda s: _methods(s)["runs/list"].pop("result")),
        "#/protocol/methods/runs~1list",
        "needs a `result` type",
    ),
    "notification_with_result": (
        _edit(lambda s: _methods(s)["run/event"].update(result={"$ref": "#/$defs/RunResponse"})),
        "#/protocol/methods/run~1event/result",
        "cannot have a result",
    ),
    "dangling_params": (
        _edit(lambda s: _methods(s)["run"].update(params={"$ref": "#/$defs/RunParamz"})),
        "#/protocol/methods/run/params",
        "names no $defs type",
    ),
    "params_not_an_object": (
        _edit(lambda s: _methods(s)["run"].update(params={"$ref": "#/$defs/RequestId"})),
        "#/protocol/methods/run/params",
        "must be an object type",
    ),
    "bad_method_name": (
        _edit(lambda s: _methods(s).update({"Run Now": _methods(s)["run"]})),
        "#/protocol/methods",
        "'Run Now' does not match",
    ),
    "duplicate_code": (
        _edit(lambda s: s["protocol"]["errors"]["RunNotFound"].update(code=-32001)),
        "#/protocol/errors/RunNotFound/code",
        "already used by 'ReplayRunError'",
    ),
    "standard_code_changed": (
        _edit(lambda s: s["protocol"]["errors"]["ParseError"].update(code=-32000)),
        "#/protocol/errors/ParseError/code",
        "JSON-RPC's -32700",
    ),
    "unknown_error_name": (
        _edit(lambda s: _methods(s)["run"].update(errors=["ReplayError"])),
        "#/protocol/methods/run/errors/0",
        "unknown error 'ReplayError'",
    ),
    "missing_version": (
        _edit(lambda s: s["protocol"].pop("version")),
        "#/protocol",
        "'version' is a required property",
    ),
    "since_after_the_tables_version": (
        _edit(lambda s: _methods(s)["agents/list"].update(since="1.3")),
        "#/protocol/methods/agents~1list/since",
        "since 1.3 is after the table's version 1.2",
    ),
    "legacy_code_taken_in_that_version": (
        _edit(lambda s: s["protocol"]["errors"]["IdempotencyConflict"].update(legacy_codes={"1.0": -32001})),
        "#/protocol/errors/IdempotencyConflict/legacy_codes/1.0",
        "in protocol 1.0, code -32001 is already 'ReplayRunError'",
    ),
    "legacy_code_for_the_current_version": (
        _edit(lambda s: s["protocol"]["errors"]["IdempotencyConflict"].update(legacy_codes={"1.2": -32002})),
        "#/protocol/errors/IdempotencyConflict/legacy_codes/1.2",
        "a legacy code is for a version from since (1.0) to before the table's version (1.2)",
    ),
    "keyword_below_top_level": (
        _edit(lambda s: s["$defs"]["RunParams"].update(protocol={})),
        "#/$defs/RunParams",
        "only allowed at the top level",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_TABLES))
def test_bad_method_tables_fail_with_file_pointer_and_reason(tmp_path: Path, case: str) -> None:
    schema, pointer, reason = BAD_TABLES[case]
    shutil.copytree(REPO / "schemas", tmp_path / "schemas")
    (tmp_path / "schemas" / "protocol.schema.json").write_text(json.dumps(schema, indent=2))
    with pytest.raises(SchemaError) as failure:
        load_protocol(load_model(tmp_path / "schemas"))
    assert f"schemas/protocol.schema.json{pointer}: " in str(failure.value)
    assert reason in str(failure.value)


def test_python_m_codegen_exits_2_and_writes_nothing_for_a_bad_table(workspace: Path) -> None:
    schema, pointer, reason = BAD_TABLES["dangling_params"]
    (workspace / "schemas" / "protocol.schema.json").write_text(json.dumps(schema, indent=2))
    before = {p: p.read_bytes() for p in (workspace / GENERATED).rglob("*") if p.is_file()}

    result = codegen("--schemas", str(workspace / "schemas"), "--out", str(workspace))

    assert result.returncode == 2, result.stderr
    assert f"codegen: schemas/protocol.schema.json{pointer}: " in result.stderr and reason in result.stderr
    assert {p: p.read_bytes() for p in (workspace / GENERATED).rglob("*") if p.is_file()} == before


def test_a_new_method_reaches_python_and_typescript(workspace: Path) -> None:
    schema = copy.deepcopy(SCHEMA)
    _methods(schema)["runs/count"] = {
        "kind": "request",
        "direction": "clientToServer",
        "description": "How many runs the tenant has.",
        "params": {"$ref": "#/$defs/RunsListParams"},
        "result": {"$ref": "#/$defs/RunNotFoundData"},
    }
    (workspace / "schemas" / "protocol.schema.json").write_text(json.dumps(schema, indent=2))
    args = ("--schemas", str(workspace / "schemas"), "--out", str(workspace))
    stale = codegen("--check", *args)
    assert stale.returncode == 1
    for path in ("protocol_methods.py", "typescript/protocol-methods.d.ts", "typescript/protocol-client.js"):
        assert f"stale: {GENERATED}/{path}" in stale.stderr
    assert codegen(*args).returncode == 0
    assert '    "runs/count": Method(' in (workspace / GENERATED / "protocol_methods.py").read_text()
    ts = (workspace / GENERATED / "typescript" / "protocol-methods.d.ts").read_text()
    assert '"runs/count": { params: RunsListParams; result: RunNotFoundData };' in ts


def test_the_method_reference_in_the_docs_is_generated_and_checked(workspace: Path) -> None:
    """docs/protocol.md carries the generated reference between two markers: an edit by hand, or a schema change
    not regenerated, is stale for `--check`; `python -m codegen` restores it; lost markers are an error."""
    doc = workspace / "docs" / "protocol.md"
    original = doc.read_text()
    reference = (workspace / GENERATED / "protocol.md").read_text().strip()
    assert reference in original, "the docs carry the generated reference verbatim"
    assert "### `agents/get`" in reference and "| -32002 | ServerNotInitialized | 1.1 |" in reference
    assert "| -32008 | IdempotencyConflict | 1.0 | `IdempotencyConflictData` |" in reference
    assert "-32002 in 1.0 |" in reference, "the legacy code is in the table"

    args = ("--schemas", str(workspace / "schemas"), "--out", str(workspace))
    doc.write_text(original.replace("Start the session, as LSP's initialize", "Say hello"))
    stale = codegen("--check", *args)
    assert stale.returncode == 1 and "stale: docs/protocol.md (its generated section)" in stale.stderr
    assert codegen(*args).returncode == 0 and doc.read_text() == original

    schema = copy.deepcopy(SCHEMA)
    _methods(schema)["agents/list"]["description"] = "Every agent, in the config's order."
    (workspace / "schemas" / "protocol.schema.json").write_text(json.dumps(schema, indent=2))
    stale = codegen("--check", *args)
    assert "stale: docs/protocol.md (its generated section)" in stale.stderr
    assert codegen(*args).returncode == 0
    assert "Request, client → server, since 1.1. Every agent, in the config's order." in doc.read_text()
    # Prose outside the markers is the author's: kept as it was.
    assert doc.read_text().split("<!-- BEGIN GENERATED")[0] == original.split("<!-- BEGIN GENERATED")[0]

    doc.write_text(original.replace("<!-- END GENERATED: protocol.md -->", ""))
    broken = codegen(*args)
    assert broken.returncode == 2 and "docs/protocol.md needs exactly one pair of marker lines" in broken.stderr
