"""GPT-5.6 prompt caching in the twin: hits only at written breakpoints, through the official openai client.

Rules: the pinned openai SDK's `PromptCacheOptions`, `PromptCacheBreakpoint` and `ResponseUsage` docstrings
(.venv/lib/python3.11/site-packages/openai/types/responses/) and the prompt caching guide,
https://developers.openai.com/api/docs/guides/prompt-caching ("GPT-5.6 and later"). The numbers (4 writes per
request, the latest 80 breakpoints, the 30m / 12h TTLs) come from the catalog rows of gpt-5.6-sol. Expected token
counts are measured on the twin itself: the tokens of a prefix are the input tokens of a request that stops there.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from segue.demo.sample_tools import FakeClock
from segue_twin import ScriptedPolicy, Twin

MODEL = "gpt-5.6-sol"
LONG = "Answer questions about the shop database carefully, citing the tables you used. " * 80  # ~1700 tokens
EXPLICIT = {"mode": "explicit"}


def _client(clock: FakeClock | None = None) -> openai.AsyncOpenAI:
    return Twin(policy=ScriptedPolicy(["ok"] * 40), clock=clock).openai_client()


def _text(text: str, breakpoint: dict[str, Any] | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "input_text", "text": text}
    if breakpoint is not None:
        part["prompt_cache_breakpoint"] = breakpoint
    return part


def _message(role: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": list(parts)}


def _head(breakpoint: dict[str, Any] | None = EXPLICIT) -> dict[str, Any]:
    """The stable head: long developer instructions, with a breakpoint at their end."""
    return _message("developer", _text(LONG, breakpoint))


async def _usage(client: openai.AsyncOpenAI, items: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
    response = await client.responses.create(model=MODEL, input=items, **kwargs)  # type: ignore[arg-type]
    assert response.usage is not None
    return response.usage.model_dump()


async def _tokens(items: list[dict[str, Any]]) -> int:
    """Input tokens of a request made of ``items`` (on a fresh twin): the tokens of that prefix."""
    return int((await _usage(_client(), items))["input_tokens"])


def _read(usage: dict[str, Any]) -> int:
    return int(usage["input_tokens_details"]["cached_tokens"])


def _written(usage: dict[str, Any]) -> int:
    return int(usage["input_tokens_details"]["cache_write_tokens"])


async def test_hits_only_at_written_breakpoints() -> None:
    """A breakpoint "Marks the exact end of a reusable prompt prefix": a request reads up to a breakpoint an
    earlier request wrote, never further, even when more of the prompt is byte-identical.

    Pinned openai SDK, `PromptCacheBreakpoint`.
    """
    client = _client()
    await _usage(client, [_head(), _message("user", _text("What were the sales in March 2026 by country?"))])
    second = await _usage(client, [_head(), _message("user", _text("What were the sales in March 2026 by city?"))])
    assert _read(second) == await _tokens([_head()])
    assert _written(second) == second["input_tokens"] - _read(second)


async def test_a_partial_hit_ends_inside_a_message_at_a_breakpoint() -> None:
    """Breakpoints sit on content parts, so a hit can end inside a message: "You can add explicit breakpoints to
    content blocks with `prompt_cache_breakpoint`."

    Pinned openai SDK, `PromptCacheOptions`.
    """
    client = _client()
    await _usage(client, [_message("user", _text(LONG, EXPLICIT), _text("First question?"))])
    second = await _usage(client, [_message("user", _text(LONG, EXPLICIT), _text("Another question?"))])
    assert _read(second) == await _tokens([_message("user", _text(LONG))])
    assert _read(second) < second["input_tokens"]


async def test_the_boundary_is_not_rounded_to_a_token_block() -> None:
    """ "the boundary is not rounded to a token block": the read is exactly the prefix up to the breakpoint, not
    the 1024 + 128k steps of earlier models.

    Pinned openai SDK, `PromptCacheBreakpoint`.
    """
    client = _client()
    await _usage(client, [_head(), _message("user", _text("q1"))])
    second = await _usage(client, [_head(), _message("user", _text("q2"))])
    head = await _tokens([_head()])
    assert head % 128 != 0
    assert _read(second) == head


async def test_the_implicit_breakpoint_is_at_the_end_of_the_latest_eligible_message() -> None:
    """ "When `prompt_cache_options.mode` is `implicit`, OpenAI places a breakpoint at the end of the latest
    eligible message" (an input message or a tool output; assistant output cannot carry a breakpoint). Without
    explicit breakpoints the next turn reads up to there, and a new conversation with another first question
    reads nothing of the shared instructions.

    https://developers.openai.com/api/docs/guides/prompt-caching (GPT-5.6 and later, implicit mode)
    """
    client = _client()
    question = [_head(None), _message("user", _text("q1"))]
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a1"}]}
    first = await _usage(client, [*question, answer])
    assert _written(first) == await _tokens(question)  # up to the user message, not the assistant's
    second = await _usage(client, [*question, answer, _message("user", _text("q2"))])
    assert _read(second) == await _tokens(question)
    other_conversation = await _usage(client, [_head(None), _message("user", _text("another first question"))])
    assert _read(other_conversation) == 0


def _parts(changed: int | None = None) -> list[dict[str, Any]]:
    """A user message of five parts, each with a breakpoint; part ``changed`` differs from other requests'."""
    texts = [LONG, "part 2", "part 3", "part 4", "part 5"]
    return [_text(t + (" (edited)" if i + 1 == changed else ""), EXPLICIT) for i, t in enumerate(texts)]


