"""segue.run.toolbox: the one place a run's tools come from (the agent's own and its tool sources', read once per
run), with sources that need no server: the order of the agent's list, unique names, a snapshot reused while a
source lists the very same tools, and the configuration hash of an agent without sources unchanged by them."""

from __future__ import annotations

import attrs
import pytest

from segue import Agent, InputError, tool
from segue._core.hashing import canonical_hash
from segue.generated import get_converter
from segue.run.toolbox import Toolbox
from segue.testing import ScriptedProvider
from segue.tools import Tool, ToolSource


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def echo(text: str) -> str:
    """Say it back."""
    return text


class Listed(ToolSource):
    """A source whose listing the test sets; counts how often it was read."""

    def __init__(self, name: str, tools: list[Tool]) -> None:
        self.name = name
        self.listing = tools
        self.reads = 0

    def __repr__(self) -> str:
        return f"Listed({self.name!r})"

    async def tools(self) -> list[Tool]:
        self.reads += 1
        return list(self.listing)


async def test_a_snapshot_keeps_the_agents_order_and_is_reused_while_nothing_changed() -> None:
    source = Listed("s", [echo])
    box = Toolbox([add, source])
    first = await box.snapshot()
    assert [t.name for t in first.tools] == ["add", "echo"]
    assert await box.snapshot() is first and source.reads == 2  # read every run, hashed once
    source.listing = [attrs.evolve(echo, description="Say it back, louder.")]  # the server edited a tool
    changed = await box.snapshot()
    assert changed is not first
    assert changed.hashes["add"] == first.hashes["add"] and changed.hashes["echo"] != first.hashes["echo"]
    assert changed.hash != first.hash


async def test_a_name_offered_twice_is_refused_naming_both_offers() -> None:
    box = Toolbox([add, Listed("one", [echo]), Listed("two", [echo])])
    with pytest.raises(InputError, match=r"tool 'echo' is offered by Listed\('one'\) and by Listed\('two'\)"):
        await box.snapshot()


def test_an_agent_without_sources_keeps_its_configuration_hash_and_fixed_tools() -> None:
    agent = Agent(ScriptedProvider(replies=[]), "p", [add, echo])
    definitions = [get_converter().unstructure(t.definition) for t in (add, echo)]
    assert agent._config.tools.fingerprint == canonical_hash(definitions)  # as before tool sources existed
    assert [t.name for t in agent._config.tools.fixed.tools] == ["add", "echo"]
    with pytest.raises(InputError, match=r"the agent's tools come from tool sources \(s\): they are read per run"):
        _ = Agent(ScriptedProvider(replies=[]), "p", [add, Listed("s", [echo])])._config.tools.fixed
