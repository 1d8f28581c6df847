"""segue._core.tokens: one token per started 4 UTF-8 bytes, counted over canonical JSON; prefix-stable."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from segue._core.tokens import canonical_json, complete_tokens, count_json, count_tokens


def test_counting_rule() -> None:
    assert count_tokens("") == 0
    assert count_tokens("abcd") == 1
    assert count_tokens("abcde") == 2
    assert count_tokens("é") == 1  # 2 bytes
    assert count_tokens("日本語") == 3  # 9 bytes
    assert count_json({"b": 1, "a": [1, 2]}) == count_json({"a": [1, 2], "b": 1}) == count_tokens('{"a":[1,2],"b":1}')
    assert canonical_json({"é": None}) == '{"é":null}'


@given(st.text(), st.text())
def test_prefix_never_counts_more_than_the_whole(prefix: str, rest: str) -> None:
    whole = prefix + rest
    assert count_tokens(prefix) <= count_tokens(whole)
    # The whole tokens a byte-prefix cache can reuse never exceed either count.
    shared = complete_tokens(len(prefix.encode("utf-8")))
    assert shared <= count_tokens(prefix) <= count_tokens(whole)


@given(st.lists(st.text(), max_size=8))
def test_block_sums_bound_the_joined_count(blocks: list[str]) -> None:
    """Counting per block never undercounts the concatenation, so per-block cache arithmetic stays consistent."""
    assert sum(count_tokens(b) for b in blocks) >= count_tokens("".join(blocks))