async def test_implicit_mode_writes_the_implicit_breakpoint_and_the_latest_three_explicit() -> None:
    """ "With `implicit`, OpenAI creates one implicit breakpoint and writes up to the latest three explicit
    breakpoints in the request": of five explicit breakpoints the first two are not written, so a request that
    changes the third part reads nothing.

    Pinned openai SDK, `PromptCacheOptions.mode`.
    """
    client = _client()
    first = await _usage(client, [_message("user", *_parts())])
    assert _written(first) == first["input_tokens"]
    changed = await _usage(client, [_message("user", *_parts(changed=3))])
    assert _read(changed) == 0


async def test_explicit_mode_writes_the_latest_four_explicit_breakpoints() -> None:
    """ "With `explicit`, OpenAI does not create an implicit breakpoint and writes up to the latest four explicit
    breakpoints": the second of five breakpoints is written (a changed third part reads up to it), the first is
    not (a changed second part reads nothing), and the unmarked end of the prompt is not written.

    Pinned openai SDK, `PromptCacheOptions.mode`.
    """
    explicit = {"mode": "explicit"}
    two = await _tokens([_message("user", *_parts()[:2])])
    for changed, expected in ((3, two), (2, 0)):
        client = _client()
        await _usage(client, [_message("user", *_parts())], prompt_cache_options=explicit)
        usage = await _usage(client, [_message("user", *_parts(changed=changed))], prompt_cache_options=explicit)
        assert _read(usage) == expected, changed
    client = _client()
    tail = [_message("user", *_parts(), _text("unmarked tail"))]
    first = await _usage(client, tail, prompt_cache_options=explicit)
    assert _written(first) == await _tokens([_message("user", *_parts())])
    again = await _usage(client, tail, prompt_cache_options=explicit)
    assert _read(again) == _written(first) < again["input_tokens"]


async def test_explicit_mode_without_explicit_breakpoints_does_not_use_prompt_caching() -> None:
    """ "If there are no explicit breakpoints, the request does not use prompt caching": identical requests in
    explicit mode without breakpoints neither write nor read, not even what an implicit-mode request wrote.

    Pinned openai SDK, `PromptCacheOptions.mode`.
    """
    client = _client()
    items = [_head(None), _message("user", _text("q"))]
    for _ in range(2):
        usage = await _usage(client, items, prompt_cache_options={"mode": "explicit"})
        assert _read(usage) == 0 and _written(usage) == 0
    assert _written(await _usage(client, items)) > 0  # implicit mode writes the whole prompt
    usage = await _usage(client, items, prompt_cache_options={"mode": "explicit"})
    assert _read(usage) == 0 and _written(usage) == 0
    assert _read(await _usage(client, items)) == usage["input_tokens"]


