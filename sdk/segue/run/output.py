"""Structured output at the end of a run: is the final answer what `output_type` asked for?

The answer arrives one of two ways, whichever the serving driver used (segue.providers._output): as text, on a
path with the vendor's native JSON-schema output, or as a call to the final-answer tool elsewhere. Either way it
is validated against the schema (jsonschema) and converted to the app's type (cattrs) by segue._core.json_types. An
answer that does not match gets a repair turn (the validation error, naming the JSON path, goes back to the
model: as a user message after text, as the tool's error result after a call); when the repairs are used up the
run ends with status error, the answer kept, and the error naming the path. Nothing here raises on bad output.

A final-answer call is answered with a tool result and followed by the answer as assistant text, so the run's
traces end the way every answered run's do and replay it as sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from segue._core.contracts import FINAL_ANSWER_TOOL
from segue._core.hashing import canonical_json
from segue._core.json_types import OutputSpec
from segue.generated import Message, TextBlock, ToolCallBlock, ToolResultBlock

ACCEPTED = "accepted: this is the final answer"
NOT_RUN = "not run: the final answer ended the turn"


@attrs.frozen(kw_only=True)
class Checked:
    """A final answer checked: its text, its converted value (when it matched) or why not, and the messages the
    run appends after the assistant message that gave it."""

    answer: str
    value: Any
    error: str | None
    messages: list[Message]


def final_call(spec: OutputSpec | None, calls: Sequence[ToolCallBlock]) -> ToolCallBlock | None:
    """The call to the final-answer tool, when the run asked for structured output and the model made one."""
    if spec is None:
        return None
    return next((c for c in calls if c.name == FINAL_ANSWER_TOOL), None)


def check_text(spec: OutputSpec, text: str) -> Checked:
    value, error = spec.read(text)
    return Checked(answer=text, value=value, error=error, messages=[])


def check_call(spec: OutputSpec, final: ToolCallBlock, calls: Sequence[ToolCallBlock]) -> Checked:
    """The final-answer call's arguments checked; every call of the message gets its result (the others are not
    run: the answer ends the turn)."""
    value, error = spec.check(dict(final.arguments))
    answer = canonical_json(dict(final.arguments))
    results = [
        ToolResultBlock(tool_call_id=c.id, content=NOT_RUN, is_error=True)
        if c is not final
        else ToolResultBlock(
            tool_call_id=c.id,
            content=ACCEPTED if error is None else repair_text(error),
            is_error=None if error is None else True,
        )
        for c in calls
    ]
    messages = [Message(role="tool", content=list(results))]
    if error is None:
        messages.append(Message(role="assistant", content=[TextBlock(text=answer)]))
    return Checked(answer=answer, value=value, error=error, messages=messages)


def repair_text(error: str) -> str:
    # The loop does not know which mechanism the driver used (a Failover's members may differ), so the text
    # names both: a model offered the final-answer tool that answered in text is pointed back to it.
    return (
        f"The answer does not match the required JSON Schema: {error}. Answer again with only JSON that matches "
        f"the schema (if you were offered the {FINAL_ANSWER_TOOL} tool, call it with that JSON as its arguments)."
    )


def repair_message(error: str) -> Message:
    """The user turn asking a text answer to be given again."""
    return Message(role="user", content=[TextBlock(text=repair_text(error))])


def failure(spec: OutputSpec, error: str, repairs: int) -> str:
    return (
        f"the final answer does not match output_type {spec.format.name!r} {error}, after {repairs} repair "
        "turn(s); raise output_repairs, simplify the schema, or use a model whose catalog row says "
        "llm.structured_output 'native'"
    )
