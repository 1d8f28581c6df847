"""Run INSIDE PydanticAI's own virtual environment (bench/agents.py starts it): the delegation bench's turns.

Configured as PydanticAI's multi-agent docs show for agent delegation: the coordinator's tools each call a
specialist agent, `await specialist.run(task, usage=ctx.usage)`, and return its output; the coordinator keeps the
conversation as `message_history` (`result.all_messages()` of the previous turn); prompt caching is the unified
`cache=True` setting. The specialists get the task only (the delegation pattern passes no history to them).
The protocol is bench/peers/_peer_protocol.py's; the config adds "prompts", "specialists" and "facts".
"""

from __future__ import annotations

from typing import Any

from _peer_protocol import config, serve
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

cfg = config()


def model_for(vendor: str, name: str) -> Any:
    if vendor == "anthropic":
        return AnthropicModel(name, provider=AnthropicProvider(api_key="bench", base_url=cfg["anthropic_url"]))
    return OpenAIResponsesModel(name, provider=OpenAIProvider(base_url=cfg["openai_url"], api_key="bench"))


def exploring(name: str) -> Tool[None]:
    def read(customer: str) -> str:
        return str(cfg["facts"][name])

    read.__name__ = name
    read.__doc__ = f"Read the {name.removeprefix('read_').replace('_', ' ')} of a customer."
    return Tool(read, name=name)


histories: dict[int, list[ModelMessage]] = {}


async def turn(spec: dict[str, Any]) -> None:
    settings: Any = {"cache": True}
    model = model_for(spec["vendor"], spec["model"])
    specialists = {
        role: Agent(
            model, instructions=cfg["prompts"][role], tools=[exploring(n) for n in names], model_settings=settings
        )
        for role, names in cfg["specialists"].items()
    }

    def delegate(role: str) -> Tool[None]:
        async def ask(ctx: RunContext[None], task: str) -> str:
            result = await specialists[role].run(task, usage=ctx.usage)
            return str(result.output)

        ask.__name__ = role
        ask.__doc__ = f"Ask the {role} specialist."
        return Tool(ask, name=role)

    coordinator = Agent(
        model,
        instructions=spec["prompt"],
        tools=[delegate(role) for role in specialists],
        model_settings=settings,
    )
    history = histories.get(spec["conversation"], [])
    result = await coordinator.run(spec["question"], message_history=history or None)
    histories[spec["conversation"]] = result.all_messages()


serve(turn)
