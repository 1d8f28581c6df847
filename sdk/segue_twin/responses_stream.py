"""The Responses API's stream: the SSE events of a finished response, in the vendor's order."""

from __future__ import annotations

from typing import Any

from segue_twin._wire import pieces, sse


def stream_events(response: dict[str, Any]) -> list[bytes]:
    """The SSE events of a finished response, in the vendor's order; they assemble to ``response``."""
    events: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append(sse(kind, {"type": kind, "sequence_number": len(events), **fields}))

    opening = {**response, "status": "in_progress", "output": [], "usage": None, "incomplete_details": None}
    emit("response.created", response=opening)
    emit("response.in_progress", response=opening)
    for index, item in enumerate(response["output"]):
        common = {"item_id": item["id"], "output_index": index}
        if item["type"] == "reasoning":
            emit("response.output_item.added", output_index=index, item={**item, "summary": []})
            for s_index, part in enumerate(item["summary"]):
                emit(
                    "response.reasoning_summary_part.added", **common, summary_index=s_index, part={**part, "text": ""}
                )
                for delta in pieces(part["text"]):
                    emit("response.reasoning_summary_text.delta", **common, summary_index=s_index, delta=delta)
                emit("response.reasoning_summary_text.done", **common, summary_index=s_index, text=part["text"])
                emit("response.reasoning_summary_part.done", **common, summary_index=s_index, part=part)
        elif item["type"] == "message":
            emit(
                "response.output_item.added", output_index=index, item={**item, "status": "in_progress", "content": []}
            )
            for c_index, part in enumerate(item["content"]):
                emit("response.content_part.added", **common, content_index=c_index, part={**part, "text": ""})
                for delta in pieces(part["text"]):
                    emit("response.output_text.delta", **common, content_index=c_index, delta=delta, logprobs=[])
                emit("response.output_text.done", **common, content_index=c_index, text=part["text"], logprobs=[])
                emit("response.content_part.done", **common, content_index=c_index, part=part)
        elif item["type"] == "compaction":  # the encrypted item comes whole ("The response stream includes the
            # encrypted compaction item", the compaction guide)
            emit("response.output_item.added", output_index=index, item=item)
        else:
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for delta in pieces(item["arguments"]):
                emit("response.function_call_arguments.delta", **common, delta=delta)
            emit("response.function_call_arguments.done", **common, name=item["name"], arguments=item["arguments"])
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.incomplete" if response["status"] == "incomplete" else "response.completed", response=response)
    return events
