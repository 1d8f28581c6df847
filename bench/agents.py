"""Agents that call agents, side by side on the twin (issue 41's acceptance bench).

A 5-turn conversation: each turn a coordinator delegates to two specialists (billing, shipping) and answers from
what they say. A specialist that does not know its facts yet explores first (two tool calls, ~2,000 tokens of
results each); what it learned is in its answer, with a marker the twin's model looks for. Contenders, each on a
fresh twin (fresh caches) behind a loopback server, Anthropic's wire (Claude Sonnet 4.6) and OpenAI's Responses wire
(gpt-5-mini) with their default prompt caching:

- segue, as tools: `Agent.as_tool()` specialists (they remember: each replays its earlier runs in the
  conversation), the coordinator `runs=` its earlier runs;
- segue, forks: the coordinator forks itself twice per turn (`segue.fork_tool`), the forks starting from its
  cached prefix; the exploration tools are the coordinator's own;
- PydanticAI 2.68.0: delegation through a tool (`await specialist.run(task, usage=ctx.usage)` inside the
  coordinator's tool, as its docs show), the coordinator's `message_history` kept per conversation,
  `cache=True`;
- OpenAI Agents SDK 0.24.0 (OpenAI only): `specialist.as_tool(...)` on a coordinator with a `SQLiteSession`.

Each peer runs in its own virtual environment (bench/peers/_peer_venv.py); one that cannot be installed is
reported as skipped. Every response is priced by one ledger (bench/peers/ledger.py: the usage the twin put on the
wire, segue's catalog prices, the twin's figures are emulated). Printed per contender: cost, cached share of the
prompt, exploration calls on turns 2-5 (re-explored), and segue's cost over the best peer's.

    python bench/agents.py            # both wires
    python bench/agents.py --vendor anthropic
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

import anthropic
import openai
from _peer_venv import peer_python
from harness import BenchClock, Host, PeerProcess
from ledger import Call

from segue import Agent, RunStore, fork_tool, tool
from segue.catalog import Catalog
from segue.providers import AnthropicProvider, OpenAIResponsesProvider
from segue_twin import Twin
from segue_twin.server import serve
from segue_twin.view import AssistantTurn, ConversationView, PlannedCall

MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-5-mini"}
QUESTIONS = [
    "Customer 41 says order 7 was charged twice and has not arrived. What happened?",
    "Can we refund the second charge today?",
    "And when will the parcel arrive?",
    "Should we offer a voucher for the delay?",
    "Summarise what we will tell the customer.",
]
#: Rules long enough for every prompt to pass the vendors' minimum cacheable prompt.
RULES = " ".join(f"Rule {i}: be exact, cite the record you used, and keep the customer's words." for i in range(110))
COORDINATOR = "COORDINATOR. You run the support desk and delegate to the specialists. " + RULES
BILLING = "BILLING SPECIALIST. You answer billing questions from the ledger. " + RULES
SHIPPING = "SHIPPING SPECIALIST. You answer shipping questions from the carrier records. " + RULES
#: What each specialist learns by exploring (marker, the two exploration tools, the facts they return).
SPECIALISTS = {
    "billing": ("LEDGER-FACTS", ("read_ledger", "read_refund_policy")),
    "shipping": ("ROUTE-FACTS", ("read_routes", "read_carrier_log")),
}
EXPLORATION = {name for _, tools in SPECIALISTS.values() for name in tools}


def facts(name: str) -> str:
    """~2,000 tokens of records, the same every time."""
    return f"{name}: " + "; ".join(f"record {i} of {name}: amount {i * 7 % 97}.{i % 100:02d}, ok" for i in range(180))


def _exploring_tool(tool_name: str) -> Any:
    def fn(customer: str) -> str:
        return facts(tool_name)

    fn.__name__ = tool_name
    fn.__doc__ = f"Read the {tool_name.removeprefix('read_').replace('_', ' ')} of a customer."
    return tool(fn)


def _exploring_tools() -> list[Any]:
    return [_exploring_tool(name) for name in sorted(EXPLORATION)]


class Desk:
    """The twin's model for every contender: a coordinator that delegates (to specialist tools, or to forks of
    itself), specialists that explore unless their facts are already in the conversation they see."""

    def respond(self, view: ConversationView) -> AssistantTurn:
        last = view.turns[-1]
        task = last.text if last.role == "user" and not last.tool_results else ""
        seen = " ".join([*(r.content for r in view.tool_results()), *(t.text for t in view.turns)])
        role = self._role(view, task)
        if role in SPECIALISTS:
            marker, (first, second) = SPECIALISTS[role]
            done = {r.name for r in last.tool_results} if last.role == "user" else set()
            if marker not in seen and not done:
                return AssistantTurn(tool_calls=(PlannedCall(name=first, arguments={"customer": "41"}),))
            if marker not in seen and done == {first}:
                return AssistantTurn(tool_calls=(PlannedCall(name=second, arguments={"customer": "41"}),))
            return AssistantTurn(text=f"{role}: answered from {marker} (customer 41, order 7).")
        if task:  # the coordinator, a new question: both specialists at once
            if "delegate" in view.tools:
                calls = tuple(PlannedCall(name="delegate", arguments={"task": f"SUB {r}: {task}"}) for r in SPECIALISTS)
            else:
                calls = tuple(PlannedCall(name=r, arguments={self._input(view, r): task}) for r in SPECIALISTS)
            return AssistantTurn(tool_calls=calls)
        answers = " / ".join(r.content[:120] for r in last.tool_results)
        return AssistantTurn(text=f"Desk answer: {answers}")

    @staticmethod
    def _input(view: ConversationView, tool_name: str) -> str:
        """The argument a delegation tool takes the task in: segue's `task`, the Agents SDK's `input`, ..."""
        for spec in view.tool_specs:
            if spec.name == tool_name:
                required = spec.parameters.get("required") or list(spec.parameters.get("properties") or {})
                return str(required[0]) if required else "task"
        return "task"

    @staticmethod
    def _role(view: ConversationView, task: str) -> str:
        # Some SDKs put a preface of their own before the app's system prompt: look for the role anywhere in it.
        for role, marker in (("billing", "BILLING SPECIALIST"), ("shipping", "SHIPPING SPECIALIST")):
            if marker in view.system:
                return role
        # A fork of the coordinator works on the sub-task its latest user text names ("SUB billing: ...").
        for turn in reversed(view.turns):
            if turn.role == "user" and turn.text.strip():
                found = re.search(r"SUB (\w+):", turn.text)
                return found.group(1) if found else "coordinator"
        return "coordinator"


# -- segue --------------------------------------------------------------------------------------------------


class SegueDesk:
    def __init__(self, where: Host, vendor: str, *, forks: bool) -> None:
        self._loop = asyncio.new_event_loop()
        self._tmp = tempfile.TemporaryDirectory()
        store = RunStore(f"sqlite:///{self._tmp.name}/segue.db")
        if vendor == "anthropic":
            client: Any = anthropic.AsyncAnthropic(api_key="bench", base_url=where.anthropic_url, max_retries=0)
            make: Callable[[], Any] = lambda: AnthropicProvider(MODELS[vendor], client=client)  # noqa: E731
        else:
            client = openai.AsyncOpenAI(api_key="bench", base_url=where.openai_url, max_retries=0)
            make = lambda: OpenAIResponsesProvider(MODELS[vendor], client=client)  # noqa: E731
        explore = {t.name: t for t in _exploring_tools()}
        if forks:
            tools: list[Any] = [*explore.values(), fork_tool(name="delegate")]
        else:
            billing = Agent(make(), BILLING, [explore[n] for n in SPECIALISTS["billing"][1]], store, name="billing")
            shipping = Agent(make(), SHIPPING, [explore[n] for n in SPECIALISTS["shipping"][1]], store, name="shipping")
            tools = [
                billing.as_tool(description="Ask the billing specialist."),
                shipping.as_tool(description="Ask the shipping specialist."),
            ]
        self.coordinator = Agent(make(), COORDINATOR, tools, store, name="coordinator")
        self.runs: list[str] = []

    def turn(self, question: str) -> tuple[bool, str | None]:
        result = self._loop.run_until_complete(self.coordinator.run(question, runs=self.runs or None))
        self.runs.append(result.run_id)
        return result.status == "success", result.error

    def close(self) -> None:
        self._loop.close()
        self._tmp.cleanup()


# -- the bench ----------------------------------------------------------------------------------------------


class Result:
    def __init__(self, name: str, turns: list[list[Call]], errors: list[str]) -> None:
        self.name, self.turns, self.errors = name, turns, errors
        calls = [c for t in turns for c in t]
        costs = [c.cost for c in calls]
        self.cost = None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)
        read = sum((c.usage.cache_read_tokens or 0) for c in calls if c.usage is not None)
        prompt = sum(c.usage.input_tokens for c in calls if c.usage is not None)
        self.cached = read / prompt if prompt else 0.0
        self.prompt = prompt
        self.requests = len(calls)
        self.explored = [sum(1 for c in t for name, _ in c.tool_calls if name in EXPLORATION) for t in turns]


def run_contender(name: str, make: Callable[[Host], Any], catalog: Catalog) -> Result:
    clock = BenchClock()
    with serve("127.0.0.1", 0, twin=Twin(clock=clock, policy=Desk(), history=1_000_000)) as server:
        where = Host(server, clock, catalog)
        driver = make(where)
        turns: list[list[Call]] = []
        errors: list[str] = []
        try:
            for question in QUESTIONS:
                clock.advance(30.0)  # a reader's pause, well inside every cache lifetime
                mark = where.seen()
                ok, error = driver.turn(question)
                if not ok:
                    errors.append(error or "failed")
                turns.append(where.calls_since(mark))
        finally:
            driver.close()
    return Result(name, turns, errors)


class PeerDesk:
    """A peer's delegation script in its own virtual environment (bench/peers/_<peer>_delegation.py)."""

    def __init__(self, python: Path, script: str, where: Host, vendor: str) -> None:
        settings = {
            "prompts": {"coordinator": COORDINATOR, "billing": BILLING, "shipping": SHIPPING},
            "specialists": {k: list(v[1]) for k, v in SPECIALISTS.items()},
            "facts": {name: facts(name) for name in EXPLORATION},
            "thinking": False,
            "ttl": "5m",
        }
        self.vendor = vendor
        self.process = PeerProcess(python, script, settings, where)

    def turn(self, question: str) -> tuple[bool, str | None]:
        from harness import Turn

        spec = Turn(question=question, vendor=self.vendor, model=MODELS[self.vendor], prompt=COORDINATOR)
        return self.process.turn(spec)

    def close(self) -> None:
        self.process.close()