async def test_matching_considers_the_latest_80_breakpoints() -> None:
    """ "For cache matching, OpenAI considers up to the latest 80 breakpoints in the conversation": the head's
    breakpoint is found while it is among the latest 80, and missed once 80 breakpoints follow it.

    Pinned openai SDK, `PromptCacheOptions`.
    """
    explicit = {"mode": "explicit"}
    head = await _tokens([_head()])
    for later, expected in ((79, head), (80, 0)):
        client = _client()
        await _usage(client, [_head(), _message("user", _text("start"))], prompt_cache_options=explicit)
        notes = [_text(f"note {i}", EXPLICIT) for i in range(later)]
        usage = await _usage(client, [_head(), _message("user", *notes)], prompt_cache_options=explicit)
        assert _read(usage) == expected, later


async def test_there_is_no_content_block_lookback_limit() -> None:
    """Matching works "without a content-block lookback limit": the head's breakpoint is read 150 content blocks
    before the end (Anthropic's lookback would stop after 20).

    Pinned openai SDK, `PromptCacheOptions`.
    """
    client = _client()
    await _usage(client, [_head(), _message("user", _text("start"))])
    notes = [_text(f"note {i}") for i in range(150)]
    usage = await _usage(client, [_head(), _message("user", *notes)])
    assert _read(usage) == await _tokens([_head()])


async def test_ttl_defaults_to_30m_and_12h_entries_live_longer() -> None:
    """ "The `ttl` defaults to `30m`"; supported values are `30m` and `12h` ("The minimum lifetime applied to every
    implicit and explicit cache breakpoint written by the request"; the twin expires entries at it). A hit
    refreshes an entry.

    Pinned openai SDK, `PromptCacheOptions.ttl`.
    """
    clock = FakeClock()
    client = _client(clock)
    items = [_head(), _message("user", _text("q"))]
    await _usage(client, items, prompt_cache_key="short")
    await _usage(client, items, prompt_cache_key="long", prompt_cache_options={"ttl": "12h"})
    clock.advance(1799)
    assert _read(await _usage(client, items, prompt_cache_key="short")) > 0  # refreshed
    clock.advance(1801)
    assert _read(await _usage(client, items, prompt_cache_key="short")) == 0
    clock.advance(43_199 - 3600)
    assert _read(await _usage(client, items, prompt_cache_key="long", prompt_cache_options={"ttl": "12h"})) > 0


async def test_a_breakpoint_without_ttl_inherits_the_request_ttl() -> None:
    """ "When `ttl` is omitted, the breakpoint inherits the request's `prompt_cache_options.ttl`"; a breakpoint's
    own `ttl` applies to it. The writes are reported per TTL in `cache_write_tokens_details`.

    Pinned openai SDK, `PromptCacheBreakpoint`.
    """
    client = _client()
    items = [_head(), _message("user", _text("question", {"mode": "explicit", "ttl": "30m"}))]
    usage = await _usage(client, items, prompt_cache_options={"ttl": "12h"})
    head = await _tokens([_head()])
    details = usage["input_tokens_details"]["cache_write_tokens_details"]
    assert details == {"ttl_12h_tokens": head, "ttl_30m_tokens": usage["input_tokens"] - head}


async def test_usage_reports_cache_write_tokens() -> None:
    """`input_tokens_details.cache_write_tokens` is "The number of input tokens that were written to the cache"
    and `cached_tokens` the ones "retrieved from the cache"; both are parts of `input_tokens`. A first request
    writes its whole prompt (the implicit breakpoint ends it); the same request again reads it all.

    Pinned openai SDK, `InputTokensDetails`.
    """
    client = _client()
    items = [_head(), _message("user", _text("q"))]
    first = await _usage(client, items)
    assert (_read(first), _written(first)) == (0, first["input_tokens"])
    assert first["input_tokens_details"]["cache_write_tokens_details"] == {
        "ttl_30m_tokens": first["input_tokens"],
        "ttl_12h_tokens": 0,
    }
    again = await _usage(client, items)
    assert (_read(again), _written(again)) == (again["input_tokens"], 0)


