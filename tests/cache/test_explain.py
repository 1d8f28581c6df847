"""segue.cache.explain: why a request did or did not reuse the previous request's cached prefix."""

from __future__ import annotations

from typing import Any

from segue import RunStore
from segue._core.hashing import canonical_json
from segue._core.usage import cache_parts
from segue.cache.explain import (
    breaks,
    compare_bodies,
    explain_run,
    is_fragment_message,
    is_fragment_text,
    own_messages_start,
    prefix_share,
)
from segue.cache.layout import build_fragment
from segue.generated import LayoutMeta, LlmInteraction, ReplaySummary, RunDetail, RunMeta, Usage, get_converter
from tests._support.sample_runs import EDITED_PROMPT, PROMPT, SampleRuns

USAGE = Usage(input_tokens=100, output_tokens=10, cache_read_tokens=60, cache_write_tokens=40)


def _get(url: str, run_id: str) -> tuple[RunDetail, RunDetail | None]:
    store = RunStore(url)
    try:
        run = store.get_run(run_id)
        assert run is not None
        previous = store.get_run(run.continued_from) if run.continued_from else None
        return run, previous
    finally:
        store.close()


def detail(
    run_id: str,
    bodies: list[dict[str, Any]],
    *,
    vendor: str = "anthropic",
    models: list[str] | None = None,
    continued_from: str | None = None,
    replay: ReplaySummary | None = None,
    meta: RunMeta | None = None,
    usage: Usage = USAGE,
) -> RunDetail:
    return RunDetail(
        run_id=run_id,
        status="success",
        tenant_id="default",
        agent_name="a",
        model="m",
        vendor=vendor,
        created_at="2025-01-01T00:00:00Z",
        usage=usage,
        continued_from=continued_from,
        replay=replay,
        input="q",
        meta=meta,
        traces=[],
        llm_interactions=[
            LlmInteraction(
                iteration=i + 1,
                vendor=vendor,
                model=(models or ["m"] * len(bodies))[i],
                provider_request=body,
                usage=usage,
                latency_ms=1.0,
            )
            for i, body in enumerate(bodies)
        ],
        tool_calls=[],
    )


TOOLS = [{"name": "lookup", "description": "Look up.", "input_schema": {"type": "object", "properties": {}}}]


def anthropic(messages: list[Any], *, system: str = "You help.", tools: list[Any] = TOOLS) -> dict[str, Any]:
    return {
        "model": "claude-x",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "tools": tools,
        "messages": messages,
    }


def user(text: str, *, cache: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if cache:
        block["cache_control"] = {"type": "ephemeral"}
    return {"role": "user", "content": [block]}


def call(n: int) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "lookup", "input": {}}]}


def result(n: int, *extra: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "ok"}, *extra]}


def fragment_text(n: int) -> str:
    block = build_fragment(f"iteration {n} of 5", n).content[0]
    return getattr(block, "text")  # noqa: B009 - a TextBlock; getattr keeps mypy off the union


# -- acceptance: real agent runs --------------------------------------------------------------------------------


def test_system_prompt_edit_is_named_as_the_first_divergence(runs: SampleRuns) -> None:
    run, previous = _get(runs.url, runs.edited)
    explained = explain_run(run, previous)
    first = explained.iterations[0]
    assert first.cause == "system"
    assert first.divergence is not None and first.divergence.section == "system"
    assert first.divergence.path == "system"
    assert EDITED_PROMPT.startswith(PROMPT)
    # Excerpts start just before the first difference, so the edit itself shows.
    assert first.divergence.previous is not None and PROMPT.endswith(first.divergence.previous.lstrip("…"))
    assert first.divergence.current is not None and first.divergence.current.endswith("Be brief.")
    assert first.previous_run_id == runs.third and "system prompt changed" in first.reason
    # What came before the system prompt (model and tools) was reused: a prefix, but not the whole request.
    assert previous is not None
    assert 0 < first.prefix_bytes < first.previous_bytes  # type: ignore[operator]
    assert explained.iterations[1].cause == "extends"
    assert [b.iteration for b in breaks(explained)] == [1]


def test_window_move_names_the_first_collapsed_run(runs: SampleRuns) -> None:
    run, previous = _get(runs.url, runs.third)
    explained = explain_run(run, previous)
    (only,) = explained.iterations
    assert only.cause == "window"
    assert only.collapsed_run == runs.first
    assert runs.first in only.reason and "question + answer" in only.reason
    assert only.divergence is not None and only.divergence.path == "messages[1].content[0]"
    assert only.previous_run_id == runs.second and only.previous_iteration == 2


