"""Issue 41, item 6: `segue serve`'s config (schemas/serve.schema.json, in the exported bundle) declares agents as
tools of other agents (`sub_agents`) and a fork tool (`fork`); a `run` of the caller over the protocol runs the
sub-agent as a sub-run and returns it in `children`. A reference to an unknown agent and agents that offer each
other in a cycle are refused when the file is read, naming the place."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from segue.apps.protocol.config import ConfigError, load_config
from segue.generated import get_converter
from segue.generated.protocol import RunResponse
from segue.store import RunStore
from tests._support.protocol_harness import stdio_server, write_config


def scripted(name: str, replies: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "provider": {"kind": "scripted", "model": "scripted-1", "replies": replies},
        "prompt": f"You are {name}.",
        "store": "sqlite:///runs.db",
        **extra,
    }


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def ask(tool: str, task: str) -> dict[str, Any]:
    call = {"type": "tool_call", "id": f"call_{tool}", "name": tool, "arguments": {"task": task}}
    return {"role": "assistant", "content": [call]}


def test_a_declared_sub_agent_runs_as_a_sub_run_over_stdio(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "agents.json",
        [
            scripted("lead", [ask("billing", "refund?"), say("Refund sent.")], sub_agents=[{"agent": "billing"}]),
            scripted("billing", [say("refunded $40")]),
        ],
    )
    with stdio_server(config) as client:
        request = client.request("run", {"agent": "lead", "input": "Refund order 7."})
        response = client.response(request, lambda m: {})
    assert "error" not in response, response
    result = get_converter().structure(response["result"], RunResponse).result
    assert result.answer == "Refund sent."
    [child] = result.children or []
    assert (child.agent_name, child.call_id, child.status) == ("billing", "call_billing", "success")
    store = RunStore(f"sqlite:///{tmp_path / 'runs.db'}")
    detail = store.get_run(child.run_id)
    assert detail is not None and detail.parent_run_id == result.run_id and detail.answer == "refunded $40"


def test_an_unknown_sub_agent_and_a_cycle_are_refused_when_the_file_is_read(tmp_path: Path) -> None:
    path = write_config(tmp_path / "a.json", [scripted("lead", [], sub_agents=[{"agent": "nobody"}])])
    with pytest.raises(ConfigError, match=r"/agents/0/sub_agents/0/agent.*no agent named 'nobody'"):
        load_config(path)
    path = write_config(
        tmp_path / "b.json",
        [scripted("a", [], sub_agents=[{"agent": "b"}]), scripted("b", [], sub_agents=[{"agent": "a"}])],
    )
    with pytest.raises(ConfigError, match=r"cycle \(a -> b -> a\)"):
        load_config(path)
    assert not (tmp_path / "runs.db").exists()  # nothing was opened, let alone written


def test_the_exported_serve_schema_declares_sub_agents_and_forks() -> None:
    from segue.apps.bundle import _GENERATED

    schema = json.loads((_GENERATED / "schemas" / "serve.schema.json").read_text())
    agent = schema["$defs"]["AgentConfig"]["properties"]
    assert agent["sub_agents"]["items"] == {"$ref": "#/$defs/SubAgentConfig"}
    assert agent["fork"] == {"$ref": "#/$defs/ForkConfig", "description": agent["fork"]["description"]}
    assert schema["$defs"]["SubAgentConfig"]["required"] == ["agent"]