async def test_prewarm_prepares_the_cache_without_generating_output() -> None:
    """`prewarm`: "Prepares the prompt cache without generating output ... When set to `true`, overrides the
    `generate` field to `false`": the response has no output and the next request reads what it wrote.

    Pinned openai SDK, `PromptCacheOptions.prewarm`.
    """
    twin = Twin(policy=ScriptedPolicy(["the answer"]))
    client = twin.openai_client()
    items = [_head(), _message("user", _text("q"))]
    warm = await client.responses.create(model=MODEL, input=items, prompt_cache_options={"prewarm": True})  # type: ignore[arg-type]
    assert warm.output == [] and warm.status == "completed"
    assert warm.usage is not None and warm.usage.output_tokens == 0
    assert warm.usage.input_tokens_details.cache_write_tokens == warm.usage.input_tokens
    answer = await client.responses.create(model=MODEL, input=items)  # type: ignore[arg-type]
    assert answer.usage is not None and answer.usage.input_tokens_details.cached_tokens == warm.usage.input_tokens
    assert answer.output_text == "the answer"


async def test_the_response_reports_the_applied_prompt_cache_options() -> None:
    """`Response.prompt_cache_options` holds "The prompt-caching options that were applied to the response"
    (defaults filled in). `comparison_response_id` is accepted; the diagnostics it requests come back "when the
    feature is enabled"; the same input compared with itself is a `cache_hit` (segue_twin.diagnostics; the
    diagnostics rules are tested in tests/twin/test_twin_diagnostics.py). The deprecated `prompt_cache_retention` is a
    maximum that does "not interact" with the ttl, so it is accepted alongside it.

    Pinned openai SDK, `Response.prompt_cache_options`, `PromptCacheOptions`, `prompt_cache_retention`.
    """
    client = _client()
    items = [_head(), _message("user", _text("q"))]
    plain = await client.responses.create(model=MODEL, input=items)  # type: ignore[arg-type]
    assert plain.prompt_cache_options is not None
    assert plain.prompt_cache_options.model_dump() == {"mode": "implicit", "ttl": "30m", "comparison_response_id": None}
    asked = await client.responses.create(
        model=MODEL,
        input=items,  # type: ignore[arg-type]
        prompt_cache_options={"mode": "explicit", "ttl": "12h", "comparison_response_id": plain.id},
        prompt_cache_retention="24h",
    )
    assert asked.prompt_cache_options is not None
    assert asked.prompt_cache_options.model_dump() == {
        "mode": "explicit",
        "ttl": "12h",
        "comparison_response_id": plain.id,
    }
    assert asked.prompt_cache_diagnostics is not None and asked.prompt_cache_diagnostics.type == "cache_hit"
    older = await Twin().openai_client().responses.create(model="gpt-4.1", input="q")
    assert older.prompt_cache_options is None


async def _refused(client: openai.AsyncOpenAI, **kwargs: Any) -> dict[str, Any]:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(**{"model": MODEL, "input": "q", **kwargs})
    body = caught.value.body
    assert isinstance(body, dict)
    return body


async def test_prompt_cache_options_and_breakpoints_are_refused_before_gpt_5_6() -> None:
    """`prompt_cache_options` and `prompt_cache_breakpoint` are "Supported for `gpt-5.6` and later models": an
    earlier model answers 400 naming the parameter.

    Pinned openai SDK, `PromptCacheOptions`.
    """
    client = _client()
    body = await _refused(client, model="gpt-4.1", prompt_cache_options={"mode": "implicit"})
    assert (body["param"], body["code"]) == ("prompt_cache_options", "unsupported_parameter")
    body = await _refused(client, model="gpt-4.1", input=[_head()])
    assert body["param"] == "input[0].content[0].prompt_cache_breakpoint"


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"prompt_cache_options": {"ttl": "1h"}}, "prompt_cache_options.ttl"),
        ({"prompt_cache_options": {"mode": "automatic"}}, "prompt_cache_options.mode"),
        ({"prompt_cache_options": {"retention": "24h"}}, "prompt_cache_options.retention"),
        (
            {"input": [_message("user", _text("q", {"mode": "implicit"}))]},
            "input[0].content[0].prompt_cache_breakpoint",
        ),
        (
            {"input": [_message("user", _text("q", {"mode": "explicit", "ttl": "24h"}))]},
            "input[0].content[0].prompt_cache_breakpoint.ttl",
        ),
    ],
)
async def test_values_outside_the_documented_ones_are_refused(kwargs: dict[str, Any], param: str) -> None:
    """`mode` is `implicit` or `explicit`, `ttl` is `30m` or `12h` (on the options and on a breakpoint, whose
    `mode` is "Always `explicit`"); anything else is a 400 naming the parameter.

    Pinned openai SDK, `PromptCacheOptions`, `PromptCacheBreakpoint`.
    """
    body = await _refused(_client(), **kwargs)
    assert body["param"] == param and body["type"] == "invalid_request_error"


