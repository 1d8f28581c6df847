"""Run INSIDE the OpenAI Agents SDK's own virtual environment (bench/agents.py starts it): the delegation bench.

Configured as the SDK's docs show for agents as tools: each specialist is offered to the coordinator with
`specialist.as_tool(tool_name=..., tool_description=...)` (a fresh run of the specialist per call, given the
task), the coordinator keeps its memory in a `SQLiteSession`, models are `OpenAIResponsesModel` on an
`AsyncOpenAI` client pointed at the twin, with the SDK's default prompt caching. Tracing is disabled (it would
export to OpenAI's servers). The protocol is bench/peers/_peer_protocol.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _peer_protocol import config, serve
from agents import Agent, OpenAIResponsesModel, Runner, SQLiteSession, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

cfg = config()
set_tracing_disabled(True)
client = AsyncOpenAI(base_url=cfg["openai_url"], api_key="bench", max_retries=0)


def exploring(name: str) -> Any:
    def read(customer: str) -> str:
        return str(cfg["facts"][name])

    read.__name__ = name
    read.__doc__ = f"Read the {name.removeprefix('read_').replace('_', ' ')} of a customer."
    return function_tool(read, name_override=name)


sessions: dict[int, SQLiteSession] = {}


async def turn(spec: dict[str, Any]) -> None:
    if spec["vendor"] != "openai":
        raise RuntimeError("the Agents SDK's own models are OpenAI's")
    model = OpenAIResponsesModel(model=spec["model"], openai_client=client)
    tools = []
    for role, names in cfg["specialists"].items():
        specialist = Agent(
            name=role, instructions=cfg["prompts"][role], tools=[exploring(n) for n in names], model=model
        )
        tools.append(specialist.as_tool(tool_name=role, tool_description=f"Ask the {role} specialist."))
    coordinator = Agent(name="coordinator", instructions=spec["prompt"], tools=tools, model=model)
    n = spec["conversation"]
    if n not in sessions:
        sessions[n] = SQLiteSession(f"conversation-{n}", Path(cfg["workdir"]) / "agents.db")
    await Runner.run(coordinator, spec["question"], session=sessions[n], max_turns=8)


serve(turn)
