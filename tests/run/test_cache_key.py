"""The default prompt cache key: per tenant when the app names one, else per conversation; never one key for every
user and never per run.

Sources:
- the pinned openai SDK's `prompt_cache_key` (response_create_params.py): "Used by OpenAI to cache responses for
  similar requests to optimize your cache hit rates. Replaces the `user` field."; and the `user` field it replaces:
  "Use `prompt_cache_key` instead to maintain caching optimizations. A stable identifier for your end-users. Used
  to boost cache hit rates by better bucketing similar requests";
- OpenAI's prompt caching guide (developers.openai.com/api/docs/guides/prompt-caching, as quoted in
  /work/shared/reference/wire-formats.md): requests route by "a hash of the initial prefix", the
  `prompt_cache_key` "is combined with the prefix hash", and above about 15 requests per minute per prefix and key
  requests overflow to other machines. One key for every user sends every conversation's requests through that
  one prefix + key pair.
"""

from __future__ import annotations

import inspect
import json

import openai.types.responses.response_create_params as sdk_params

from segue import Agent, RunStore
from segue.providers import OpenAIResponsesProvider, OpenRouterProvider
from segue.run.request import CONVERSATION_KEY
from segue_twin import Twin
from tests._support.helpers import lookup, policy_provider
from tests._support.vendor_http import Recorder, json_response, openai_client


def test_the_rule_is_the_pinned_sdks() -> None:
    source = inspect.getsource(sdk_params)
    assert "Used by OpenAI to cache responses for similar requests to optimize your cache" in source
    assert "A stable\n    identifier for your end-users. Used to boost cache hit rates by better bucketing" in source


async def test_without_a_tenant_every_turn_of_a_conversation_shares_its_first_runs_key(store: RunStore) -> None:
    provider = policy_provider()
    agent = Agent(provider, "p", [lookup], store)
    first = await agent.run("look up cats")
    second = await agent.run("and dogs?", runs=[first.run_id])
    third = await agent.run("and birds?", runs=[first.run_id, second.run_id], replay_keep=1)
    keys = {r.cache_key for r in provider.requests}
    assert keys == {f"{CONVERSATION_KEY}{first.run_id}"}, "one key for the whole conversation, every request"
    assert len(provider.requests) >= 6 and third.status == "success"
    # Another conversation of the same app gets its own key: not one key for every user.
    other = await agent.run("look up cows")
    assert provider.requests[-1].cache_key == f"{CONVERSATION_KEY}{other.run_id}" != f"{CONVERSATION_KEY}{first.run_id}"
    assert all(r.cache_key != "default" for r in provider.requests)


async def test_a_tenant_keeps_its_own_key_across_its_conversations(store: RunStore) -> None:
    provider = policy_provider()
    agent = Agent(provider, "p", [lookup], store)
    first = await agent.run("look up cats", tenant_id="acme")
    await agent.run("and dogs?", runs=[first.run_id], tenant_id="acme")
    await agent.run("look up cows", tenant_id="acme")
    assert {r.cache_key for r in provider.requests} == {"acme"}


async def test_a_prewarm_uses_the_key_of_the_run_it_warms_for() -> None:
    """A prewarm sends what the next run sends before its user message, its cache key included (GPT-5.6's
    `prompt_cache_options.prewarm` on the twin)."""
    twin, store = Twin(), RunStore("sqlite:///:memory:")
    agent = Agent(OpenAIResponsesProvider("gpt-5.6-sol", client=twin.openai_client()), "You answer briefly.", [], store)
    first = await agent.run("Hello there.")
    warm = await agent.prewarm(runs=[first.run_id])
    nxt = await agent.run("And again.", runs=[first.run_id])
    record = store.prewarms.get(warm.prewarm_id)
    assert record is not None
    [sent] = [c.provider_request for c in store.get_run(nxt.run_id).llm_interactions]  # type: ignore[union-attr]
    key = f"{CONVERSATION_KEY}{first.run_id}"
    assert record.interaction.provider_request["prompt_cache_key"] == sent["prompt_cache_key"] == key


async def test_the_responses_body_carries_the_conversation_key_on_every_turn(store: RunStore) -> None:
    twin = Twin()
    agent = Agent(OpenAIResponsesProvider("gpt-5", client=twin.openai_client()), "You answer briefly.", [], store)
    first = await agent.run("Hello there.")
    second = await agent.run("And again.", runs=[first.run_id])
    bodies = [c.provider_request for r in (first, second) for c in store.get_run(r.run_id).llm_interactions]  # type: ignore[union-attr]
    assert [b["prompt_cache_key"] for b in bodies] == [f"{CONVERSATION_KEY}{first.run_id}"] * len(bodies)


async def test_openrouter_sends_the_conversation_key_as_its_session_id(store: RunStore) -> None:
    """OpenRouter's sticky `session_id` is the request's cache key (wire/openrouter/request.py): per conversation
    without a tenant, the same on every turn."""
    answer = {
        "id": "gen-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "anthropic/claude-sonnet-4.6",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }
    rec = Recorder(json_response(answer), json_response(answer))
    provider = OpenRouterProvider(
        "anthropic/claude-sonnet-4.6", client=openai_client(rec, "https://openrouter.ai/api/v1")
    )
    agent = Agent(provider, "You answer briefly.", [], store)
    first = await agent.run("Hello there.")
    await agent.run("And again.", runs=[first.run_id])
    assert [json.loads(r.content)["session_id"] for r in rec.requests] == [f"{CONVERSATION_KEY}{first.run_id}"] * 2
