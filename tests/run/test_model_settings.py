"""Model settings: per agent and per run (key by key), on each wire as its API spells them, refused before any row
where a path cannot take them, stored with the run so retry and resume send the same, and fingerprinted.

Through the official SDK clients over a mock transport (the bodies are checked against the SDKs' request types)
and, for replay, against the twin.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

from segue import Agent, IdempotencyConflictError, InputError, ModelSettings, RunStore, tool
from segue.cache.explain import compare_bodies
from segue.catalog import Catalog
from segue.catalog.files import packaged_catalog_dir
from segue.providers import (
    AnthropicProvider,
    Failover,
    OpenAIChatProvider,
    OpenAIResponsesProvider,
    OpenRouterProvider,
)
from segue_twin import Twin
from tests._support.helpers import catalog_layer
from tests._support.vendor_http import Recorder, anthropic_client, assert_typed, json_response, openai_client


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: sunny"


def chat_completion(content: str = "ok", *, finish: str = "stop", model: str = "m", calls: Any = None) -> Any:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls is not None:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    }


def anthropic_message(text: str = "ok", model: str = "claude-sonnet-4-6") -> Any:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 5},
    }


def responses_body(text: str = "ok") -> Any:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1767225600,
        "model": "gpt-5.4",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 20, "output_tokens": 5, "total_tokens": 25},
    }


def llamacpp(rec: Recorder, vendor: str = "llamacpp") -> OpenAIChatProvider:
    url = "http://127.0.0.1:8080/v1"
    return OpenAIChatProvider("gemma-3-270m", base_url=url, vendor=vendor, client=openai_client(rec, url))


async def test_chat_completions_take_every_setting_and_the_run_overrides_the_agent_key_by_key() -> None:
    """On vLLM, which documents named function calling (llama.cpp refuses a named tool_choice: its server runs it
    as auto, tests/providers/test_self_hosted_paths.py)."""
    rec = Recorder(json_response(chat_completion()))
    agent = Agent(
        llamacpp(rec, "vllm"),
        tools=[lookup],
        model_settings=ModelSettings(max_tokens=64, temperature=0.0, seed=7, stop=["END"]),
    )
    await agent.run(
        "Weather in Oslo?",
        model_settings=ModelSettings(temperature=0.5, tool_choice="lookup", parallel_tool_calls=False),
    )
    body = rec.body
    assert_typed(body, CompletionCreateParamsNonStreaming)
    assert {k: body[k] for k in ("max_tokens", "temperature", "seed", "stop", "parallel_tool_calls")} == {
        "max_tokens": 64,  # open servers know max_tokens only
        "temperature": 0.5,  # the run's, over the agent's 0.0
        "seed": 7,
        "stop": ["END"],
        "parallel_tool_calls": False,
    }
    assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert "max_completion_tokens" not in body


async def test_openai_chat_sends_max_completion_tokens_and_reasoning_effort() -> None:
    """OpenAI's reasoning models reject max_tokens on Chat Completions: the limit goes as max_completion_tokens."""
    rec = Recorder(json_response(chat_completion(model="gpt-5.4")))
    agent = Agent(OpenAIChatProvider("gpt-5.4", client=openai_client(rec)))
    await agent.run("hi", model_settings={"max_tokens": 300, "reasoning_effort": "low", "top_p": 0.9})
    assert_typed(rec.body, CompletionCreateParamsNonStreaming)
    assert (rec.body["max_completion_tokens"], rec.body["reasoning_effort"], rec.body["top_p"]) == (300, "low", 0.9)
    assert "max_tokens" not in rec.body and "parallel_tool_calls" not in rec.body  # no tools: not sent


async def test_responses_send_max_output_tokens_and_effort_in_reasoning() -> None:
    rec = Recorder(json_response(responses_body()))
    agent = Agent(OpenAIResponsesProvider("gpt-5.4", client=openai_client(rec)), tools=[lookup])
    await agent.run("hi", model_settings=ModelSettings(max_tokens=500, reasoning_effort="high", tool_choice="required"))
    body = rec.body
    assert_typed(body, ResponseCreateParamsNonStreaming)
    assert (body["max_output_tokens"], body["reasoning"], body["tool_choice"]) == (500, {"effort": "high"}, "required")
    # Reasoning asked for, so the encrypted reasoning comes back to be replayed (stateless).
    assert body["include"] == ["reasoning.encrypted_content"]


