"""GPT-5.6 breakpoint caching in the OpenAI drivers, through the official `openai` client over httpx2.MockTransport.

The rules come from the pinned openai SDK's docstrings (.venv/lib/python3.11/site-packages/openai/types/):
`PromptCacheOptions` (responses/response_create_params.py and chat/completion_create_params.py),
`PromptCacheBreakpoint` (responses/response_input_text_param.py), `InputTokensDetails` (responses/response_usage.py)
and `PromptTokensDetails` (completion_usage.py). Which serving paths get breakpoints, and how many, is catalog data
(`llm.cache_kind: "breakpoint"`, `llm.cache_max_breakpoints`, `llm.cache_ttls`); the tests change it with catalog
layers to show that no model name decides.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses import Response
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

from segue._core.contracts import ProviderRequest
from segue.cache.layout import build_fragment
from segue.catalog import Catalog
from segue.errors import WireError
from segue.generated import Message, TextBlock, ToolCallBlock, ToolDefinition, ToolResultBlock, Usage
from segue.providers import OpenAIChatProvider, OpenAIResponsesProvider, OpenRouterProvider, StreamDone
from tests._support.vendor_http import Recorder, assert_typed, json_response, openai_client

MODEL = "gpt-5.6-sol"  # catalog: llm.cache_kind "breakpoint", 4 writes per request, TTLs 30m / 12h
PREFIX_MODEL = "gpt-4.1-mini"  # catalog: llm.cache_kind "prefix"
SCHEMA_REF = "../schemas/catalog.schema.json"
MARK = {"mode": "explicit"}
TOOLS = [ToolDefinition(name="run_query", description="Run SQL.", parameters={"type": "object", "properties": {}})]
TOOL_PARAM = {
    "type": "function",
    "name": "run_query",
    "description": "Run SQL.",
    "parameters": {"type": "object", "properties": {}},
    "strict": False,
}


def layer(tmp_path: Path, *rows: dict[str, Any]) -> Catalog:
    """The packaged catalog with `rows` (model_vendors rows) layered over it, as an app would."""
    d = tmp_path / "app_catalog"
    d.mkdir(exist_ok=True)
    doc = {"$schema": SCHEMA_REF, "version": 1, "model_vendors": list(rows)}
    (d / "rows.json").write_text(json.dumps(doc))
    return Catalog.load(extra_dirs=[d], env=False)


def breakpoint_row(model: str, vendor: str, api_name: str, **llm: Any) -> dict[str, Any]:
    config = {"cache_kind": "breakpoint", "cache_max_breakpoints": 4, "cache_ttls": ["30m", "12h"], **llm}
    return {
        "model": model,
        "vendor": vendor,
        "role": "inference_provider",
        "priority": 100,
        "api_name": api_name,
        "configuration": {"llm": config},
    }


def conversation() -> list[Message]:
    """A replayed run (question, tool call, result, answer), the new question, and a trailing fragment."""
    return [
        Message(role="user", content=[TextBlock(text="How many customers?")]),
        Message(role="assistant", content=[ToolCallBlock(id="call_1", name="run_query", arguments={"q": 1})]),
        Message(role="tool", content=[ToolResultBlock(tool_call_id="call_1", content="[[42]]")]),
        Message(role="assistant", content=[TextBlock(text="There are 42 customers.")]),
        Message(role="user", content=[TextBlock(text="And orders?")]),
        build_fragment("iteration 1 of 10", 1),
    ]


def request(**overrides: Any) -> ProviderRequest:
    fields: dict[str, Any] = {
        "system": "You are terse.",
        "stable_head": "Schema: customers, orders.",
        "messages": conversation(),
        "tools": TOOLS,
        "replay_end": 3,
        "cache_key": "customer-7",
    }
    return ProviderRequest(**{**fields, **overrides})


def responses_body(*, output: list[dict[str, Any]] | None = None, **usage: Any) -> dict[str, Any]:
    details = {"cached_tokens": 1800, "cache_write_tokens": 150, **usage}
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1767225600,
        "model": MODEL,
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "12 orders.", "annotations": []}],
            }
        ]
        if output is None
        else output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 2000,
            "input_tokens_details": details,
            "output_tokens": 0 if output == [] else 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 2005,
        },
    }
    Response.model_validate(body)
    return body


def text(value: str, marked: bool = False, kind: str = "input_text") -> dict[str, Any]:
    """A text part (Responses `input_text`, Chat `text`), with the breakpoint marker when `marked`."""
    part: dict[str, Any] = {"type": kind, "text": value}
    if marked:
        part["prompt_cache_breakpoint"] = MARK
    return part


def fragment_text() -> str:
    block = conversation()[-1].content[0]
    assert isinstance(block, TextBlock)
    return block.text


# --- Responses ---------------------------------------------------------------------------------------------------


async def test_responses_marks_segues_boundaries_and_never_the_fragment(catalog: Catalog) -> None:
    """Breakpoints go where the Anthropic driver puts cache_control: end of the system prompt, end of the stable
    head, the last replayed message, the newest message; never the trailing runtime-state fragment.

    The system prompt goes as a developer message because `prompt_cache_breakpoint` lives on content parts ("You
    can add explicit breakpoints to content blocks with `prompt_cache_breakpoint`", `PromptCacheOptions`); a tool
    output's parts likewise. The last replayed message is the assistant's answer, which cannot carry one, so the
    mark moves back to the tool output before it. Default options: implicit mode, "The `ttl` defaults to `30m`".
    """
    rec = Recorder(json_response(responses_body()))
    provider = OpenAIResponsesProvider(MODEL, cache_key_prefix="acme", catalog=catalog, client=openai_client(rec))

    result = await provider.complete(request())

    assert rec.body == {
        "model": MODEL,
        "input": [
            {"type": "message", "role": "developer", "content": [text("You are terse.", marked=True)]},
            {"type": "message", "role": "developer", "content": [text("Schema: customers, orders.", marked=True)]},
            {"type": "message", "role": "user", "content": [text("How many customers?")]},
            {"type": "function_call", "call_id": "call_1", "name": "run_query", "arguments": '{"q":1}'},
            {"type": "function_call_output", "call_id": "call_1", "output": [text("[[42]]", marked=True)]},
            {"type": "message", "role": "assistant", "content": "There are 42 customers."},
            {"type": "message", "role": "user", "content": [text("And orders?", marked=True)]},
            {"type": "message", "role": "user", "content": [text(fragment_text())]},
        ],
        "tools": [TOOL_PARAM],
        "store": False,
        "prompt_cache_key": "acme:customer-7",
        "prompt_cache_options": {"mode": "implicit", "ttl": "30m"},
    }
    assert_typed(rec.body, ResponseCreateParamsNonStreaming)
    assert result.usage == Usage(
        input_tokens=2000, output_tokens=5, cache_read_tokens=1800, cache_write_tokens=150, reasoning_tokens=0
    )


async def test_responses_mode_and_ttl_come_from_the_driver(catalog: Catalog) -> None:
    """`mode`: "With `explicit`, OpenAI does not create an implicit breakpoint and writes up to the latest four
    explicit breakpoints"; `ttl`: "Supported values are `30m` (the default) and `12h`" (`PromptCacheOptions`)."""
    rec = Recorder(json_response(responses_body()))
    provider = OpenAIResponsesProvider(
        MODEL, cache_mode="explicit", cache_ttl="12h", catalog=catalog, client=openai_client(rec)
    )

    await provider.complete(request())

    assert rec.body["prompt_cache_options"] == {"mode": "explicit", "ttl": "12h"}
    assert_typed(rec.body, ResponseCreateParamsNonStreaming)


async def test_a_prefix_cache_path_gets_no_breakpoints_and_keeps_instructions(catalog: Catalog) -> None:
    """`prompt_cache_options` is "Supported for `gpt-5.6` and later models": on a path the catalog calls a prefix
    cache the request is what it always was (instructions, string tool outputs, no options)."""
    rec = Recorder(json_response(responses_body()))
    provider = OpenAIResponsesProvider(PREFIX_MODEL, cache_mode="explicit", catalog=catalog, client=openai_client(rec))

    await provider.complete(request())

    body = json.dumps(rec.body)
    assert "prompt_cache" not in body.replace("prompt_cache_key", "")
    assert rec.body["instructions"] == "You are terse."
    assert {"type": "function_call_output", "call_id": "call_1", "output": "[[42]]"} in rec.body["input"]


async def test_the_catalog_decides_which_paths_and_how_many_breakpoints(tmp_path: Path) -> None:
    """No model name in driver code: a catalog layer that makes gpt-4.1-mini a breakpoint cache with two writes
    per request gets exactly the latest two boundaries marked (the last replayed and the newest message)."""
    catalog = layer(tmp_path, breakpoint_row(PREFIX_MODEL, "openai", PREFIX_MODEL, cache_max_breakpoints=2))
    rec = Recorder(json_response(responses_body()))
    provider = OpenAIResponsesProvider(PREFIX_MODEL, catalog=catalog, client=openai_client(rec))

    await provider.complete(request())

    marked = [
        part["text"]
        for item in rec.body["input"]
        for part in (item.get("output") or item.get("content") or [])
        if isinstance(part, dict) and "prompt_cache_breakpoint" in part
    ]
    assert marked == ["[[42]]", "And orders?"]
    assert "instructions" not in rec.body


async def test_a_runtime_model_override_is_looked_up_too(catalog: Catalog) -> None:
    """The serving path is (request.model or the driver's model, vendor): an override onto a breakpoint cache
    gets breakpoints although the driver's own model is a prefix cache."""
    rec = Recorder(json_response(responses_body()))
    provider = OpenAIResponsesProvider(PREFIX_MODEL, catalog=catalog, client=openai_client(rec))

    await provider.complete(request(model=MODEL))

    assert rec.body["model"] == MODEL
    assert rec.body["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}


def test_bad_cache_configuration_is_refused_at_construction() -> None:
    """mode is "implicit" | "explicit" and the Responses ttl "30m" | "12h" (`PromptCacheOptions` literals)."""
    with pytest.raises(ValueError, match=r"cache_mode must be 'implicit' .* or 'explicit' .*got 'sometimes'"):
        OpenAIResponsesProvider(MODEL, cache_mode="sometimes", client=openai_client(Recorder()))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"cache_ttl must be '30m' or '12h' on the Responses API, got '1h'"):
        OpenAIResponsesProvider(MODEL, cache_ttl="1h", client=openai_client(Recorder()))  # type: ignore[arg-type]


async def test_a_ttl_the_path_does_not_offer_is_refused_before_sending(tmp_path: Path) -> None:
    """The catalog's `llm.cache_ttls` lists the TTLs a path offers; a driver configured otherwise fails with the
    path and the choices, and nothing is sent."""
    catalog = layer(tmp_path, breakpoint_row(MODEL, "openai", MODEL, cache_ttls=["30m"]))
    rec = Recorder()
    provider = OpenAIResponsesProvider(MODEL, cache_ttl="12h", catalog=catalog, client=openai_client(rec))

    with pytest.raises(WireError, match=r"cache_ttl '12h' is not offered on gpt-5.6-sol@openai .*\['30m'\]"):
        await provider.complete(request())
    assert rec.requests == []


async def test_a_breakpoint_path_without_its_write_limit_is_a_catalog_error(tmp_path: Path) -> None:
    catalog = layer(tmp_path, breakpoint_row(MODEL, "openai", MODEL, cache_max_breakpoints=None))
    rec = Recorder()
    provider = OpenAIResponsesProvider(MODEL, catalog=catalog, client=openai_client(rec))

    with pytest.raises(WireError, match=r"gpt-5.6-sol@openai: .*llm.cache_max_breakpoints .* is None"):
        await provider.complete(request())
    assert rec.requests == []


async def test_responses_prewarm_asks_only_to_prepare_the_cache(catalog: Catalog) -> None:
    """`prewarm`: "Prepares the prompt cache without generating output" (`PromptCacheOptions.prewarm`). The
    response has usage and no content; a stream of a prewarm request is one StreamDone."""
    rec = Recorder(json_response(responses_body(output=[])), json_response(responses_body(output=[])))
    provider = OpenAIResponsesProvider(MODEL, catalog=catalog, client=openai_client(rec))

    result = await provider.complete(request(prewarm=True))

    assert rec.body["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m", "prewarm": True}
    assert_typed(rec.body, ResponseCreateParamsNonStreaming)
    assert result.message.content == []
    assert (result.usage.output_tokens, result.usage.cache_write_tokens, result.notes) == (0, 150, [])
    events = [e async for e in provider.stream(request(prewarm=True))]
    assert len(events) == 1 and isinstance(events[0], StreamDone)
    assert "stream" not in rec.body


async def test_prewarm_that_generates_anyway_is_reported(catalog: Catalog) -> None:
    rec = Recorder(json_response(responses_body()))
    provider = OpenAIResponsesProvider(MODEL, catalog=catalog, client=openai_client(rec))

    result = await provider.complete(request(prewarm=True))

    assert [(n.kind, n.message) for n in result.notes] == [
        (
            "prewarm-output",
            "openai generated 1 content block(s) for a prewarm request, which should only populate the cache",
        )
    ]


async def test_prewarm_on_a_prefix_cache_path_is_refused_before_sending(catalog: Catalog) -> None:
    rec = Recorder()
    provider = OpenAIResponsesProvider(PREFIX_MODEL, catalog=catalog, client=openai_client(rec))

    with pytest.raises(WireError, match=r"prewarm: 'gpt-4.1-mini' is not a breakpoint cache in the catalog"):
        await provider.complete(request(prewarm=True))
    assert rec.requests == []


async def test_cache_write_tokens_details_are_kept_per_ttl(catalog: Catalog) -> None:
    """Usage "cache_write_tokens: The number of input tokens that were written to the cache", split in
    `cache_write_tokens_details` into `ttl_30m_tokens` and `ttl_12h_tokens` (`InputTokensDetails`), lands in
    `Usage.cache_write_tokens_by_ttl` keyed like the catalog's `llm.cache_ttls`."""
    split = {"ttl_30m_tokens": 100, "ttl_12h_tokens": 50}
    rec = Recorder(json_response(responses_body(cache_write_tokens_details=split)))
    provider = OpenAIResponsesProvider(MODEL, catalog=catalog, client=openai_client(rec))

    result = await provider.complete(request())

    assert result.usage.cache_write_tokens == 150
    assert result.usage.cache_write_tokens_by_ttl == {"30m": 100, "12h": 50}


# --- Chat Completions and OpenRouter -------------------------------------------------------------------------------


def chat_body(**details: Any) -> dict[str, Any]:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": MODEL,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "12 orders."}}],
        "usage": {
            "prompt_tokens": 2000,
            "completion_tokens": 5,
            "total_tokens": 2005,
            "prompt_tokens_details": {"cached_tokens": 1800, "cache_write_tokens": 150, **details},
        },
    }
    ChatCompletion.model_validate(body)
    return body


