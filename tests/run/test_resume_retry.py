"""retry and resume refuse a run they must not touch (another agent's, another tenant's, not paused, not finished)
before anything changes, in the SDK and over JSON-RPC; a vendor failure on the call a resume makes leaves the run
resumable. Each refusal is checked by reading the run back: row, traces, calls and status unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from segue import Agent, InputError, ProviderError, RunStore, tool
from segue.testing import ScriptedProvider, call, text
from tests._support.helpers import stored_meta
from tests._support.protocol_harness import (
    LIST_TABLES_CLIENT,
    answer_list_tables,
    stdio_server,
    twin_agent,
    write_config,
)


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: the order id
    """
    return f"refunded {order}"


def snapshot(store: RunStore, run_id: str, tenant_id: str = "default") -> Any:
    detail = store.get_run(run_id, tenant_id=tenant_id)
    assert detail is not None
    return detail


async def paused_run(store: RunStore, *replies: Any) -> tuple[Agent, str, ScriptedProvider]:
    provider = ScriptedProvider.of(call("refund", {"order": "A1"}, id="r1"), *replies)
    careful = Agent(provider, "You refund carefully.", [refund], store, name="careful")
    paused = await careful.run("refund A1")
    assert paused.status == "waiting_approval"
    return careful, paused.run_id, provider


async def test_another_agent_cannot_resume_or_retry_a_run(store: RunStore) -> None:
    careful, run_id, _ = await paused_run(store, text("refund done"))
    analyst = Agent(ScriptedProvider.of(), "You analyse.", [], store, name="analyst")
    before = snapshot(store, run_id)

    for action in (analyst.resume(run_id), analyst.retry(run_id)):
        with pytest.raises(InputError) as refused:
            await action
        assert getattr(refused.value, "reason", None) == "agent_mismatch"
        assert getattr(refused.value, "agent", None) == "careful"
        assert "belongs to agent 'careful', not 'analyst'" in str(refused.value)
    assert snapshot(store, run_id) == before, "row, traces, calls and status unchanged"

    done = await careful.resume(run_id)
    assert (done.status, done.answer) == ("success", "refund done")
    with pytest.raises(InputError) as refused:
        await analyst.retry(run_id)
    assert getattr(refused.value, "reason", None) == "agent_mismatch"
    assert len(store.list_runs()) == 1, "no retry run was created"


async def test_other_tenants_runs_and_wrong_states_are_refused_with_a_reason(store: RunStore) -> None:
    careful, run_id, _ = await paused_run(store, text("refund done"))
    before = snapshot(store, run_id)

    async def refused(action: Any) -> str:
        with pytest.raises(InputError) as caught:
            await action
        assert snapshot(store, run_id) == before
        return str(getattr(caught.value, "reason", None))

    assert await refused(careful.resume(run_id, tenant_id="acme")) == "not_found"
    assert await refused(careful.retry(run_id, tenant_id="acme")) == "not_found"
    assert await refused(careful.retry(run_id)) == "not_terminal"
    await careful.resume(run_id)
    finished = snapshot(store, run_id)
    with pytest.raises(InputError, match="not waiting_approval") as caught:
        await careful.resume(run_id)
    assert getattr(caught.value, "reason", None) == "not_paused"
    assert snapshot(store, run_id) == finished


async def test_a_vendor_400_on_the_call_after_a_resume_leaves_the_run_resumable(store: RunStore) -> None:
    bad = ProviderError("anthropic HTTP 400 bad_request error: thinking blocks", vendor="anthropic", kind="bad_request")
    careful, run_id, provider = await paused_run(store, bad, text("refund done"))

    again = await careful.resume(run_id)
    assert again.status == "waiting_approval" and again.error is not None and "HTTP 400" in again.error
    run = snapshot(store, run_id)
    assert run.status == "waiting_approval" and stored_meta(run)["segue.pending"] == {"iteration": 1, "calls": []}
    assert [t.message.role for t in run.traces] == ["user", "assistant", "tool"], "the approved call's result stays"
    assert [c.result for c in run.tool_calls] == ["refunded A1"]

    done = await careful.resume(run_id)
    assert (done.status, done.answer, done.iterations) == ("success", "refund done", 2)
    assert len(snapshot(store, run_id).tool_calls) == 1, "the tool did not run twice"
    assert provider.requests[-1].messages[-1].role == "tool"


def test_resume_and_retry_refusals_over_json_rpc(tmp_path: Path) -> None:
    guarded = {"name": "run_query", "python": "segue.demo.shop_db:run_query", "requires_approval": True}
    tools = [LIST_TABLES_CLIENT, {"name": "describe_table", "python": "segue.demo.shop_db:describe_table"}, guarded]
    careful = twin_agent(tools, name="careful")
    analyst = twin_agent(tools, name="analyst")
    analyst["provider"] = {**analyst["provider"], "thinking": {"type": "enabled", "budget_tokens": 1024}}
    config = write_config(tmp_path / "agents.json", [careful, analyst])
    with stdio_server(config) as client:
        paused = client.call("run", {"agent": "careful", "input": "How many orders?"}, answer_list_tables)["result"]
        run_id = paused["result"]["run_id"]
        assert paused["result"]["status"] == "waiting_approval"
        before = client.call("runs/get", {"run_id": run_id})["result"]

        def refusal(method: str, params: dict[str, Any]) -> dict[str, Any]:
            answer = client.call(method, params)
            assert "error" in answer, answer
            assert answer["error"]["code"] == -32003, answer
            assert client.call("runs/get", {"run_id": run_id})["result"] == before
            data: dict[str, Any] = answer["error"]["data"]
            return data

        assert refusal("resume", {"agent": "analyst", "run_id": run_id}) == {
            "reason": "agent_mismatch",
            "run_id": run_id,
            "agent": "careful",
        }
        assert refusal("retry", {"agent": "analyst", "run_id": run_id})["reason"] == "agent_mismatch"
        assert refusal("resume", {"agent": "careful", "run_id": run_id, "tenant_id": "acme"}) == {
            "reason": "not_found",
            "run_id": run_id,
        }
        assert refusal("retry", {"agent": "careful", "run_id": run_id})["reason"] == "not_terminal"

        done = client.call("resume", {"agent": "careful", "run_id": run_id.lower()})["result"]
        assert done["result"]["status"] == "success", "a lowercase ULID names the same run"
        not_paused = client.call("resume", {"agent": "careful", "run_id": run_id})
        assert not_paused["error"]["data"] == {"reason": "not_paused", "run_id": run_id}
        assert client.call("runs/get", {"run_id": run_id.lower()})["result"]["run"]["run_id"] == run_id
        assert client.close() == 0