def contenders(vendor: str) -> list[tuple[str, Callable[[Host], Any] | str]]:
    out: list[tuple[str, Callable[[Host], Any] | str]] = [
        ("segue (as tools)", lambda where: SegueDesk(where, vendor, forks=False)),
        ("segue (forks)", lambda where: SegueDesk(where, vendor, forks=True)),
    ]
    pydantic = peer_python("pydantic-ai-slim", "2.68.0", "anthropic,openai", "pydantic_ai")
    if pydantic is None:
        out.append(("PydanticAI (tool delegation)", "could not be installed"))
    else:
        out.append(
            (
                "PydanticAI (tool delegation)",
                lambda where: PeerDesk(pydantic, "_pydantic_delegation.py", where, vendor),
            )
        )
    if vendor == "openai":
        agents = peer_python("openai-agents", "0.24.0", None, "agents")
        if agents is None:
            out.append(("Agents SDK (as_tool)", "could not be installed"))
        else:
            out.append(("Agents SDK (as_tool)", lambda where: PeerDesk(agents, "_agents_delegation.py", where, vendor)))
    else:
        out.append(("Agents SDK (as_tool)", "Anthropic only through its LiteLLM extension: not run on this wire"))
    return out


def report(vendor: str, results: Sequence[Result], skipped: Sequence[tuple[str, str]]) -> None:
    print(f"\n{vendor} ({MODELS[vendor]}), 5 turns, 2 specialists per turn")
    print(f"{'contender':32} {'cost $':>10} {'cached':>7} {'prompt tok':>11} {'requests':>9}  explored per turn")
    for r in results:
        cost = f"{r.cost:.4f}" if r.cost is not None else "—"
        errors = f"  ERRORS: {r.errors[0][:80]}" if r.errors else ""
        print(
            f"{r.name:32} {cost:>10} {r.cached:>6.0%} {r.prompt:>11,} {r.requests:>9}  "
            f"{' '.join(str(n) for n in r.explored)}{errors}"
        )
    for name, why in skipped:
        print(f"{name:32} skipped: {why}")
    peers = [r for r in results if not r.name.startswith("segue") and r.cost is not None and not r.errors]
    if not peers:
        print("no peer ran: no ratio")
        return
    best = min(peers, key=lambda r: r.cost or 0.0)
    for r in results:
        if r.name.startswith("segue") and r.cost is not None and best.cost:
            again = sum(r.explored[1:])
            verdict = "meets" if r.cost / best.cost <= 0.7 and again == 0 else "MISSES"
            print(
                f"{r.name}: {r.cost / best.cost:.2f}x the best peer ({best.name}); re-explored on turns 2-5: "
                f"{again} ({verdict} the target: <= 0.7x, none re-explored)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vendor", choices=sorted(MODELS), action="append")
    args = parser.parse_args()
    catalog = Catalog.load()
    for vendor in args.vendor or sorted(MODELS):
        results, skipped = [], []
        for name, make in contenders(vendor):
            if isinstance(make, str):
                skipped.append((name, make))
                continue
            results.append(run_contender(name, make, catalog))
        report(vendor, results, skipped)


if __name__ == "__main__":
    main()
