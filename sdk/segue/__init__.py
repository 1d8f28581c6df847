"""segue: typed, replayable, prompt-cache friendly LLM agent runs.

An app keeps the run ids of a conversation and passes them back: `await agent.run(text, runs=run_ids,
replay_last="all")` replays those runs from segue's own traces ahead of the new input. See docs/replay.md.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from segue.agent import Agent, SingleCall
from segue.cache.layout import RuntimeState
from segue.errors import (
    IdempotencyConflictError,
    InputError,
    ProviderError,
    ReplayRunError,
    RunStateError,
    SegueError,
    StoreError,
    ToolSourceError,
)
from segue.generated import (
    ChildRun,
    ClearThinking,
    ClearToolUses,
    Compaction,
    ContextBlock,
    ContextEditing,
    Message,
    ModelSettings,
    ReplaySummary,
    RunDetail,
    RunEvent,
    RunResult,
    RunSummary,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
    VendorCompaction,
)
from segue.guardrails import PIIGuardrail
from segue.run.subrun import fork_tool
from segue.skills import Skill
from segue.store import RunStore
from segue.tool_context import RunContext
from segue.tools import Tool, tool

try:
    __version__ = _version("segue")  # the installed distribution's, as `segue --version` reports it
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Agent",
    "ChildRun",
    "ClearThinking",
    "ClearToolUses",
    "Compaction",
    "ContextBlock",
    "ContextEditing",
    "IdempotencyConflictError",
    "InputError",
    "Message",
    "ModelSettings",
    "PIIGuardrail",
    "ProviderError",
    "ReplayRunError",
    "ReplaySummary",
    "RunContext",
    "RunDetail",
    "RunEvent",
    "RunResult",
    "RunStateError",
    "RunStore",
    "RunSummary",
    "RuntimeState",
    "SegueError",
    "SingleCall",
    "Skill",
    "StoreError",
    "TextBlock",
    "Tool",
    "ToolCallBlock",
    "ToolResultBlock",
    "ToolSourceError",
    "Usage",
    "VendorCompaction",
    "fork_tool",
    "tool",
]
