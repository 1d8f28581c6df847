"""The tools one run offers: read once at its plan step and frozen for the run, like the layout decision.

An agent's tools are its own `@tool`s and the tools its ToolSources (MCP servers) list. The Toolbox is the one
place that turns them into a run's ToolSet: a source is read once per run, before anything of the run is written
(a source that cannot list its tools raises segue.errors.ToolSourceError there, naming itself), and the
definitions, their hashes and the tools hash the replay prefix rule compares are computed from that snapshot. A
server that lists the same tools therefore gives the same hashes run after run; one that changed gives the replay
`tools` / `tool-missing` / `tool-changed` warnings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import attrs

from segue._core.hashing import canonical_hash
from segue.errors import InputError
from segue.generated import ToolDefinition, get_converter
from segue.tools import Tool, ToolSource


@attrs.frozen(kw_only=True)
class ToolSet:
    """What a run offers: the tools in wire order, by name, their definitions and hashes."""

    tools: tuple[Tool, ...]
    by_name: Mapping[str, Tool]
    definitions: list[ToolDefinition]
    #: {tool name: hash of its definition}: what replay compares to warn of a changed or missing tool.
    hashes: Mapping[str, str]
    #: The hash of every definition in order: one component of the prefix descriptor.
    hash: str

    @classmethod
    def of(cls, tools: Sequence[Tool]) -> ToolSet:
        conv = get_converter()
        definitions = [t.definition for t in tools]
        plain = [conv.unstructure(d) for d in definitions]
        return cls(
            tools=tuple(tools),
            by_name={t.name: t for t in tools},
            definitions=definitions,
            hashes={d.name: canonical_hash(p) for d, p in zip(definitions, plain, strict=True)},
            hash=canonical_hash(plain),
        )


class Toolbox:
    """An agent's tools and tool sources, in the order the agent was given them; gives each run its ToolSet."""

    def __init__(self, items: Sequence[Tool | ToolSource]) -> None:
        self.items = tuple(items)
        self.sources = tuple(i for i in items if isinstance(i, ToolSource))
        own = ToolSet.of([i for i in items if isinstance(i, Tool)])
        #: Without sources the tools never change: one ToolSet for every run.
        self._fixed = own if not self.sources else None
        #: What the agent's configuration hash covers of its tools: the own tools' hash, and each source by name
        #: (a source's tools are read per run; the replay prefix rule compares those).
        self.fingerprint: str | list[str] = (
            own.hash if not self.sources else [own.hash, *(s.name for s in self.sources)]
        )
        #: The last snapshot and the tools it was made of: sources that listed the very same tools again (nothing
        #: changed) give the same ToolSet without hashing every definition again.
        self._last: tuple[list[list[Tool]], ToolSet] | None = None

    @property
    def fixed(self) -> ToolSet:
        """The ToolSet of an agent without tool sources (no I/O)."""
        if self._fixed is None:
            names = ", ".join(s.name for s in self.sources)
            raise InputError(f"the agent's tools come from tool sources ({names}): they are read per run")
        return self._fixed

    async def snapshot(self) -> ToolSet:
        """The run's tools: each source's at its place in the list (the sources are read concurrently)."""
        if self._fixed is not None:
            return self._fixed
        listed = list(await asyncio.gather(*(s.tools() for s in self.sources)))
        if self._last is not None and _same(self._last[0], listed):
            return self._last[1]
        by_source = dict(zip(map(id, self.sources), listed, strict=True))
        tools: list[Tool] = []
        owner: dict[str, str] = {}
        for item in self.items:
            found = by_source[id(item)] if isinstance(item, ToolSource) else [item]
            where = repr(item) if isinstance(item, ToolSource) else "the agent's own tools"
            for t in found:
                if t.name in owner:
                    raise InputError(
                        f"tool {t.name!r} is offered by {owner[t.name]} and by {where}; tool names must be unique "
                        "(an MCP server takes prefix= to rename its tools)"
                    )
                owner[t.name] = where
                tools.append(t)
        toolset = ToolSet.of(tools)
        self._last = (listed, toolset)
        return toolset

    async def aclose(self) -> None:
        """Stop what the sources hold (MCP server processes and sessions); they start again lazily."""
        for source in self.sources:
            await source.aclose()


def _same(before: list[list[Tool]], now: list[list[Tool]]) -> bool:
    return len(before) == len(now) and all(
        len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True)) for a, b in zip(before, now, strict=True)
    )
