"""The scenarios of bench/peers.py (issue 28): who plays each, on which model, thinking and TTL.

Every scenario is a list of `Turn`s (question, vendor, model, system prompt, conversation, pause before it) plus
the settings all contenders share: thinking on or off, the cache TTL and, for the long chat, the number of
recent turns each contender keeps in full (`window`).
"""

from __future__ import annotations

import attrs
from harness import Turn

from segue.demo import PROMPT, QUESTIONS, long_chat

SONNET = "claude-sonnet-4-6"
GPT56 = "gpt-5.6-sol"
#: One line added to the system prompt from turn 3 of the prompt-edit scenario.
EDIT = "- When a question names a year, say which year the data covers in the first line of the answer.\n"
#: Minutes the twin's clock moves before turns 2..5 of the pauses scenario (issue 28: 3, 12, 2 and 20).
PAUSES_MIN = (3, 12, 2, 20)
#: Turns of the long chat, and the recent turns every contender keeps in full.
LONG_TURNS = 40
WINDOW = 8


@attrs.frozen(kw_only=True)
class Scenario:
    name: str
    title: str
    turns: tuple[Turn, ...]
    thinking: bool = True
    ttl: str = "1h"
    window: int | None = None
    #: Fixed TTLs each peer is run on; the cheapest is shown (the pauses scenario: the peer's best fixed TTL).
    peer_ttls: tuple[str, ...] = ()

    @property
    def vendors(self) -> set[str]:
        return {t.vendor for t in self.turns}


def policy(tokens: int = 4000) -> str:
    """A refund and data-handling policy of about `tokens` tokens (the twin counts ~4 characters a token), added to
    the prompt of the GPT-5.6 second-conversation scenario, as a support deployment carries one."""
    lines = ["", "## Policy (applies to every answer)"]
    k = 0
    while sum(len(x) + 1 for x in lines) < tokens * 4:
        k += 1
        lines.append(
            f"{k}. Rule {k}: for orders in cohort {k % 17} placed in quarter {k % 4 + 1}, report revenue net of "
            f"refunds, round to cents, and mention when fewer than {k % 9 + 3} orders support a figure."
        )
    return "\n".join(lines) + "\n"


def _chat(vendor: str = "anthropic", model: str = SONNET, prompt: str = PROMPT) -> tuple[Turn, ...]:
    return tuple(Turn(question=q, vendor=vendor, model=model, prompt=prompt) for q in QUESTIONS)


def all_scenarios(long_turns: int = LONG_TURNS) -> list[Scenario]:
    edited = PROMPT + EDIT
    switch = ("anthropic", "anthropic", "openai", "anthropic", "anthropic")
    long_prompt = PROMPT + policy()
    pauses = (0, *PAUSES_MIN)
    long = tuple(Turn(question=q, vendor="anthropic", model=SONNET, prompt=PROMPT) for q in long_chat(long_turns))
    return [
        Scenario(name="chat-1h", title=f"5 turns, {SONNET}, thinking on, 1h", turns=_chat()),
        Scenario(name="chat-5m", title=f"5 turns, {SONNET}, thinking on, 5m", turns=_chat(), ttl="5m"),
        Scenario(
            name="plain-5m", title=f"5 turns, {SONNET}, thinking off, 5m", turns=_chat(), thinking=False, ttl="5m"
        ),
        Scenario(
            name="plain-1h", title=f"5 turns, {SONNET}, thinking off, 1h", turns=_chat(), thinking=False, ttl="1h"
        ),
        Scenario(
            name="prompt-edit",
            title="thinking on, 1h, one line added to the system prompt at turn 3",
            turns=tuple(attrs.evolve(t, prompt=edited) if i >= 2 else t for i, t in enumerate(_chat())),
        ),
        Scenario(
            name="vendor-switch",
            title=f"thinking on, {SONNET} -> {GPT56} (turn 3, Responses) -> {SONNET}",
            turns=tuple(
                attrs.evolve(t, vendor=v, model=SONNET if v == "anthropic" else GPT56)
                for t, v in zip(_chat(), switch, strict=True)
            ),
        ),
        Scenario(
            name="gpt56", title=f"5 turns, {GPT56}, Responses, reasoning low", turns=_chat("openai", GPT56), ttl="30m"
        ),
        Scenario(
            name="second-conversation",
            title=f"{GPT56}, ~4k-token policy in the prompt, two conversations of one customer",
            turns=_chat("openai", GPT56, long_prompt)
            + tuple(attrs.evolve(t, conversation=2) for t in _chat("openai", GPT56, long_prompt)),
            ttl="30m",
        ),
        Scenario(
            name="pauses",
            title=f"5 turns, thinking on, pauses of {', '.join(map(str, PAUSES_MIN))} minutes between turns",
            turns=tuple(attrs.evolve(t, pause=60.0 * p) for t, p in zip(_chat(), pauses, strict=True)),
            ttl="5m",
            peer_ttls=("5m", "1h"),
        ),
        Scenario(
            name="pauses-plain",
            title="the same pauses, thinking off (segue pre-warms only without thinking)",
            turns=tuple(attrs.evolve(t, pause=60.0 * p) for t, p in zip(_chat(), pauses, strict=True)),
            thinking=False,
            ttl="5m",
            peer_ttls=("5m", "1h"),
        ),
        Scenario(
            name="long",
            title=f"{long_turns} turns (segue.demo.long_chat), thinking on, 5m, each keeps the last {WINDOW} in full",
            turns=long,
            ttl="5m",
            window=WINDOW,
        ),
        Scenario(
            name="long-plain",
            title=f"{long_turns} turns (segue.demo.long_chat), thinking off, 5m, each keeps the last {WINDOW} in full",
            turns=long,
            thinking=False,
            ttl="5m",
            window=WINDOW,
        ),
    ]
