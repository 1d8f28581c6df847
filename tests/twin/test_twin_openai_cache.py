"""OpenAI prompt caching in the twin: exact byte prefixes, 1024-token minimum, 128-token steps, cache keys, TTL.

Rules: https://developers.openai.com/api/docs/guides/prompt-caching ("Caching is enabled automatically for
prompts that are 1024 tokens or longer", "cache hits occur for every 128 additional identical tokens",
`prompt_cache_key` "is combined with the prefix hash") and the Prompt Caching 201 cookbook.
"""

from __future__ import annotations

from typing import Any

import openai

from segue.demo.sample_tools import FakeClock
from segue_twin import PrefixCache, ScriptedPolicy, Twin, rules_for

LONG = "Answer questions about the shop database carefully. " * 120  # ~1600 tokens
RULES = rules_for("gpt-4.1")


def _client(clock: FakeClock | None = None) -> openai.AsyncOpenAI:
    return Twin(policy=ScriptedPolicy(["ok"] * 30), clock=clock).openai_client()


async def _cached(client: openai.AsyncOpenAI, question: str = "q", **kwargs: Any) -> tuple[int, int]:
    response = await client.responses.create(model="gpt-4.1", instructions=LONG, input=question, **kwargs)
    assert response.usage is not None
    return response.usage.input_tokens, response.usage.input_tokens_details.cached_tokens


def test_prefix_cache_counts_whole_128_token_steps_from_1024() -> None:
    """Byte-level rule: a shared prefix of P whole tokens reuses the largest 1024 + 128k <= P.

    https://developers.openai.com/api/docs/guides/prompt-caching
    """
    cache = PrefixCache()
    first = b"a" * (4 * 1300)
    assert cache.account(bucket="b", prompt=first, rules=RULES, ttl_name=None, now=0.0) == 0
    shares_1270 = b"a" * (4 * 1270) + b"b" * 400
    assert cache.account(bucket="b", prompt=shares_1270, rules=RULES, ttl_name=None, now=1.0) == 1152
    shares_1000 = b"a" * (4 * 1000) + b"c" * 2000
    assert cache.account(bucket="b", prompt=shares_1000, rules=RULES, ttl_name=None, now=2.0) == 0
    assert cache.account(bucket="other", prompt=first, rules=RULES, ttl_name=None, now=3.0) == 0
    short = b"z" * (4 * 1023)
    cache.account(bucket="b", prompt=short, rules=RULES, ttl_name=None, now=4.0)
    assert cache.account(bucket="b", prompt=short, rules=RULES, ttl_name=None, now=5.0) == 0


async def test_prompts_under_1024_tokens_are_never_cached() -> None:
    """ "By default, caching is enabled automatically for prompts that are 1024 tokens or longer": shorter prompts
    are not cached, however often they repeat.

    https://developers.openai.com/api/docs/guides/prompt-caching
    """
    client = _client()
    for _ in range(3):
        response = await client.responses.create(model="gpt-4.1", instructions="short", input="q")
        assert response.usage is not None
        assert response.usage.input_tokens_details.cached_tokens == 0


async def test_repeated_prefix_is_cached_in_128_token_steps() -> None:
    """A repeated long prompt reads back in whole 128-token steps from 1024; a different question after the same
    instructions reuses only the shared prefix.

    https://developers.openai.com/api/docs/guides/prompt-caching
    """
    client = _client()
    assert (await _cached(client))[1] == 0  # the first request only writes
    total, cached = await _cached(client)
    assert cached >= 1024 and cached % 128 == 0
    assert total - 128 < cached <= total
    other_total, other_cached = await _cached(client, "a different question entirely, and longer")
    assert other_cached % 128 == 0 and 1024 <= other_cached <= cached
    assert other_total > total


async def test_cache_is_keyed_by_prompt_cache_key() -> None:
    """prompt_cache_key is combined with the prefix hash: another key misses; no key is one shared bucket.

    https://developers.openai.com/api/docs/guides/prompt-caching
    """
    client = _client()
    assert (await _cached(client, prompt_cache_key="tenant-a"))[1] == 0
    assert (await _cached(client, prompt_cache_key="tenant-a"))[1] >= 1024
    assert (await _cached(client, prompt_cache_key="tenant-b"))[1] == 0
    assert (await _cached(client))[1] == 0
    assert (await _cached(client))[1] >= 1024