def chat_text(value: str, marked: bool = False) -> dict[str, Any]:
    return text(value, marked, kind="text")


CHAT_MESSAGES = [
    {"role": "system", "content": [chat_text("You are terse.", True), chat_text("Schema: customers, orders.", True)]},
    {"role": "user", "content": [chat_text("How many customers?")]},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "run_query", "arguments": '{"q":1}'}}],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": [chat_text("[[42]]", True)]},
    {"role": "assistant", "content": [chat_text("There are 42 customers.")]},
    {"role": "user", "content": [chat_text("And orders?", True), chat_text(fragment_text())]},
]


async def test_chat_completions_mark_the_same_boundaries(catalog: Catalog) -> None:
    """Chat Completions take the same `prompt_cache_breakpoint` on content parts, and `prompt_cache_options`
    whose ttl "Defaults to `30m`, which is currently the only supported value" (chat `PromptCacheOptions`).
    The fragment, merged into the newest user message, is its last part and carries no mark. Usage:
    `prompt_tokens_details.cache_write_tokens` (`PromptTokensDetails`)."""
    rec = Recorder(json_response(chat_body()))
    provider = OpenAIChatProvider(MODEL, cache_mode="explicit", catalog=catalog, client=openai_client(rec))

    result = await provider.complete(request())

    assert rec.body == {
        "model": MODEL,
        "messages": CHAT_MESSAGES,
        "tools": [{"type": "function", "function": {k: v for k, v in TOOL_PARAM.items() if k != "type"}}],
        "prompt_cache_key": "customer-7",
        "prompt_cache_options": {"mode": "explicit", "ttl": "30m"},
    }
    assert_typed(rec.body, CompletionCreateParamsNonStreaming)
    assert (result.usage.cache_read_tokens, result.usage.cache_write_tokens) == (1800, 150)


