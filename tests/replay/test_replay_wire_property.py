"""Hypothesis: over random conversations where each turn picks who serves (a runtime vendor or model, a Failover
that fails over for the whole turn or in its middle), edits the system prompt, changes the tools and picks a
trailing-state layout, replay keeps reasoning exactly where the wire allows it.

For every turn and every replayed run, computed here from the stored requests alone (independently of segue's
planner): the run's reasoning is kept iff its recorded descriptor is true (it names the path that served the run
and hashes exactly what preceded the run's user message in the run's own first request) and equals what precedes
it in this turn's requests (same serving path, prompt, tools, seed), and the run's own messages before its
reasoning reach the wire as the model first saw them. Every other run with reasoning has exactly one warning, with
the cause that names the first difference.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segue import Agent, RunStore
from segue._core.contracts import ProviderRequest
from segue.cache.layout import RuntimeState, is_fragment
from segue.errors import ProviderError
from segue.generated import LlmInteraction, Message
from segue.providers import Failover
from segue.testing import ScriptedProvider
from tests._support.helpers import LookupPolicy, lookup, stored_meta

PATHS = {"va": ("m1", "m2"), "vb": ("m3",)}  # vendor -> models the turn may run on
PROMPTS = ("You look things up.", "You look things up, and cite the lookup.")
DROP_CAUSES = {"model", "system", "tools", "seed", "cross-vendor", "follows", "layout"}


def extra(x: str) -> str:
    """Another tool.

    Args:
        x: anything
    """
    return x


class Member:
    """One Failover member: a scripted model that reads past fragments and fails while `down`."""

    def __init__(self, vendor: str) -> None:
        self.policy = LookupPolicy(vendor=vendor)
        self.down = False
        self.up_for: int | None = None
        self.provider = ScriptedProvider(replies=[self] * 10_000, vendor=vendor, model=PATHS[vendor][0])

    def __call__(self, request: ProviderRequest) -> Message:
        if self.up_for is not None:
            self.down, self.up_for = self.up_for <= 0, self.up_for - 1
        if self.down:
            raise ProviderError("overloaded", vendor=self.provider.vendor, kind="server")
        return self.policy(attrs.evolve(request, messages=[m for m in request.messages if not is_fragment(m)]))


turns = st.lists(
    st.fixed_dictionaries(
        {
            # Mostly the same path, prompt and tools, so runs keep reasoning often enough to test the seed.
            "target": st.sampled_from([("va", None)] * 4 + [("va", "m2"), ("vb", None)]),
            "prompt": st.sampled_from([0, 0, 0, 1]),
            "tools": st.sampled_from([0, 0, 0, 1]),
            "layout": st.sampled_from([None, None, "auto", "appendOnly", "replace"]),
            "failover": st.sampled_from(["none"] * 5 + ["down", "mid"]),
        }
    ),
    min_size=2,
    max_size=5,
)


def wire(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def digest(messages: list[dict[str, Any]]) -> str:
    encoded = json.dumps(wire(messages), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(encoded.encode()).hexdigest()


def has_reasoning(message: dict[str, Any]) -> bool:
    return any(b["type"] == "reasoning" for b in message["content"])


def position(messages: list[dict[str, Any]], question: str) -> int:
    """Where a run's user message is in a request (every question is unique)."""
    return next(i for i, m in enumerate(messages) if m["role"] == "user" and m["content"][0].get("text") == question)


@attrs.frozen
class Produced:
    """What the test knows about a finished run from its own first request and its config."""

    question: str
    path: tuple[str, str]
    paths: frozenset[tuple[str, str]]  # every path that served one of its iterations
    prompt: int
    tools: int
    seed: str
    before_reasoning: list[dict[str, Any]]  # its user message and what followed it up to its reasoning


def produced(calls: list[LlmInteraction], run_id: str, first_input: str, config: dict[str, Any]) -> Produced:
    request = calls[0].provider_request["messages"]
    start = position(request, first_input)
    return Produced(
        question=first_input,
        path=(calls[0].vendor, calls[0].model),
        paths=frozenset((c.vendor, c.model) for c in calls),
        prompt=config["prompt"],
        tools=config["tools"],
        seed=digest(request[:start]),
        before_reasoning=wire(request[start:]),
    )


