"""Test helpers for the web endpoints of `segue serve --http` (`/ag-ui/{agent}`, `/ai-sdk/{agent}`): the config
of a twin analyst and a broken agent, a streaming POST, the server-sent events' data, and AG-UI's run input."""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path
from typing import Any

from ag_ui.core import RunAgentInput, UserMessage

from tests._support.protocol_harness import twin_agent
from tests._support.protocol_http import DESCRIBE, RUN_QUERY

LIST_TABLES = {"name": "list_tables", "python": "segue.demo.shop_db:list_tables"}
#: Above the model's 1,024-token cache minimum, so the second turn reads the first turn's prefix from the cache.
PROMPT = "You answer questions about the shop database. " + " ".join(
    f"Rule {i}: name the table you read, quote the numbers exactly, and say when a question has no answer."
    for i in range(120)
)


def web_config(tmp_path: Path, max_concurrent_runs: int | None = None, **http: Any) -> Path:
    analyst = {**twin_agent([LIST_TABLES, DESCRIBE, RUN_QUERY]), "prompt": PROMPT}
    # A vendor endpoint on a loopback port nothing listens on: every run of this agent fails (connection refused).
    broken = {**twin_agent([]), "name": "broken"}
    broken["provider"] = {
        "kind": "anthropic",
        "model": "claude-sonnet-4-6",
        "base_url": f"http://127.0.0.1:{free_port()}",
    }
    path = tmp_path / "agents.json"
    config: dict[str, Any] = {"agents": [analyst, broken], **({"http": http} if http else {})}
    if max_concurrent_runs is not None:
        config["max_concurrent_runs"] = max_concurrent_runs
    path.write_text(json.dumps(config))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post_stream(
    address: tuple[str, int], path: str, body: Any, token: str | None = None
) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection(*address, timeout=60)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request("POST", path, body if isinstance(body, bytes) else json.dumps(body).encode(), headers)
    answer = conn.getresponse()
    text = answer.read().decode()
    conn.close()
    return answer.status, {k.lower(): v for k, v in answer.getheaders()}, text


def sse_data(text: str) -> list[Any]:
    """The data of each server-sent event (JSON, or the AI SDK's literal [DONE])."""
    out = []
    for block in text.split("\n\n"):
        data = [line[len("data: ") :] for line in block.split("\n") if line.startswith("data: ")]
        if data:
            out.append(data[0] if data[0] == "[DONE]" else json.loads("\n".join(data)))
    return out


def ag_ui_input(thread: str, run: str, question: str, **props: Any) -> dict[str, Any]:
    """A RunAgentInput built and serialised by the protocol's own model, as a client sends it."""
    model = RunAgentInput(
        thread_id=thread,
        run_id=run,
        state={},
        messages=[UserMessage(id=f"{run}-user", role="user", content=question)],
        tools=[],
        context=[],
        forwarded_props=props,
    )
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