async def test_retention_defaults_to_24h_and_in_memory_expires_after_inactivity() -> None:
    """For models that support both `in_memory` and `24h`, "Organizations without ZDR enabled default to `24h`";
    `in_memory` entries are cleared "within 5 to 10 minutes of inactivity" (the twin: 600 s, a hit refreshes).

    Pinned openai SDK, `prompt_cache_retention` docstring; https://developers.openai.com/api/docs/guides/prompt-caching
    """
    clock = FakeClock()
    client = _client(clock)
    await _cached(client, prompt_cache_key="mem", prompt_cache_retention="in_memory")
    await _cached(client, prompt_cache_key="default")
    clock.advance(599)
    assert (await _cached(client, prompt_cache_key="mem", prompt_cache_retention="in_memory"))[1] >= 1024
    clock.advance(601)
    assert (await _cached(client, prompt_cache_key="mem", prompt_cache_retention="in_memory"))[1] == 0
    best = Twin(policy=ScriptedPolicy(["ok"] * 10), clock=clock, best_effort_hits=True).openai_client()
    await _cached(best, prompt_cache_key="default")
    clock.advance(1200)
    assert (await _cached(best, prompt_cache_key="default"))[1] >= 1024  # 1200 s later: the 24h default kept it
    clock.advance(86_401)
    assert (await _cached(best, prompt_cache_key="default"))[1] == 0  # past the 24 h maximum: gone either way


async def test_24h_retention_is_a_maximum_so_a_hit_is_promised_only_within_the_in_memory_window() -> None:
    """`24h` "keeps cached prefixes active for longer, up to a maximum of 24 hours. This field expresses a maximum
    retention policy": a daily chat's next turn, 23 hours on, may well pay full price. By default the twin hits a
    `24h` entry only within what `in_memory` guarantees (600 s of inactivity, a hit refreshing it); with
    `Twin(best_effort_hits=True)` it keeps it up to the 24 h maximum, the optimistic end of the range.

    Pinned openai SDK, `prompt_cache_retention` docstring.
    """
    clock = FakeClock()
    client = _client(clock)
    await _cached(client, prompt_cache_key="day", prompt_cache_retention="24h")
    clock.advance(599)
    assert (await _cached(client, prompt_cache_key="day", prompt_cache_retention="24h"))[1] >= 1024
    clock.advance(23 * 3600)
    assert (await _cached(client, prompt_cache_key="day", prompt_cache_retention="24h"))[1] == 0  # not promised
    best = Twin(policy=ScriptedPolicy(["ok"] * 10), clock=clock, best_effort_hits=True).openai_client()
    await _cached(best, prompt_cache_key="day", prompt_cache_retention="24h")
    clock.advance(23 * 3600)
    assert (await _cached(best, prompt_cache_key="day", prompt_cache_retention="24h"))[1] >= 1024


IMAGE = {"type": "input_image", "image_url": "data:image/png;base64," + "iVBORw0KGgo" * 40, "detail": "auto"}


async def test_images_are_part_of_the_prefix_and_count_input_tokens() -> None:
    """ "Cache hits are only possible for exact prefix matches within a prompt ... This also applies to images and
    tools, which must be identical between requests." An image counts input tokens, and a different image ends
    the shared prefix where it starts.

    https://developers.openai.com/api/docs/guides/prompt-caching (structuring prompts)
    """
    client = _client()

    def ask(image: dict[str, Any]) -> list[Any]:
        return [{"role": "user", "content": [{"type": "input_text", "text": "Describe this chart."}, image]}]

    without = await client.responses.create(model="gpt-4.1", instructions=LONG, input="Describe this chart.")
    first = await client.responses.create(model="gpt-4.1", instructions=LONG, input=ask(IMAGE))
    assert first.usage is not None and without.usage is not None
    assert first.usage.input_tokens > without.usage.input_tokens + 100  # the image's ~450 bytes are input
    same = await client.responses.create(model="gpt-4.1", instructions=LONG, input=ask(IMAGE))
    assert same.usage is not None and same.usage.input_tokens_details.cached_tokens > without.usage.input_tokens
    other = {**IMAGE, "image_url": "data:image/png;base64," + "R0lGODlh" * 55}
    changed = await client.responses.create(model="gpt-4.1", instructions=LONG, input=ask(other))
    assert changed.usage is not None
    assert changed.usage.input_tokens_details.cached_tokens <= without.usage.input_tokens


async def test_chat_completions_report_cached_prompt_tokens() -> None:
    """Chat Completions share the rule and report it in usage.prompt_tokens_details.cached_tokens.

    https://developers.openai.com/api/docs/guides/prompt-caching
    """
    client = _client()
    messages: list[Any] = [{"role": "system", "content": LONG}, {"role": "user", "content": "q"}]
    cached = []
    for _ in range(2):
        completion = await client.chat.completions.create(model="gpt-4.1", messages=messages, prompt_cache_key="k")
        assert completion.usage is not None and completion.usage.prompt_tokens_details is not None
        cached.append(completion.usage.prompt_tokens_details.cached_tokens)
    assert cached[0] == 0
    assert cached[1] is not None and cached[1] >= 1024 and cached[1] % 128 == 0
