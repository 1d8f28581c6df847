"""Malformed requests get a vendor-shaped 4xx naming the offending field, never a 500 or a crash."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segue_twin import ScriptedPolicy, Twin

_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 3000),
    st.text(max_size=4),
    st.just({}),
    st.just([]),
    st.just({"type": "ephemeral", "ttl": "1h"}),
)
_FIELDS = [
    "text",
    "id",
    "name",
    "input",
    "tool_use_id",
    "content",
    "cache_control",
    "thinking",
    "signature",
    "data",
    "call_id",
    "arguments",
    "output",
    "role",
    "encrypted_content",
    "summary",
    "tool_calls",
    "tool_call_id",
]


def _block(types: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"type": st.sampled_from(types)}, optional=dict.fromkeys(_FIELDS, _LEAF))


_ANTHROPIC = st.fixed_dictionaries(
    {
        "model": st.just("claude-sonnet-4-6"),
        "max_tokens": st.sampled_from([1, 2000, 5000]),
        "messages": st.lists(
            st.fixed_dictionaries(
                {
                    "role": st.sampled_from(["user", "assistant"]),
                    "content": st.one_of(
                        st.text(max_size=4),
                        st.lists(
                            _block(["text", "tool_use", "tool_result", "thinking", "redacted_thinking"]), max_size=3
                        ),
                    ),
                }
            ),
            min_size=1,
            max_size=4,
        ),
    },
    optional={"system": _LEAF, "tools": st.lists(_LEAF, max_size=2), "thinking": _LEAF, "cache_control": _LEAF},
)
_RESPONSES = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["gpt-5", "gpt-4.1"]),
        "input": st.one_of(
            st.text(max_size=3),
            st.lists(
                _block(["message", "function_call", "function_call_output", "reasoning", "item_reference"]),
                min_size=1,
                max_size=4,
            ),
        ),
    },
    optional={
        "store": st.booleans(),
        "include": _LEAF,
        "reasoning": _LEAF,
        "instructions": _LEAF,
        "tools": _LEAF,
        "prompt_cache_retention": _LEAF,
        "max_output_tokens": _LEAF,
    },
)
_CHAT = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["gpt-5", "gpt-4.1"]),
        "messages": st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(["user", "assistant", "system", "tool"])},
                optional={
                    "content": _LEAF,
                    "tool_calls": st.one_of(_LEAF, st.lists(_LEAF, max_size=2)),
                    "tool_call_id": _LEAF,
                },
            ),
            min_size=1,
            max_size=4,
        ),
    },
    optional={"tools": _LEAF, "stream_options": _LEAF, "max_tokens": _LEAF},
)
_TWIN = Twin(policy=ScriptedPolicy(["ok"] * 100_000))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.one_of(
        st.tuples(st.just("/v1/messages"), _ANTHROPIC),
        st.tuples(st.just("/v1/responses"), _RESPONSES),
        st.tuples(st.just("/v1/chat/completions"), _CHAT),
    )
)
def test_malformed_requests_get_a_4xx_not_a_500(case: tuple[str, dict[str, Any]]) -> None:
    path, body = case
    answer = _TWIN.handle(
        "POST", path, {"content-type": "application/json", "authorization": "Bearer k"}, json.dumps(body).encode()
    )
    assert answer.status < 500, answer.body[:300]
    if answer.status >= 400:
        payload = json.loads(answer.body)
        error = payload["error"]
        assert isinstance(error["message"], str) and error["message"]
        assert (payload.get("type") == "error") == (path == "/v1/messages")