async def test_chat_completions_take_breakpoints_and_report_cache_write_tokens() -> None:
    """Chat Completions take the same `prompt_cache_breakpoint` on content parts and report
    `prompt_tokens_details.cache_write_tokens` ("The unadjusted number of prompt tokens written to cache").

    Pinned openai SDK, `ChatCompletionContentPartTextParam`, `PromptTokensDetails`.
    """
    client = _client()
    system = {"role": "system", "content": [{"type": "text", "text": LONG, "prompt_cache_breakpoint": EXPLICIT}]}
    details = []
    for question in ("q1", "q2"):
        completion = await client.chat.completions.create(
            model=MODEL,
            messages=[system, {"role": "user", "content": question}],  # type: ignore[list-item]
        )
        assert completion.usage is not None and completion.usage.prompt_tokens_details is not None
        details.append((completion.usage.prompt_tokens, completion.usage.prompt_tokens_details))
    (first_total, first), (second_total, second) = details
    assert (first.cached_tokens, first.cache_write_tokens) == (0, first_total)
    head = await _client().chat.completions.create(model=MODEL, messages=[system])  # type: ignore[list-item]
    assert head.usage is not None
    assert second.cached_tokens == head.usage.prompt_tokens
    assert second.cache_write_tokens == second_total - head.usage.prompt_tokens


async def test_chat_completions_offer_only_the_30m_ttl_and_no_prewarm() -> None:
    """The Chat Completions `ttl` "Defaults to `30m`, which is currently the only supported value", and its
    `PromptCacheOptions` has no `prewarm`: both are 400s naming the parameter.

    Pinned openai SDK, `chat.completion_create_params.PromptCacheOptions`.
    """
    client = _client()
    messages = [{"role": "user", "content": "q"}]
    for options, param in (
        ({"ttl": "12h"}, "prompt_cache_options.ttl"),
        ({"prewarm": True}, "prompt_cache_options.prewarm"),
    ):
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model=MODEL, messages=messages, prompt_cache_options=options)  # type: ignore[arg-type]
        assert isinstance(caught.value.body, dict) and caught.value.body["param"] == param


async def test_a_newer_id_with_the_gpt_5_6_naming_gets_the_breakpoint_cache() -> None:
    """An OpenAI id newer than the catalog (`gpt-6.3-sol`) follows the GPT-5.6-and-later naming, so the twin
    serves it with that family's cache (the catalog's `model_patterns` on the openai vendor row): it takes
    `prompt_cache_options` ("Supported for `gpt-5.6` and later models"), pre-warms and reports the writes,
    instead of the pre-GPT-5.6 defaults, which refuse the options and write for free.

    Pinned openai SDK, `PromptCacheOptions`; the prompt caching guide ("GPT-5.6 and later").
    """
    client = _client()
    items = [_head(), _message("user", _text("q"))]
    warm = await client.responses.create(model="gpt-6.3-sol", input=items, prompt_cache_options={"prewarm": True})  # type: ignore[arg-type]
    assert warm.usage is not None and warm.output == []
    assert warm.usage.input_tokens_details.cache_write_tokens == warm.usage.input_tokens > 0
    again = await client.responses.create(model="gpt-6.3-sol", input=items)  # type: ignore[arg-type]
    assert again.usage is not None and again.usage.input_tokens_details.cached_tokens == warm.usage.input_tokens
    assert again.prompt_cache_options is not None and again.prompt_cache_options.ttl == "30m"
