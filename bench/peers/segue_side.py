"""segue as a contender of bench/peers.py: the demo's agent, replayed run by run, reaching the twin over loopback.

Configured as docs/replay.md recommends for a chat: each turn is `agent.run(question, runs=<the conversation's
earlier runs>, replay_last=...)` on one RunStore, with the demo's drivers (Anthropic: the 1,024-token thinking
budget and the scenario's `cache_ttl`; OpenAI Responses: `reasoning={"effort": "low"}`, its default 30m TTL).
A prompt edit or a vendor switch is a new Agent on the same store, as an app would build it. With `prewarm`,
the cache is kept warm through a pause with `agent.prewarm` whenever the pause would outlive the TTL.

Features of later branches are detected, not assumed: `cache_ttl="auto"` (`supports_auto_ttl`) and any knob
of `Agent.run` (`supports_knob`), so the bench runs before and after they merge.
"""

from __future__ import annotations

import asyncio
import inspect
import tempfile
from typing import Any

import anthropic
import openai
from harness import BenchClock, Host, Turn
from pauses import store_stamped_by, written_ttl  # bench/pauses.py: bench/ is the script's directory

from segue import Agent, RunStore
from segue.demo import demo_tools
from segue.errors import InputError
from segue.providers import AnthropicProvider, OpenAIResponsesProvider

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0, "30m": 1800.0}
#: How long before an entry would expire the keep-warm pre-warm is sent.
PREWARM_MARGIN = 30.0
THINKING = {"type": "enabled", "budget_tokens": 1024}


def supports_auto_ttl() -> bool:
    try:
        AnthropicProvider("claude-sonnet-4-6", cache_ttl="auto", client=anthropic.AsyncAnthropic(api_key="probe"))  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return False
    return True


def supports_knob(name: str) -> bool:
    return name in inspect.signature(Agent.run).parameters


class SegueDriver:
    """segue, one bench turn at a time, on its own event loop (the bench's loop is synchronous)."""

    def __init__(
        self, where: Host, *, thinking: bool, ttl: str, knobs: dict[str, Any] | None = None, prewarm: bool = False
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._tmp = tempfile.TemporaryDirectory()
        self.store = RunStore(f"sqlite:///{self._tmp.name}/segue.db")
        self.thinking, self.ttl, self.prewarm = thinking, ttl, prewarm
        self.knobs = {"replay_last": "all", **(knobs or {})}
        self._anthropic = anthropic.AsyncAnthropic(api_key="bench", base_url=where.anthropic_url, max_retries=0)
        self._openai = openai.AsyncOpenAI(api_key="bench", base_url=where.openai_url, max_retries=0)
        self._agents: dict[tuple[str, str, str], Agent] = {}
        self._runs: dict[int, list[str]] = {}
        self._last: Turn | None = None
        self._clock = where.clock
        #: The lifetime the conversation's last run wrote with (under `auto`, what its `ttl-chosen` note says).
        self._written_ttl = ttl
        #: Why segue refused to pre-warm (the variant is then shown as "—" with this reason), or None.
        self.refused: str | None = None

    def _agent(self, t: Turn) -> Agent:
        key = (t.vendor, t.model, t.prompt)
        if key not in self._agents:
            provider: Any
            if t.vendor == "anthropic":
                provider = AnthropicProvider(
                    t.model,
                    cache_ttl=self.ttl if self.ttl != "30m" else "5m",  # type: ignore[arg-type]
                    thinking=THINKING if self.thinking else None,
                    client=self._anthropic,
                )
            else:
                reasoning = {"effort": "low"} if self.thinking else None
                provider = OpenAIResponsesProvider(
                    t.model, cache_key_prefix="segue-bench", reasoning=reasoning, client=self._openai
                )
            self._agents[key] = Agent(
                provider, t.prompt, demo_tools(), self.store, name="shop-analyst", max_iterations=8
            )
        return self._agents[key]

    def turn(self, t: Turn) -> tuple[bool, str | None]:
        self._last = t
        runs = self._runs.setdefault(t.conversation, [])
        try:
            with store_stamped_by(self._clock):
                result = self._loop.run_until_complete(self._agent(t).run(t.question, runs=runs or None, **self.knobs))
        except Exception as error:  # a raised turn is a failed turn of the bench
            return False, f"{type(error).__name__}: {error}"[:300]
        if result.status != "success":
            return False, f"{result.status}: {result.error}"[:300]
        runs.append(result.run_id)
        self._written_ttl = written_ttl(result, self.ttl)
        return True, None

    def between(self, seconds: float, clock: BenchClock, coming: Turn) -> None:
        """Let `seconds` pass; with `prewarm`, re-warm the coming turn's prefix just before each expiry."""
        ttl = TTL_SECONDS.get(self._written_ttl)
        if not self.prewarm or ttl is None or self._last is None or self.refused is not None:
            clock.advance(seconds)
            return
        left = seconds
        while left > ttl - PREWARM_MARGIN:
            clock.advance(ttl - PREWARM_MARGIN)
            left -= ttl - PREWARM_MARGIN
            runs = self._runs.get(coming.conversation) or None
            try:
                with store_stamped_by(self._clock):
                    self._loop.run_until_complete(self._agent(coming).prewarm(runs=runs, **self.knobs))
            except InputError as error:  # segue's own refusal, e.g. thinking cannot be sent with max_tokens 0
                self.refused = f"segue refuses to pre-warm: {str(error).split(': ', 1)[-1]}"[:240]
        clock.advance(left)

    def close(self) -> None:
        self._loop.run_until_complete(self._anthropic.close())
        self._loop.run_until_complete(self._openai.close())
        self.store.close()
        self._loop.close()
        self._tmp.cleanup()