def test_replaying_everything_in_full_extends_the_previous_request(runs: SampleRuns) -> None:
    run, previous = _get(runs.url, runs.second)
    explained = explain_run(run, previous)
    assert [i.cause for i in explained.iterations] == ["extends", "extends"]
    first = explained.iterations[0]
    assert first.prefix_bytes == first.previous_bytes and prefix_share(first) == 1.0
    assert first.request_bytes > first.prefix_bytes
    assert breaks(explained) == []


def test_the_first_run_has_nothing_to_compare(runs: SampleRuns) -> None:
    run, previous = _get(runs.url, runs.first)
    assert previous is None
    explained = explain_run(run)
    assert explained.iterations[0].cause == "first" and prefix_share(explained.iterations[0]) is None
    assert explained.iterations[1].cause == "extends"


def test_a_previous_run_that_is_not_readable_is_reported(runs: SampleRuns) -> None:
    run, _ = _get(runs.url, runs.second)
    explained = explain_run(run, None)
    assert explained.iterations[0].cause == "missing"
    assert runs.first in explained.iterations[0].reason


def test_explanation_is_plain_json(runs: SampleRuns) -> None:
    run, previous = _get(runs.url, runs.third)
    data = get_converter().unstructure(explain_run(run, previous))
    assert canonical_json(data)  # plain JSON all the way down
    assert data["iterations"][0]["cause"] == "window"
    assert data["iterations"][0]["collapsed_run"] == runs.first


# -- fragments ----------------------------------------------------------------------------------------------


def test_fragment_text_is_what_the_layout_builds() -> None:
    assert is_fragment_text(fragment_text(1))
    assert not is_fragment_text("Please look at <segue-runtime-state> in the docs")
    assert not is_fragment_text("")
    assert is_fragment_message(user(fragment_text(2)))
    assert not is_fragment_message({"role": "assistant", "content": fragment_text(2)})
    assert is_fragment_message({"role": "user", "content": "x", "meta": {"segue.fragment": True}})
    # A fragment next to tool results is not a fragment message: found block by block instead.
    assert not is_fragment_message(result(1, {"type": "text", "text": fragment_text(1)}))


def test_replace_layout_drops_the_previous_fragment() -> None:
    it1 = anthropic([user("q"), user(fragment_text(1))])
    it2 = anthropic([user("q"), call(1), result(1), user(fragment_text(2))])
    layout = LayoutMeta(mode="replace", reason="configured", iteration=0)
    explained = explain_run(detail("r", [it1, it2], meta=RunMeta(segue_layout=layout)))
    second = explained.iterations[1]
    assert second.cause == "fragment"
    assert second.divergence is not None and second.divergence.path == "messages[1]"
    assert "layout replace" in second.reason
    assert explained.layout == layout


def test_a_fragment_merged_next_to_tool_results_is_found() -> None:
    frag = {"type": "text", "text": fragment_text(2)}
    it2 = anthropic([user("q"), call(1), result(1, frag)])
    it3 = anthropic([user("q"), call(1), result(1), call(2), result(2, {"type": "text", "text": fragment_text(3)})])
    second = explain_run(detail("r", [it2, it3])).iterations[1]
    assert second.cause == "fragment"
    assert second.divergence is not None and second.divergence.path == "messages[2].content[1]"


def test_append_only_keeps_fragments_and_extends() -> None:
    f2 = {"type": "text", "text": fragment_text(2)}
    it2 = anthropic([user("q"), call(1), result(1, f2)])
    it3 = anthropic([user("q"), call(1), result(1, f2), call(2), result(2, {"type": "text", "text": fragment_text(3)})])
    assert explain_run(detail("r", [it2, it3])).iterations[1].cause == "extends"


# -- wire shapes ----------------------------------------------------------------------------------------------


def test_moving_cache_breakpoints_is_not_a_change() -> None:
    it1 = anthropic([user("q", cache=True)])
    it2 = anthropic([user("q"), call(1), result(1)])
    prefix, previous, divergence = compare_bodies(it1, it2)
    assert divergence is None and prefix == previous


def test_tool_definition_changes_come_before_the_system_prompt() -> None:
    more_tools = [*TOOLS, {"name": "order", "description": "Order.", "input_schema": {"type": "object"}}]
    it1 = anthropic([user("q")])
    it2 = anthropic([user("q"), call(1), result(1)], tools=more_tools, system="Changed too.")
    second = explain_run(detail("r", [it1, it2])).iterations[1]
    assert second.cause == "tools"
    assert second.divergence is not None and second.divergence.path == "tools[1]"
    # A removed tool is named in the previous request.
    _, _, removed = compare_bodies(anthropic([user("q")], tools=more_tools), it1)
    assert removed is not None and removed.path == "tools[1]" and removed.section == "tools"