async def test_chat_completions_have_no_prewarm_and_one_ttl(catalog: Catalog) -> None:
    """The chat `PromptCacheOptions` has no `prewarm` field: a prewarm request fails before anything is sent."""
    rec = Recorder()
    provider = OpenAIChatProvider(MODEL, catalog=catalog, client=openai_client(rec))
    with pytest.raises(WireError, match=r"prewarm: the openai_chat wire has no way to populate the prompt cache"):
        await provider.complete(request(prewarm=True))
    assert rec.requests == []
    with pytest.raises(ValueError, match="cache_mode must be"):
        OpenAIChatProvider(MODEL, cache_mode="auto", client=openai_client(rec))  # type: ignore[arg-type]


async def test_chat_on_a_server_without_a_breakpoint_cache_is_unchanged(catalog: Catalog) -> None:
    rec = Recorder(json_response(chat_body()))
    provider = OpenAIChatProvider("gpt-oss-120b", vendor="cerebras", catalog=catalog, client=openai_client(rec))

    await provider.complete(request())

    assert rec.body["messages"][0] == {"role": "system", "content": "You are terse.\n\nSchema: customers, orders."}
    assert "prompt_cache_options" not in rec.body


def as_cache_control(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with each `prompt_cache_breakpoint` written as OpenRouter's block-level `cache_control`."""
    text = json.dumps(messages).replace(
        '"prompt_cache_breakpoint": {"mode": "explicit"}', '"cache_control": {"type": "ephemeral"}'
    )
    out: list[dict[str, Any]] = json.loads(text)
    return out


async def test_openrouter_marks_breakpoint_caches_with_block_level_cache_control(catalog: Catalog) -> None:
    """OpenRouter's cache_control docs: block-level markers "also work on OpenAI models that support explicit prompt
    caching — OpenRouter converts them to the provider's native format" (it forwards `prompt_cache_breakpoint` only
    on its Responses API, per the catalog row's note). The catalog's openrouter row for openai/gpt-5.6-terra is a
    breakpoint cache: the same boundaries get `cache_control`, the request `prompt_cache_options`; a prefix-cache
    row gets neither, and `cache_ttl=None` turns cache markers off."""
    rec = Recorder(json_response(chat_body()), json_response(chat_body()), json_response(chat_body()))

    await OpenRouterProvider("openai/gpt-5.6-terra", catalog=catalog, client=openai_client(rec)).complete(request())
    assert rec.body["messages"] == as_cache_control(CHAT_MESSAGES)
    assert rec.body["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}
    assert "prompt_cache_breakpoint" not in json.dumps(rec.body)
    assert_typed(
        rec.body,
        CompletionCreateParamsNonStreaming,
        extra={
            "CompletionCreateParamsNonStreaming": ["plugins", "session_id"],  # session_id: the request's cache key
            "ChatCompletionContentPartTextParam": ["cache_control"],
        },
    )

    await OpenRouterProvider("openai/gpt-4.1-mini", catalog=catalog, client=openai_client(rec)).complete(request())
    assert "prompt_cache_options" not in rec.body and "cache_control" not in json.dumps(rec.body)

    off = OpenRouterProvider("openai/gpt-5.6-terra", cache_ttl=None, catalog=catalog, client=openai_client(rec))
    await off.complete(request())
    assert "prompt_cache_options" not in rec.body and "cache_control" not in json.dumps(rec.body)


async def test_openrouter_has_no_prewarm(catalog: Catalog) -> None:
    rec = Recorder()
    provider = OpenRouterProvider("openai/gpt-5.6-terra", catalog=catalog, client=openai_client(rec))
    with pytest.raises(WireError, match=r"prewarm: the openrouter wire has no way"):
        await provider.complete(request(prewarm=True))
    assert rec.requests == []
