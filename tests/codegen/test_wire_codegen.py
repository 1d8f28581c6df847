"""codegen/spec/wire/mapping.py and codegen/plugins/wire/: the mapping files are validated (file + JSON pointer +
reason) and the generated serializers are fresh, importable without the SDKs, and behave as the mapping says."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from codegen.driver import GENERATED_DIR, PACKAGE, REPO_ROOT, format_python
from codegen.errors import SchemaError
from codegen.model import load_model
from codegen.plugins import wire
from codegen.spec import load_spec
from codegen.spec.wire.mapping import iter_wire_files, load_mappings
from segue._support.readers import Unknown
from segue.errors import MalformedResponseError, WireError
from segue.generated import ReasoningBlock, TextBlock, ToolCallBlock, ToolDefinition, ToolResultBlock, Usage
from segue.generated.wire import anthropic, openai_chat, openai_responses, openrouter

WIRE_DIR = REPO_ROOT / "schemas" / "wire"
CACHE_CONTROL = "anthropic.types.CacheControlEphemeralParam"


@pytest.fixture(scope="module")
def model() -> Any:
    return load_model(REPO_ROOT / "schemas")


def test_generated_wire_modules_are_fresh() -> None:
    rendered = wire.generate(load_spec(REPO_ROOT / "schemas"), PACKAGE)
    assert sorted(rendered) == sorted(
        f"wire/{name}.py" for name in ["__init__", *(p.stem for p in iter_wire_files(WIRE_DIR))]
    )
    # The driver formats every plugin's Python with ruff; compare after the same formatting.
    for rel, text in format_python(rendered, GENERATED_DIR).items():
        path = REPO_ROOT / GENERATED_DIR / rel
        assert path.read_text(encoding="utf-8") == text, f"{path} is stale: run python -m codegen"


def _mapping(name: str = "anthropic") -> dict[str, Any]:
    return json.loads((WIRE_DIR / f"{name}.json").read_text(encoding="utf-8"))


def _load(tmp_path: Path, model: Any, *files: dict[str, Any]) -> Any:
    for f in files:
        (tmp_path / f"{f['wire']}.json").write_text(json.dumps(f), encoding="utf-8")
    return load_mappings(tmp_path, model)


def _break(edit: Any, name: str = "anthropic") -> dict[str, Any]:
    m = copy.deepcopy(_mapping(name))
    edit(m)
    return m


BAD = [
    (
        lambda m: m["to_vendor"]["text"]["shape"]["text"].update(fild="text"),
        "/to_vendor/text/shape/text",
        "invalid wire mapping",
    ),
    (
        lambda m: m["to_vendor"]["text"]["shape"]["text"].update(field="txt"),
        "/to_vendor/text/shape/text/field",
        "TextBlock has no field 'txt'",
    ),
    (
        lambda m: m["to_vendor"]["thinking"]["shape"].pop("signature"),
        "/to_vendor/thinking/shape",
        "requires keys ['signature']",
    ),
    (
        lambda m: m["to_vendor"]["text"]["shape"].update(cache_controll={"const": None}),
        "/to_vendor/text/shape",
        "keys ['cache_controll'] are not in anthropic.types.TextBlockParam",
    ),
    (
        lambda m: m["to_vendor"]["text"].update(vendor_type="anthropic.types.TextBlokParam"),
        "/to_vendor/text/vendor_type",
        "cannot import 'anthropic.types.TextBlokParam'",
    ),
    (
        lambda m: m["from_vendor"]["tool_use"]["fields"].pop("arguments"),
        "/from_vendor/tool_use/fields",
        "ToolCallBlock requires ['arguments']",
    ),
    (
        lambda m: m["from_vendor"]["text"]["fields"]["text"].update(decode="json"),
        "/from_vendor/text/fields/text",
        "cannot read TextBlock.text",
    ),
    (
        lambda m: m["dispatch"]["content_block"].append("nope"),
        "/dispatch/content_block/7",
        "no to_vendor rule named 'nope'",
    ),
    (
        lambda m: m["to_vendor"]["image"]["shape"]["source"].update(rule="missing"),
        "/to_vendor/image/shape/source/rule",
        "no to_vendor rule or dispatch named 'missing'",
    ),
    (
        lambda m: m["to_vendor"]["text"].update(canonical="TextBlok"),
        "/to_vendor/text/canonical",
        "'TextBlok' is not a canonical object type",
    ),
    # Request envelopes, markers, views and constants are checked against the SDK types just as blocks are.
    (
        lambda m: m["to_vendor"]["request"]["shape"].update(max_token={"param": "max_tokens"}),
        "/to_vendor/request/shape",
        "keys ['max_token'] are not in anthropic.types.message_create_params.MessageCreateParams",
    ),
    (
        lambda m: m["to_vendor"]["request"]["shape"]["max_tokens"].update(omit_if_none=True),
        "/to_vendor/request/shape/max_tokens",
        "requires 'max_tokens': it cannot be left out",
    ),
    (
        lambda m: m["to_vendor"]["request"].update(extra={"tools": "a reason"}),
        "/to_vendor/request/extra/tools",
        "'tools' is a key of anthropic.types.message_create_params.MessageCreateParams: it needs no reason",
    ),
    (
        lambda m: m["to_vendor"]["request"]["shape"]["stream"].update(**{"if": "streaming"}),
        "/to_vendor/request/shape/stream/if",
        "no parameter named 'streaming'",
    ),
    (
        lambda m: m["to_vendor"]["request"]["prompt"]["keys"].update(system="instructions"),
        "/to_vendor/request/prompt/keys/system",
        "'instructions' is not one of ['model', 'tools', 'system', 'messages']",
    ),
    (
        lambda m: m["to_vendor"]["cache_control"]["shape"]["type"].update(const="persistent"),
        "/to_vendor/cache_control/shape/type/const",
        "'persistent' is not a value the SDK allows here",
    ),
    (
        lambda m: m["to_vendor"]["cache_control"]["sets"]["on"].append("anthropic.types.ThinkingBlockParam"),
        "/to_vendor/cache_control/sets/on/4",
        "anthropic.types.ThinkingBlockParam is not a TypedDict with the key 'cache_control'",
    ),
    (
        lambda m: m["to_vendor"]["cache_control"]["params"].update(ttl=f"{CACHE_CONTROL}.tll"),
        "/to_vendor/cache_control/params/ttl",
        "has no key 'tll'",
    ),
    (
        lambda m: m["to_vendor"]["request"]["shape"].update(system={"object": {"text": {"param": "model"}}}),
        "/to_vendor/request/shape/system",
        "an object does not fit the SDK's type here",
    ),
    (
        lambda m: m["from_vendor"]["usage"]["fields"].update(cache_read_tokens={"key": "cache_read_tokens"}),
        "/from_vendor/usage/fields/cache_read_tokens",
        "'cache_read_tokens' is not a field of anthropic.types.Usage",
    ),
    (
        lambda m: m["from_vendor"]["usage"]["fields"].update(reasoning_tokens={"key": "output_tokens_details.x"}),
        "/from_vendor/usage/fields/reasoning_tokens",
        "'x' is not a field of anthropic.types.Usage.output_tokens_details",
    ),
    (
        lambda m: m["from_vendor"]["response"]["fields"]["model"].update(type="int"),
        "/from_vendor/response/fields/model",
        "which holds no int",
    ),
    (
        lambda m: m["from_vendor"]["response"]["fields"]["model"].pop("type"),
        "/from_vendor/response/fields/model",
        "a view field needs a type, a rule or equals",
    ),
    (
        lambda m: m["from_vendor"]["response"]["fields"]["usage"].update(rule="usages"),
        "/from_vendor/response/fields/usage/rule",
        "no from_vendor rule or parse_dispatch named 'usages'",
    ),
    (
        lambda m: m["constants"]["THINKING_REPLAYS"].update(value=["enabled", "always"]),
        "/constants/THINKING_REPLAYS/value",
        "['always'] are not values of anthropic.types.ThinkingConfigParam.type",
    ),
    (
        lambda m: m["constants"]["ROLES"]["value"].update(tool="function"),
        "/constants/ROLES/value",
        "['function'] are not values of anthropic.types.MessageParam.role",
    ),
]


@pytest.mark.parametrize(("edit", "pointer", "reason"), BAD)
def test_bad_mappings_fail_with_file_pointer_and_reason(
    tmp_path: Path, model: Any, edit: Any, pointer: str, reason: str
) -> None:
    with pytest.raises(SchemaError) as caught:
        _load(tmp_path, model, _break(edit))
    assert caught.value.file.endswith("anthropic.json")
    assert caught.value.pointer == pointer
    assert reason in caught.value.reason


def test_wire_name_must_match_the_file_and_parents_must_exist(tmp_path: Path, model: Any) -> None:
    orphan = _break(lambda m: m.update(extends="nowhere"), "openrouter")
    with pytest.raises(SchemaError, match="extends unknown wire 'nowhere'"):
        _load(tmp_path, model, orphan)
    (tmp_path / "openrouter.json").unlink()
    renamed = _mapping()
    (tmp_path / "claude.json").write_text(json.dumps(renamed), encoding="utf-8")
    with pytest.raises(SchemaError, match="must equal the file name 'claude'"):
        load_mappings(tmp_path, model)


def test_generated_serializers_follow_the_mappings() -> None:
    assert anthropic.tool_result(ToolResultBlock(tool_call_id="t", content="x", is_error=True)) == {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": "x",
        "is_error": True,
    }
    assert anthropic.tool_result(ToolResultBlock(tool_call_id="t", content="x")) == {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": "x",
    }
    call = ToolCallBlock(id="c", name="f", arguments={"b": 1, "a": "é"})
    assert openai_responses.function_call(call) == {
        "type": "function_call",
        "call_id": "c",
        "name": "f",
        "arguments": '{"b":1,"a":"é"}',
    }
    assert openai_chat.tool_call(call) == {
        "id": "c",
        "type": "function",
        "function": {"name": "f", "arguments": '{"b":1,"a":"é"}'},
    }
    assert openai_chat.tool(ToolDefinition(name="f", description="d", parameters={})) == {
        "type": "function",
        "function": {"name": "f", "description": "d", "parameters": {}, "strict": False},
    }
    native = {"type": "reasoning.text", "text": "t", "index": 0}
    block = ReasoningBlock(vendor="openrouter", format="openrouter.reasoning_details", native=native)
    sent = openrouter.replayed_reasoning(block)
    assert sent == native and sent is not native


def test_generated_dispatch_refuses_unknown_formats_and_missing_fields() -> None:
    with pytest.raises(WireError, match=r"format='anthropic\.mystery' has no anthropic wire shape"):
        anthropic.content_block(ReasoningBlock(vendor="anthropic", format="anthropic.mystery"))
    with pytest.raises(WireError, match="has no 'id'"):
        openai_responses.reasoning_item(ReasoningBlock(vendor="openai", format="openai.reasoning_item"))
    # A tag no rule reads comes back as Unknown, naming the tag, for the caller to note and drop.
    assert anthropic.parse_content_block({"type": "server_tool_use"}, None) == Unknown(
        tag="server_tool_use", raw={"type": "server_tool_use"}
    )
    with pytest.raises(MalformedResponseError, match="anthropic 'tool_use' item: missing required key 'input'"):
        anthropic.parse_content_block({"type": "tool_use", "id": "t", "name": "f"}, None)
    with pytest.raises(MalformedResponseError, match="'text' must be str, got int"):
        anthropic.parse_text({"type": "text", "text": 3}, None)
    assert anthropic.text(TextBlock(text="x")) == {"type": "text", "text": "x"}


def test_generated_envelopes_and_markers_follow_the_mappings() -> None:
    # Keys sent only sometimes are left out, and the others keep the mapping's order.
    body = anthropic.request(model="m", max_tokens=5, messages=[], stream=True)
    assert list(body.items()) == [("model", "m"), ("max_tokens", 5), ("messages", []), ("stream", True)]
    assert "stream" not in anthropic.request(model="m", max_tokens=5, messages=[], stream=False)
    assert openai_chat.request(model="m", messages=[], max_tokens=9, stream=True) == {
        "model": "m",
        "messages": [],
        "max_tokens": 9,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    # A marker is set on a block already built; a binding setting keeps the app's own.
    block = anthropic.text(TextBlock(text="x"))
    anthropic.cache_control(block, ttl="1h")
    assert block == {"type": "text", "text": "x", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    own: Any = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "error"}}
    anthropic.block_binding(own)
    assert own["block_binding"] == {"prefix_mismatch_behavior": "error"}
    fresh: Any = {"type": "adaptive"}
    anthropic.block_binding(fresh)
    assert fresh["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}
    # A reassembled object keeps the keys segue does not model.
    start = {"type": "text", "text": "", "citations": []}
    assert anthropic.streamed_block(start=start, text="hi") == {"type": "text", "text": "hi", "citations": []}
    assert openai_responses.prompt_cache_options(mode="explicit", ttl="12h", prewarm=True) == {
        "mode": "explicit",
        "ttl": "12h",
        "prewarm": True,
    }


def test_generated_views_read_usage_envelopes_and_vocabulary() -> None:
    usage = anthropic.parse_usage(
        {
            "input_tokens": 3,
            "output_tokens": 2,
            "cache_read_input_tokens": 10,
            "cache_creation_input_tokens": 4,
            "cache_creation": {"ephemeral_5m_input_tokens": 4, "ephemeral_1h_input_tokens": 0},
            "output_tokens_details": {"thinking_tokens": 1},
        }
    )
    # Anthropic's input_tokens counts only what follows the last breakpoint: the cached parts are added back.
    assert usage == Usage(
        input_tokens=17,
        output_tokens=2,
        cache_read_tokens=10,
        cache_write_tokens=4,
        cache_write_tokens_by_ttl={"5m": 4, "1h": 0},
        reasoning_tokens=1,
    )
    # An optional object that is absent leaves its fields absent; a required key names the rule and the key.
    assert openai_chat.parse_usage({"prompt_tokens": 5}) == Usage(input_tokens=5, output_tokens=0)
    with pytest.raises(MalformedResponseError, match="anthropic usage: missing required key 'output_tokens'"):
        anthropic.parse_usage({"input_tokens": 3})
    response = openai_responses.parse_response(
        {"output": [], "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "usage": {}}
    )
    assert (response.incomplete, response.incomplete_reason, response.model) == (True, "max_output_tokens", None)
    assert openai_responses.INCOMPLETE_STOP[str(response.incomplete_reason)] == "max_tokens"
    assert openai_chat.STOP_REASONS["length"] == "max_tokens"
    event = anthropic.parse_stream_event({"type": "content_block_delta", "index": 2, "delta": {"type": "ping"}})
    assert isinstance(event, anthropic.BlockDelta) and event.index == 2 and isinstance(event.delta, Unknown)