async def test_anthropic_maps_tool_choice_stop_and_effort_and_takes_its_default_max_tokens_from_the_catalog() -> None:
    rec = Recorder(json_response(anthropic_message()), json_response(anthropic_message()))
    agent = Agent(AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(rec)), tools=[lookup])
    await agent.run(
        "hi",
        model_settings=ModelSettings(
            tool_choice="required", parallel_tool_calls=False, stop=["###"], reasoning_effort="medium"
        ),
    )
    body = rec.body
    assert_typed(body, MessageCreateParamsNonStreaming)
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert (body["stop_sequences"], body["output_config"]) == (["###"], {"effort": "medium"})
    # The Messages API requires max_tokens: the catalog's llm.default_max_tokens (catalogs/vendors.json) supplies it.
    assert body["max_tokens"] == 4096
    await agent.run("hi", model_settings=ModelSettings(max_tokens=128))
    assert rec.body["max_tokens"] == 128 and "tool_choice" not in rec.body


async def test_an_app_catalog_layer_sets_the_default_max_tokens(tmp_path: Any) -> None:
    """A layer replaces whole rows: the app copies the packaged model-vendor row and sets llm.default_max_tokens."""
    rows = json.loads((packaged_catalog_dir() / "model_vendors.json").read_text())["model_vendors"]
    key = ("claude-sonnet-4-6", "anthropic", "inference_provider")
    row = next(r for r in rows if (r["model"], r["vendor"], r["role"]) == key)
    row.setdefault("configuration", {}).setdefault("llm", {})["default_max_tokens"] = 1000
    layer = {"$schema": "catalog.schema.json", "version": 2, "model_vendors": [row]}
    (tmp_path / "rows.json").write_text(json.dumps(layer))
    catalog = Catalog.load([tmp_path], env=False)
    rec = Recorder(json_response(anthropic_message()))
    await Agent(AnthropicProvider("claude-sonnet-4-6", catalog=catalog, client=anthropic_client(rec))).run("hi")
    assert rec.body["max_tokens"] == 1000


@pytest.mark.parametrize(
    ("provider", "settings", "named"),
    [
        ("anthropic", ModelSettings(seed=1), "seed"),
        ("anthropic", ModelSettings(temperature=0.2), "temperature"),
        ("anthropic", ModelSettings(reasoning_effort="minimal"), "reasoning_effort"),
        ("responses", ModelSettings(stop=["x"]), "stop"),
        ("responses", ModelSettings(seed=3), "seed"),
    ],
)
async def test_a_setting_a_path_cannot_take_is_refused_before_any_row(
    provider: str, settings: ModelSettings, named: str, sqlite_store: RunStore
) -> None:
    rec = Recorder()  # any request would fail the test: nothing may be sent
    driver: Any = (
        AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(rec))
        if provider == "anthropic"
        else OpenAIResponsesProvider("gpt-5.4", client=openai_client(rec))
    )
    with pytest.raises(InputError, match=f"model_settings.{named}="):
        Agent(driver, model_settings=settings)
    agent = Agent(driver, store=sqlite_store)
    with pytest.raises(InputError, match=f"model_settings.{named}=.*cannot be sent"):
        await agent.run("hi", model_settings=settings)
    events = [e async for e in agent.stream("hi", model_settings=settings)]
    assert [e.type for e in events] == ["RUN_ERROR"] and named in (events[0].error or "")
    assert sqlite_store.list_runs() == [] and rec.requests == []


async def test_a_failover_refuses_what_any_member_cannot_take() -> None:
    rec = Recorder()
    both = Failover([llamacpp(rec), AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(rec))])
    with pytest.raises(InputError, match="seed"):
        await Agent(both).run("hi", model_settings={"seed": 5})


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"max_tokens": -5}, "max_tokens must be a whole number from 1 to"),
        ({"max_tokens": 0}, "max_tokens must be a whole number from 1 to"),
        ({"max_tokens": True}, "max_tokens must be a whole number from 1 to"),
        ({"temperature": "hot"}, "temperature must be a finite number >= 0"),
        ({"top_p": 1.5}, "top_p must be a number from 0 to 1"),
        ({"stop": "END"}, "stop must be a list of non-empty strings"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort must be one of"),
        ({"max_token": 5}, "unknown model setting"),
    ],
)
async def test_bad_values_are_one_clear_error_before_any_row(
    settings: dict[str, Any], named: str, sqlite_store: RunStore
) -> None:
    rec = Recorder()
    agent = Agent(llamacpp(rec), store=sqlite_store)
    with pytest.raises(InputError, match=named):
        await agent.run("hi", model_settings=settings)
    with pytest.raises(InputError, match=named):
        Agent(llamacpp(rec), model_settings=settings)
    assert sqlite_store.list_runs() == [] and rec.requests == []


