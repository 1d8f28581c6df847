"""Vendor key strings live in schemas/wire/, not in hand-written code: a count that cannot regress.

The wire mappings (schemas/wire/*.json) say every key segue writes to or reads from a vendor's JSON, checked against
the SDK types at generation time. Hand-written code that reads or writes vendor JSON with its own key strings would
bypass both, so this test counts the string literals in the hand-written wire code (sdk/segue/wire/, providers/,
dashboard/, explain.py) that are vendor vocabulary, and fails for any not in the short allow-list below.

Vendor vocabulary is: every key and `type` tag the mappings spell, their constants (strings, set members, table
keys), and every key and `type` tag of the SDK types they name. A literal counts where it is a runtime string:
docstrings, f-string text and `Literal[...]` types do not.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from codegen.spec import load_spec
from codegen.spec.wire.rules import Mapping
from codegen.spec.wire.sdk import SdkLookupError, literals, shape
from tests._support.environment import REPO

SDK = REPO / "sdk" / "segue"
#: The hand-written modules that deal with vendor JSON (the generated ones are sdk/segue/generated/wire/).
FOLDERS = ("wire", "providers", "apps/dashboard")
#: The history readers (wire/history.py, wire/history_parts.py, wire/<vendor>/history.py) read the vendor SDKs'
#: own message shapes (issue 23), checked by tests/wire/test_history_types.py against the SDKs' TypedDicts rather
#: than against the mappings; they sat outside these folders before issue 25. The wire folder holds one package per
#: vendor, read through.
HAND_WRITTEN = [
    *sorted(p for d in FOLDERS for p in (SDK / d).rglob("*.py") if not (d == "wire" and p.name.startswith("history"))),
    SDK / "cache" / "explain.py",
]

#: (file under sdk/segue/, string) -> why it may stay. Keep this short: a vendor key belongs in a mapping.
ALLOWED: dict[tuple[str, str], str] = {
    ("wire/openai_chat/request.py", "max_completion_tokens"): "a value of the catalog's llm.max_tokens_field "
    "(schemas/catalog.schema.json), which names the key the generated request function fills",
    ("wire/common.py", "text"): "StreamDelta.kind, segue's word for a piece of streamed text",
    ("wire/common.py", "reasoning"): "StreamDelta.kind, segue's word for a piece of streamed reasoning",
    ("providers/_common.py", "stream"): "ProviderErrorKind, segue's word for a malformed or cut stream",
    ("providers/_errors.py", "stream"): "ProviderErrorKind, segue's word for a malformed or cut stream",
    ("apps/dashboard/app.py", "status"): "a query parameter of the dashboard's own HTTP API",
    ("apps/dashboard/app.py", "conversation"): "the name of a dashboard page (route and template)",
    ("apps/dashboard/views.py", "none"): "the dashboard's word for a replayed run that carried no reasoning",
    ("providers/anthropic.py", "enabled"): "the anthropic client's open_telemetry option (traces.enabled), not wire",
    ("providers/_common.py", "enabled"): "the anthropic client's open_telemetry option (traces.enabled), not wire",
    ("wire/openai_chat/request.py", "max_tokens"): "segue's stop reason for a response cut at the output limit",
    ("wire/cache_verdict.py", "unavailable"): "CacheVerdictStatus, segue's word for a vendor that could not say (a "
    "Responses request that asked and got no prompt_cache_diagnostics back)",
}


def vocabulary(schema_dir: Path = REPO / "schemas") -> set[str]:
    """Every vendor key and tag the mappings spell or name through an SDK type."""
    words: set[str] = set()
    sdk_types: set[str] = set()
    for m in load_spec(schema_dir).wires.values():
        words |= _mapping_words(m)
        sdk_types |= _sdk_types(m)
    for path in sorted(sdk_types):
        words |= _sdk_words(path)
    return words


def _mapping_words(m: Mapping) -> set[str]:
    words: set[str] = set()
    for rule in m.to_vendor.values():
        words |= _shape_words(rule.spec.get("shape", {}))
        words |= set(rule.spec.get("extra", {}))
        if "sets" in rule.spec:
            words.add(rule.spec["sets"]["key"])
    for rule in m.from_vendor.values():
        words |= set(rule.spec.get("extra", {}))
        if "tag" in rule.spec:
            words.add(rule.spec["tag"])
        for value in rule.spec["fields"].values():
            words |= _read_words(value)
    for rule in m.constants.values():
        value = rule.spec["value"]
        words |= {value} if isinstance(value, str) else set(value)
    return words


def _shape_words(shape: dict[str, Any]) -> set[str]:
    words = set(shape)
    for key, value in shape.items():
        if key == "type" and isinstance(value.get("const"), str):
            words.add(value["const"])
        words |= _shape_words(value.get("object", {}))
        for item in value.get("items", []):
            words |= _shape_words(item.get("object", {}))
    return words


def _read_words(value: dict[str, Any]) -> set[str]:
    words = set(value.get("key", "").split(".")) - {""}
    for inner in [*([value["each"]] if "each" in value else []), *value.get("sum", [])]:
        words |= _read_words(inner)
    return words


def _sdk_types(m: Mapping) -> set[str]:
    paths: set[str] = set()
    for rule in [*m.to_vendor.values(), *m.from_vendor.values()]:
        paths |= {rule.spec[k] for k in ("vendor_type", "vendor_model") if k in rule.spec}
        paths |= set(rule.spec.get("sets", {}).get("on", []))
    return paths


def _sdk_words(path: str) -> set[str]:
    try:
        found = shape(path)
    except SdkLookupError:
        return set()
    tags = found.keys.get("type")
    return set(found.keys) | {t for t in (literals(tags) if tags is not None else ()) if isinstance(t, str)}


def runtime_strings(path: Path) -> Iterator[tuple[int, str]]:
    """The string constants of a module that are runtime values: not docstrings, f-string text or Literal types."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        elif isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
        elif isinstance(node, ast.Subscript) and _is_literal(node.value):
            skip.update(id(n) for n in ast.walk(node.slice))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.lineno, node.value