def expected(
    request: dict[str, Any], served: tuple[str, str], config: dict[str, Any], runs: list[str], made: dict[str, Produced]
) -> dict[str, str | None]:
    """Run id -> the cause its reasoning cannot go on this request (None: it can), by the rule in the docstring."""
    verdicts: dict[str, str | None] = {}
    messages = request["messages"]
    for run_id in runs:
        p = made[run_id]
        start = position(messages, p.question)
        reasoning_at = next(i for i in range(start, len(messages)) if messages[i]["role"] == "assistant")
        others = p.paths - {p.path}
        if served[0] != p.path[0]:
            cause: str | None = "cross-vendor"
        elif others:
            cause = "cross-vendor" if any(v != served[0] for v, _ in others) else "model"
        elif served[1] != p.path[1]:
            cause = "model"
        elif config["prompt"] != p.prompt:
            cause = "system"
        elif config["tools"] != p.tools:
            cause = "tools"
        elif digest(messages[:start]) != p.seed:
            cause = "follows" if any(v is not None for v in verdicts.values()) else "seed"
        elif wire(messages[start:reasoning_at]) != p.before_reasoning:
            cause = "layout"
        else:
            cause = None
        verdicts[run_id] = cause
    return verdicts


def state_line(state: RuntimeState) -> str:
    return f"iteration {state.iteration}"


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(turns)
def test_reasoning_is_kept_exactly_where_the_descriptor_matches_the_wire(plan: list[dict[str, Any]]) -> None:
    import asyncio

    asyncio.run(_converse(plan))


async def _converse(plan: list[dict[str, Any]]) -> None:
    store = RunStore("sqlite:///:memory:")
    va, vb = Member("va"), Member("vb")
    chain = Failover([va.provider, vb.provider])
    ids: list[str] = []
    made: dict[str, Produced] = {}
    try:
        for n, config in enumerate(plan):
            vendor, model = config["target"]
            first, other = (va, vb) if vendor == "va" else (vb, va)
            first.down, first.up_for, other.down, other.up_for = config["failover"] == "down", None, False, None
            if config["failover"] == "mid":
                first.up_for = 1
            tools = [lookup, extra] if config["tools"] else [lookup]
            layout = (
                {"trailing_state": state_line, "trailing_state_layout": config["layout"]} if config["layout"] else {}
            )
            agent = Agent(chain, PROMPTS[config["prompt"]], tools, store, **layout)
            question = f"question {n}"
            result = await agent.run(question, runs=ids or None, replay_last="all", model=model, vendor=vendor)
            assert result.status == "success", result
            detail = store.get_run(result.run_id)
            assert detail is not None and detail.prefix is not None
            calls = detail.llm_interactions
            mine = produced(calls, result.run_id, question, config)
            # The descriptor is true: who served the run's first iteration, and what preceded its user message.
            assert (detail.prefix.vendor, detail.prefix.model) == mine.path
            also = {(p["vendor"], p["model"]) for p in stored_meta(detail)["segue.prefix"].get("also_served", [])}
            assert also == mine.paths - {mine.path}
            assert detail.prefix.seed == mine.seed
            if ids:
                summary = result.replay
                assert summary is not None
                first_request = calls[0].provider_request
                first_verdicts = expected(first_request, (calls[0].vendor, calls[0].model), config, ids, made)
                # What the first request carried: the reasoning of exactly the runs it allows.
                sent = first_request["messages"]
                starts = [position(sent, made[r].question) for r in ids] + [position(sent, question)]
                on_wire = {
                    r
                    for r, a, b in zip(ids, starts, starts[1:], strict=False)
                    if any(has_reasoning(m) for m in sent[a:b])
                }
                assert on_wire == {r for r in ids if first_verdicts[r] is None}
                verdicts = first_verdicts
                if len(mine.paths) > 1:  # a later path keeps none of what the first path kept (one path per run)
                    verdicts = {r: c or _path_cause(made[r].path, calls[-1]) for r, c in first_verdicts.items()}
                kept = [r for r in ids if verdicts[r] is None]
                assert summary.reasoning_kept == kept, (verdicts, summary)
                for run_id in ids:
                    mine_warnings = [w.cause for w in summary.warnings if w.run_id == run_id and w.cause in DROP_CAUSES]
                    assert mine_warnings == ([] if verdicts[run_id] is None else [verdicts[run_id]]), (run_id, summary)
            ids.append(result.run_id)
            made[result.run_id] = mine
    finally:
        store.close()


def _path_cause(path: tuple[str, str], later: LlmInteraction) -> str:
    return "cross-vendor" if later.vendor != path[0] else "model"