async def test_tool_choice_must_name_a_tool_of_the_run(sqlite_store: RunStore) -> None:
    rec = Recorder()
    agent = Agent(llamacpp(rec, "vllm"), tools=[lookup], store=sqlite_store)  # vLLM takes a tool's name
    with pytest.raises(InputError, match="tool_choice='search' is neither auto, required, none nor one of"):
        await agent.run("hi", model_settings={"tool_choice": "search"})
    with pytest.raises(InputError, match="needs tools"):
        await Agent(llamacpp(rec), store=sqlite_store).run("hi", model_settings={"tool_choice": "required"})
    assert sqlite_store.list_runs() == [] and rec.requests == []


def test_a_forced_tool_with_anthropic_thinking_is_refused() -> None:
    """Extended thinking takes tool_choice auto or none only (the extended thinking page; the twin emulates it)."""
    driver = AnthropicProvider("claude-sonnet-4-6", thinking={"type": "adaptive"}, client=anthropic_client(Recorder()))
    with pytest.raises(InputError, match="forces a tool, which Anthropic refuses with thinking on"):
        Agent(driver, tools=[lookup], model_settings={"tool_choice": "required"})


async def test_retry_sends_the_same_settings_and_the_fingerprint_covers_them(sqlite_store: RunStore) -> None:
    rec = Recorder(*(json_response(chat_completion()) for _ in range(3)))
    agent = Agent(llamacpp(rec), store=sqlite_store, model_settings={"max_tokens": 50})
    first = await agent.run("hi", model_settings={"temperature": 0.25}, idempotency_key="k1")
    sent = rec.body
    await agent.retry(first.run_id)
    assert rec.body == sent and (sent["max_tokens"], sent["temperature"]) == (50, 0.25)
    stored = sqlite_store.get_run(first.run_id)
    assert stored is not None and stored.meta is not None and stored.meta.segue_request is not None
    assert stored.meta.segue_request.model_settings == ModelSettings(max_tokens=50, temperature=0.25)
    # The same key with other settings is another request.
    with pytest.raises(IdempotencyConflictError):
        await agent.run("hi", model_settings={"temperature": 0.75}, idempotency_key="k1")
    again = await agent.run("hi", model_settings={"temperature": 0.25}, idempotency_key="k1")
    assert again.run_id == first.run_id and len(rec.requests) == 2


async def test_resume_sends_the_paused_runs_settings(sqlite_store: RunStore) -> None:
    @tool(requires_approval=True)
    def delete(name: str) -> str:
        """Delete a file."""
        return f"deleted {name}"

    call = [{"id": "c1", "type": "function", "function": {"name": "delete", "arguments": '{"name": "a.txt"}'}}]
    rec = Recorder(
        json_response(chat_completion("", finish="tool_calls", calls=call)), json_response(chat_completion("done"))
    )
    agent = Agent(llamacpp(rec), tools=[delete], store=sqlite_store)
    paused = await agent.run("delete a.txt", model_settings={"max_tokens": 77, "seed": 3})
    assert paused.status == "waiting_approval"
    done = await agent.resume(paused.run_id, approved=True)
    assert done.status == "success" and (rec.body["max_tokens"], rec.body["seed"]) == (77, 3)


async def test_openrouter_takes_the_settings_with_effort_in_its_reasoning() -> None:
    rec = Recorder(json_response(chat_completion(model="openai/gpt-5.4")))
    driver = OpenRouterProvider("openai/gpt-5.4", reasoning={"summary": "auto"}, client=openai_client(rec))
    await Agent(driver).run("hi", model_settings={"max_tokens": 40, "reasoning_effort": "low", "seed": 2})
    assert (rec.body["max_tokens"], rec.body["seed"]) == (40, 2)
    assert rec.body["reasoning"] == {"summary": "auto", "effort": "low"}


