"""The neutral view a vendor request is parsed into, and the `Policy` protocol that plays the model.

Every endpoint (Anthropic Messages, OpenAI Responses, OpenAI Chat Completions) turns its request into one
`ConversationView`; a policy reads it and returns an `AssistantTurn`; the endpoint renders that turn back in
its own wire format (ids, signatures, usage). A policy therefore never sees vendor dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Protocol, runtime_checkable

import attrs


@attrs.frozen(kw_only=True)
class ToolCall:
    """A tool call already in the conversation (emitted by an earlier assistant turn)."""

    id: str
    name: str
    arguments: Mapping[str, Any]


@attrs.frozen(kw_only=True)
class ToolResult:
    """A tool result in the conversation. ``name``/``arguments`` are resolved from the matching call, if any."""

    call_id: str
    content: str
    is_error: bool = False
    name: str | None = None
    arguments: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class Turn:
    """One turn: user text and/or tool results, or assistant text, tool calls and reasoning."""

    role: Literal["user", "assistant"]
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    reasoning: str = ""


@attrs.frozen(kw_only=True)
class ToolSpec:
    """A tool offered in the request: its name, description and the JSON Schema of its arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = attrs.field(factory=dict)


def tool_spec(name: Any, description: Any, parameters: Any) -> ToolSpec:
    """A ToolSpec from a vendor tool definition's fields; a missing description or schema reads as empty."""
    return ToolSpec(
        name=str(name),
        description=description if isinstance(description, str) else "",
        parameters=parameters if isinstance(parameters, Mapping) else {},
    )


@attrs.frozen(kw_only=True)
class ConversationView:
    """What the model sees: the system text, the ordered turns and the tools offered."""

    vendor: str
    model: str
    system: str
    turns: tuple[Turn, ...]
    tool_specs: tuple[ToolSpec, ...]
    reasoning_enabled: bool
    #: The JSON schema the request's structured-output format constrains the answer to (None: free text).
    output_schema: Mapping[str, Any] | None = None

    @property
    def tools(self) -> tuple[str, ...]:
        """The names of the offered tools, in the request's order."""
        return tuple(spec.name for spec in self.tool_specs)

    def last_user_text(self) -> str:
        """The latest user text that is not only tool results: the question being answered."""
        for turn in reversed(self.turns):
            if turn.role == "user" and turn.text.strip():
                return turn.text
        return ""

    def tool_results(self) -> tuple[ToolResult, ...]:
        """Every tool result anywhere in the conversation, oldest first (replayed turns included)."""
        return tuple(result for turn in self.turns for result in turn.tool_results)


@attrs.frozen(kw_only=True)
class PlannedCall:
    """A tool call the policy wants to make; the endpoint assigns its id."""

    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class AssistantTurn:
    """The policy's next assistant turn: optional reasoning, then text and/or tool calls."""

    text: str = ""
    tool_calls: tuple[PlannedCall, ...] = ()
    reasoning: str = ""
    #: What the twin did instead of what a model would have (one line, ASCII): the endpoint sends it in the
    #: TWIN_NOTE_HEADER of its answer and segue records it as a run note of kind twin-note. Empty: nothing to say.
    note: str = ""

    def __attrs_post_init__(self) -> None:
        if not self.text and not self.tool_calls:
            raise ValueError("an AssistantTurn needs text or at least one tool call; both were empty")


@runtime_checkable
class Policy(Protocol):
    """Plays the model: returns the next assistant turn for a conversation.

    Must be deterministic for a given view (tests assert exact bodies) and must not mutate the view.
    """

    def respond(self, view: ConversationView) -> AssistantTurn: ...


@runtime_checkable
class Summarizer(Protocol):
    """A policy that also writes the summary a vendor's server-side compaction makes of a conversation (Anthropic's
    compact_20260112: "Generates a summary of the current conversation"); a policy without it gets the twin's
    generic one (segue_twin.anthropic_context.summary_of), as does one that returns None."""

    def summarize(self, view: ConversationView) -> str | None: ...


class PolicyError(Exception):
    """A policy cannot answer (e.g. a ScriptedPolicy ran out of turns); the message says what to do.

    The twin answers it as a 400 `invalid_request_error` whose message is "twin: " + this message: retrying the
    same request cannot help (so the official clients do not retry it), and segue's advice for a 400 is to do what
    the message says, not to wait for an outage to pass.
    """