def test_a_changed_message_names_its_path_and_byte_offset() -> None:
    it1 = anthropic([user("q"), call(1), result(1)])
    it2 = anthropic(
        [
            user("q"),
            call(1),
            {**result(1), "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "changed"}]},
        ]
    )
    second = explain_run(detail("r", [it1, it2])).iterations[1]
    assert second.cause == "messages"
    assert second.divergence is not None
    assert second.divergence.path == "messages[2].content[0].content"
    assert second.reason == "messages changed at messages[2].content[0].content"
    assert second.divergence.previous == "ok" and second.divergence.current == "changed"
    assert second.divergence.byte_offset == second.prefix_bytes < second.previous_bytes  # type: ignore[operator]


def test_openai_responses_bodies() -> None:
    def body(instructions: str, items: list[Any]) -> dict[str, Any]:
        tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
        return {"model": "gpt-x", "instructions": instructions, "tools": tools, "input": items, "prompt_cache_key": "t"}

    q = {"role": "user", "content": [{"type": "input_text", "text": "q"}]}
    fc = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}
    out = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
    run = detail("r", [body("Be brief.", [q]), body("Be brief.", [q, fc, out]), body("Be verbose.", [q, fc, out])])
    causes = [(i.cause, i.divergence.path if i.divergence else None) for i in explain_run(run).iterations]
    assert causes == [("first", None), ("extends", None), ("system", "instructions")]
    edited = detail("r", [body("B", [q, fc, out]), body("B", [q, {**fc, "arguments": '{"x":1}'}, out])])
    last = explain_run(edited).iterations[1]
    assert last.cause == "messages" and last.divergence is not None and last.divergence.path == "input[1].arguments"


def test_chat_completions_bodies() -> None:
    def body(system: str, messages: list[Any]) -> dict[str, Any]:
        return {"model": "llama", "messages": [{"role": "system", "content": system}, *messages]}

    q = {"role": "user", "content": "q"}
    a = {"role": "assistant", "content": "a"}
    run = detail("r", [body("S", [q]), body("S2", [q, a])], vendor="vllm")
    second = explain_run(run).iterations[1]
    assert (
        second.cause == "system" and second.divergence is not None and second.divergence.path == "messages[0].content"
    )
    frag = {"role": "user", "content": fragment_text(1)}
    dropped = explain_run(detail("r", [body("S", [q, frag]), body("S", [q, a, frag])], vendor="vllm"))
    assert dropped.iterations[1].cause == "fragment"


def test_model_and_vendor_changes() -> None:
    it = anthropic([user("q")])
    other_model = {**anthropic([user("q"), call(1), result(1)]), "model": "claude-y"}
    second = explain_run(detail("r", [it, other_model])).iterations[1]
    assert second.cause == "model" and "claude-x → claude-y" in second.reason
    previous = detail("p", [it], vendor="openai")
    first = explain_run(detail("r", [it], continued_from="p"), previous).iterations[0]
    assert first.cause == "vendor" and "openai → anthropic" in first.reason


def test_an_intact_prefix_with_no_cache_read_gets_a_note() -> None:
    cold = Usage(input_tokens=100, output_tokens=1, cache_read_tokens=0, cache_write_tokens=100)
    run = detail("r", [anthropic([user("q")]), anthropic([user("q"), call(1), result(1)])], usage=cold)
    second = explain_run(run).iterations[1]
    assert second.cause == "extends" and second.note is not None and "expired" in second.note
    unknown = Usage(input_tokens=100, output_tokens=1)
    run = detail("r", [anthropic([user("q")]), anthropic([user("q"), call(1), result(1)])], usage=unknown)
    assert "did not report" in (explain_run(run).iterations[1].note or "")


# -- helpers the dashboard uses -------------------------------------------------------------------------------


def test_own_messages_start_skips_replayed_messages_and_fragments(runs: SampleRuns) -> None:
    run, _ = _get(runs.url, runs.second)
    # The first run's four messages were replayed; the second run's own question comes next.
    assert own_messages_start(run) == 4
    run, _ = _get(runs.url, runs.first)
    assert own_messages_start(run) == 0
    fragment_last = detail("r", [anthropic([user("old"), call(1), result(1), user("new"), user(fragment_text(1))])])
    assert own_messages_start(fragment_last) == 3
    assert own_messages_start(detail("r", [])) is None


def test_cache_parts() -> None:
    parts = cache_parts(Usage(input_tokens=100, output_tokens=1, cache_read_tokens=70, cache_write_tokens=20))
    assert (parts.read, parts.write, parts.uncached, parts.read_share) == (70, 20, 10, 0.7)
    unknown = cache_parts(Usage(input_tokens=50, output_tokens=1))
    assert (unknown.read, unknown.uncached, unknown.read_share) == (None, 50, None)
    assert cache_parts(Usage(input_tokens=0, output_tokens=0)).read_share is None
