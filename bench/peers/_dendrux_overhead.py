"""Run INSIDE dendrux's own virtual environment (bench/replay.py starts it): dendrux's overhead per replayed run.

argv: a JSON file with {"runs", "rounds", "calls", "model", "prompt", "db_url"}. dendrux's Anthropic client is
pointed at an in-process vendor (httpx.MockTransport, the same answers bench/replay.py gives segue): per question
`calls` thinking + tool_use turns, then an answer. First `runs` runs are made, each replaying all earlier ones;
then `rounds` more runs each replay all `runs` and are timed. Prints one JSON object: per timed run its wall time
minus the time the mocked vendor took ("overheads", seconds), and the size of its last request body.
"""

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the answers bench/replay.py gives segue too

import anthropic
import httpx
from _anthropic_answers import answer as answer_to
from dendrux import Agent, tool
from dendrux.llm.anthropic import AnthropicProvider

config = json.load(open(sys.argv[1]))
CALLS = config["calls"]


class Vendor:
    def __init__(self) -> None:
        self.n = 0
        self.seconds = 0.0
        self.last_body = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        started = time.perf_counter()
        body = json.loads(request.content)
        self.last_body = len(request.content)
        self.n += 1
        answer = httpx.Response(200, json=answer_to(body, self.n, CALLS, config["model"]))
        self.seconds += time.perf_counter() - started
        return answer


@tool()
def run_query(sql: str) -> list:
    """Run a read-only query."""
    return [{"month": f"{m:02d}", "total": 1000 + m} for m in range(1, 13)]


async def main() -> None:
    vendor = Vendor()
    provider = AnthropicProvider(
        model=config["model"], api_key="bench", thinking=True, thinking_budget=1024, max_tokens=4096, max_retries=0
    )
    provider._client = anthropic.AsyncAnthropic(
        api_key="bench", http_client=httpx.AsyncClient(transport=httpx.MockTransport(vendor)), max_retries=0
    )
    agent = Agent(
        provider=provider,
        prompt=config["prompt"],
        tools=[run_query],
        database_url=config["db_url"],
        max_iterations=CALLS + 1,
    )
    ids: list[str] = []
    for i in range(config["runs"]):
        result = await agent.run(f"What was the revenue per month, take {i}?", runs=ids or None, replay_last="all")
        assert str(result.status).endswith("success"), (result.status, result.error)
        ids.append(result.run_id)
    overheads = []
    for r in range(config["rounds"]):
        vendor.seconds = 0.0
        started = time.perf_counter()
        result = await agent.run(f"And the next month, round {r}?", runs=ids, replay_last="all")
        overheads.append(time.perf_counter() - started - vendor.seconds)
        assert str(result.status).endswith("success"), (result.status, result.error)
    print(json.dumps({"overheads": overheads, "body_bytes": vendor.last_body}))


asyncio.run(main())