async def test_an_effort_change_on_anthropic_is_a_prefix_change_for_replay(sqlite_store: RunStore) -> None:
    """Changing output_config.effort invalidates Anthropic's system cache (prompt-caching page), and the
    reasoning was produced under the other setting: replay drops it with cause settings."""
    twin = Twin()
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", thinking={"type": "adaptive"}, client=twin.anthropic_client()),
        store=sqlite_store,
    )
    first = await agent.run("What is 2+2?", model_settings={"reasoning_effort": "low"})
    stored = sqlite_store.get_run(first.run_id)
    assert stored is not None and stored.meta is not None and stored.meta.segue_prefix is not None
    assert stored.meta.segue_prefix.settings_hash is not None
    same = await agent.run("And 3+3?", runs=[first.run_id], replay_last=1, model_settings={"reasoning_effort": "low"})
    assert same.replay is not None and [w.cause for w in same.replay.warnings] == []
    other = await agent.run("And 4+4?", runs=[first.run_id], replay_last=1, model_settings={"reasoning_effort": "high"})
    assert other.replay is not None and [w.cause for w in other.replay.warnings] == ["settings"]


def test_runs_explain_compares_anthropics_tool_choice_and_effort() -> None:
    """Both are part of what Anthropic caches (prompt-caching page): a change is a divergence before the messages."""
    base = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 4096,
        "system": [{"type": "text", "text": "You answer."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    _, _, same = compare_bodies(base, base)
    assert same is None
    _, _, choice = compare_bodies({**base, "tool_choice": {"type": "auto"}}, {**base, "tool_choice": {"type": "any"}})
    assert choice is not None and choice.path == "tool_choice" and choice.section == "messages"
    _, _, effort = compare_bodies(
        {**base, "output_config": {"effort": "low"}}, {**base, "output_config": {"effort": "high"}}
    )
    assert effort is not None and effort.path == "output_config.effort" and effort.section == "system"


HOSTILE = [
    ({"temperature": float("inf")}, "temperature must be a finite number >= 0, got inf"),
    ({"temperature": float("-inf")}, "temperature must be a finite number >= 0, got -inf"),
    ({"temperature": float("nan")}, "temperature must be a finite number >= 0, got nan"),
    ({"temperature": 10**400}, "temperature must be a finite number >= 0"),
    ({"top_p": float("inf")}, "top_p must be a number from 0 to 1, got inf"),
    ({"stop": ["END", "a\ud800"]}, r"stop\[1\] must be Unicode text, but has a lone surrogate \(U\+D800\) at index 1"),
    ({"max_tokens": 10**30}, "max_tokens must be a whole number from 1 to 9,007,199,254,740,991 .*got 10000"),
    ({"seed": -(10**30)}, "seed must be a whole number from -9,007,199,254,740,991 to 9,007,199,254,740,991"),
]


@pytest.mark.parametrize(
    ("settings", "named"), HOSTILE, ids=[next(iter(s)) + str(i) for i, (s, _) in enumerate(HOSTILE)]
)
async def test_hostile_values_are_input_errors_naming_them_before_any_row(
    settings: dict[str, Any], named: str, sqlite_store: RunStore
) -> None:
    """Issue 35 R9. On main: an infinite temperature escaped run() and stream() as a raw ValueError (JSON cannot
    carry it), a lone surrogate in stop as a UnicodeEncodeError, and a max_tokens or seed of 10**30 was sent (a
    run row written, the call failing at the vendor or in the SDK)."""
    rec = Recorder(json_response(chat_completion()))
    for driver in (llamacpp(rec), AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(rec))):
        agent = Agent(driver, store=sqlite_store)
        with pytest.raises(InputError, match=f"model_settings: {named}"):
            await agent.run("hi", model_settings=settings)
        events = [e async for e in agent.stream("hi", model_settings=settings)]
        assert [e.type for e in events] == ["RUN_ERROR"] and events[0].error is not None
        assert isinstance(events[0].error, str) and "must be" in events[0].error
        with pytest.raises(InputError, match=named):
            Agent(driver, model_settings=settings)
    assert sqlite_store.list_runs() == [] and rec.requests == []


async def test_a_max_tokens_past_the_context_window_is_named_as_such(sqlite_store: RunStore, tmp_path: Any) -> None:
    """On main a max_tokens larger than the path's window was reported as "the run's own input does not fit"."""
    rec = Recorder(json_response(anthropic_message()))
    catalog = catalog_layer(tmp_path, {"context_window": 100_000}, file="window.json")
    agent = Agent(
        AnthropicProvider("claude-sonnet-4-6", client=anthropic_client(rec)), store=sqlite_store, catalog=catalog
    )
    with pytest.raises(InputError, match=r"model_settings.max_tokens=200,000 leaves no room for input on "):
        await agent.run("hi", model_settings={"max_tokens": 200_000})
    with pytest.raises(InputError, match=r"lower model_settings.max_tokens \(99,990\)"):
        await agent.run("hi", model_settings={"max_tokens": 99_990})
    assert sqlite_store.list_runs() == [] and rec.requests == []
