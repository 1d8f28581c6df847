"""segue's own miss prediction beside the vendor's verdict, per miss cause, on the twin, with the agreement rate.

    python bench/diagnostics.py

Each cause is a conversation's second turn (a run that continues the first with `runs=`) with one thing changed,
through the official clients against the twin (which answers cache diagnostics by both vendors' documented rules,
segue_twin.diagnostics). Per cause the table prints segue's prediction (`segue runs explain` of that turn's first
request: its cause, and its stored note where it has one), the vendor's verdict recorded with the call, and whether
they agree (segue.cache.reasons.agreement: `open` when the vendor could not say). The agreement rate is
agree / (agree + disagree).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from segue import Agent, RunStore
from segue.cache.collapse import verdict_text
from segue.cache.explain import explain_run
from segue.demo import shop_db as sample_db
from segue.generated import IterationExplanation, RunDetail
from segue.providers import AnthropicProvider, OpenAIResponsesProvider
from segue_twin import Twin

PROMPT = "You answer questions about the shop database. Keep answers short and exact. " * 150
TOOLS = [sample_db.list_tables, sample_db.describe_table, sample_db.run_query]
CLAUDE, GPT = "claude-sonnet-4-6", "gpt-5.6-sol"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class World:
    """One twin, one store, a clock: what a conversation's turns share."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.twin = Twin(clock=self.clock)
        self.store = RunStore("sqlite:///:memory:")

    def agent(
        self,
        *,
        vendor: str = "anthropic",
        prompt: str = PROMPT,
        tools: list[Any] = TOOLS,
        twin: Twin | None = None,
        **driver: Any,
    ) -> Agent:
        twin = twin or self.twin
        if vendor == "anthropic":
            model = driver.pop("model", CLAUDE)
            provider: Any = AnthropicProvider(model, client=twin.anthropic_client(), **driver)
        else:
            model = driver.pop("model", GPT)
            provider = OpenAIResponsesProvider(model, client=twin.openai_client(), **driver)
        return Agent(provider, prompt, tools, self.store)

    def run(self, run_id: str) -> RunDetail:
        found = self.store.get_run(run_id)
        assert found is not None
        return found


Turn = Callable[[World, str], Awaitable[str]]


async def _second(world: World, first: str, agent: Agent, **kw: Any) -> str:
    return (await agent.run("How many customers are there?", runs=[first], replay_last="all", **kw)).run_id


def _cause(name: str, vendor: str, turn: Turn, first_prompt: str = PROMPT) -> tuple[str, str, Turn, str]:
    return name, vendor, turn, first_prompt


async def _tools_reordered(w: World, first: str) -> str:
    return await _second(w, first, w.agent(tools=list(reversed(TOOLS))))


async def _system_edited(w: World, first: str) -> str:
    return await _second(w, first, w.agent(prompt="Today is Tuesday. " + PROMPT))


async def _model_switched(w: World, first: str) -> str:
    return await _second(w, first, w.agent(model="claude-opus-4-6"))


async def _ttl_expired(w: World, first: str) -> str:
    w.clock.now += 2 * 3600
    return await _second(w, first, w.agent())


async def _below_minimum(w: World, first: str) -> str:
    return await _second(w, first, w.agent(prompt="You help."))


async def _message_edited(w: World, first: str) -> str:
    # A third turn whose window moved: the first run is left out, so the replayed messages change at the start.
    second = await _second(w, first, w.agent())
    return (await w.agent().run("And orders?", runs=[first, second], replay_last=1)).run_id


async def _cache_key_changed(w: World, first: str) -> str:
    return await _second(w, first, w.agent(vendor="openai", cache_key_prefix="another-app"))


async def _effort_changed(w: World, first: str) -> str:
    return await _second(w, first, w.agent(vendor="openai"), model_settings={"reasoning_effort": "high"})


async def _thinking_toggled(w: World, first: str) -> str:
    return await _second(w, first, w.agent(thinking={"type": "adaptive"}))


async def _previous_unknown(w: World, first: str) -> str:
    # Another vendor deployment (a fresh twin) answers: it has no record of the response the request names.
    return await _second(w, first, w.agent(twin=Twin(clock=w.clock)))


async def _openai_tools_changed(w: World, first: str) -> str:
    return await _second(w, first, w.agent(vendor="openai", tools=TOOLS[:2]))


async def _openai_system_edited(w: World, first: str) -> str:
    return await _second(w, first, w.agent(vendor="openai", prompt="Today is Tuesday. " + PROMPT))


CAUSES = [
    _cause("tools reordered", "anthropic", _tools_reordered),
    _cause("system edited", "anthropic", _system_edited),
    _cause("model switched", "anthropic", _model_switched),
    _cause("TTL expired", "anthropic", _ttl_expired),
    _cause("below the minimum", "anthropic", _below_minimum, "You help."),
    _cause("an earlier message edited", "anthropic", _message_edited),
    _cause("cache key changed", "openai", _cache_key_changed),
    _cause("effort changed", "openai", _effort_changed),
    _cause("thinking toggled", "anthropic", _thinking_toggled),
    _cause("a previous response unknown", "anthropic", _previous_unknown),
    _cause("tools changed (OpenAI)", "openai", _openai_tools_changed),
    _cause("system edited (OpenAI)", "openai", _openai_system_edited),
]


def _prediction(it: IterationExplanation) -> str:
    note = f" — {it.note.split(';')[0]}" if it.note else ""
    return f"{it.cause}{note}"


async def measure(causes: list[tuple[str, str, Turn, str]] = CAUSES) -> list[tuple[str, str, str, str]]:
    rows = []
    for name, vendor, turn, first_prompt in causes:
        world = World()
        first = (await world.agent(vendor=vendor, prompt=first_prompt).run("Which tables are there?")).run_id
        later = await turn(world, first)
        run = world.run(later)
        previous = world.run(run.continued_from) if run.continued_from else None
        it = explain_run(run, previous).iterations[0]
        rows.append((name, _prediction(it), verdict_text(it.vendor_verdict), it.agreement or "—"))
    return rows


def _table(rows: list[tuple[str, str, str, str]]) -> str:
    head = ("cause", "segue predicts", "vendor says", "agreement")
    cut = [(a, b if len(b) <= 70 else b[:69] + "…", c, d) for a, b, c, d in rows]
    widths = [max(len(r[i]) for r in [head, *cut]) for i in range(4)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cut]
    return "\n".join(lines)


def main() -> None:
    logging.getLogger("segue").setLevel(logging.ERROR)  # the runs' own warnings (collapses, minimums) are the table's
    rows = asyncio.run(measure())
    print(_table(rows))
    agree = sum(r[3] == "agree" for r in rows)
    disagree = sum(r[3] == "disagree" for r in rows)
    opened = sum(r[3] == "open" for r in rows)
    rate = agree / (agree + disagree) if agree + disagree else 0.0
    print(
        f"\n{len(rows)} causes: {agree} agree, {disagree} disagree, {opened} open (the vendor could not say); "
        f"agreement rate {rate:.0%} of the {agree + disagree} the vendor answered"
    )


if __name__ == "__main__":
    main()