def _is_literal(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Literal") or (
        isinstance(node, ast.Attribute) and node.attr == "Literal"
    )


def vendor_strings(paths: Iterable[Path], words: set[str], root: Path = SDK) -> list[tuple[str, int, str]]:
    """(file under `root`, line, string) for every runtime string of `paths` that is vendor vocabulary."""
    return [
        (p.relative_to(root).as_posix(), line, text)
        for p in paths
        for line, text in runtime_strings(p)
        if text in words
    ]


@pytest.fixture(scope="module")
def words() -> set[str]:
    return vocabulary()


def test_the_vocabulary_holds_what_the_mappings_and_sdk_types_spell(words: set[str]) -> None:
    # From the mappings (keys, tags, constants) and from the SDK types they name (keys, tags).
    assert {"cache_control", "prompt_cache_breakpoint", "input_transformations", "timings", "stream_options"} <= words
    assert {"tool_use", "content_block_delta", "response.output_text.delta", "context-compression"} <= words
    assert {"service_tier", "stop_sequence", "container"} <= words  # SDK keys segue does not use
    assert "end_turn" not in words and "segue.fragment" not in words  # segue's words, not keys or tags


def test_the_counter_sees_runtime_strings_only(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""The docstring says cache_control."""\n'
        "from typing import Literal\n"
        'Kind = Literal["cache_control"]\n'
        'x = {"cache_control": f"cache_control {1}"}\n'
        'y = d.get("messages")\n',
        encoding="utf-8",
    )
    found = vendor_strings([module], {"cache_control", "messages"}, tmp_path)
    assert [(line, text) for _, line, text in found] == [(4, "cache_control"), (5, "messages")]


def test_hand_written_wire_code_spells_no_vendor_key_a_mapping_could_hold(words: set[str]) -> None:
    found = vendor_strings(HAND_WRITTEN, words)
    unexplained = sorted({(f, text) for f, _, text in found} - set(ALLOWED))
    assert not unexplained, (
        "vendor key strings in hand-written code; put the shape in schemas/wire/ and use the generated function "
        "(or, if it truly cannot be, add it to ALLOWED with the reason):\n"
        + "\n".join(f"  {f}:{line}: {text!r}" for f, line, text in found if (f, text) in unexplained)
    )
    stale = sorted(set(ALLOWED) - {(f, text) for f, _, text in found})
    assert not stale, f"ALLOWED entries no longer needed (remove them): {stale}"


def test_the_allow_list_stays_short() -> None:
    # 12: the driver skeleton and its SDK-error classification are two modules that both name the `stream` kind,
    # and the catalog's max-tokens key and the verdict's `unavailable` are segue's words that match vendor keys.
    assert len(ALLOWED) <= 12
    assert all(reason.strip() for reason in ALLOWED.values())
