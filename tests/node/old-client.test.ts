// The protocol 1.0 client (tests/node/fixtures/protocol-1.0, generated before initialize existed, never
// regenerated) against the current server: it never sends initialize, so the server serves it protocol 1.0, and
// every method that client knows works as it did, with the error codes it knows. tests/test_protocol_node.py
// compiles it with `tsc --strict` and runs it with SEGUE_PYTHON and SEGUE_CONFIG set.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

import { ErrorCodes, SegueClient, SegueRpcError } from "./fixtures/protocol-1.0/protocol-client.js";
import type { RequestId, RunResponse } from "./fixtures/protocol-1.0/protocol.js";
import type { RunEvent } from "./fixtures/protocol-1.0/runs.js";

const python = process.env.SEGUE_PYTHON;
const baseConfig = process.env.SEGUE_CONFIG;
if (!python || !baseConfig) {
  throw new Error("set SEGUE_PYTHON (a Python with segue installed) and SEGUE_CONFIG (the agents file)");
}
const TABLES = ["customers", "order_items", "orders", "products"];

// The agents file plus "careful": the same agent, but describe_table needs approval (for resume).
const agents = JSON.parse(readFileSync(baseConfig, "utf8")) as { agents: Array<Record<string, unknown>> };
const analyst = agents.agents[0];
assert.ok(analyst && Array.isArray(analyst["tools"]));
const careful = (analyst["tools"] as Array<Record<string, unknown>>).map((t) =>
  t["name"] === "describe_table" ? { ...t, requires_approval: true } : t,
);
agents.agents.push({ ...analyst, name: "careful", tools: careful });
const config = join(dirname(baseConfig), "agents-old-client.json");
writeFileSync(config, JSON.stringify(agents, null, 2));

const client = SegueClient.spawn(python, ["-m", "segue.apps.cli.main", "serve", "--stdio", "--config", config]);
const events = new Map<RequestId, RunEvent[]>();
client.onNotification("run/event", ({ request_id, event }) => {
  events.set(request_id, [...(events.get(request_id) ?? []), event]);
});
let holdTools = false; // while true, tool/call waits until the server cancels it
const aborted: string[] = [];
client.onRequest("tool/call", async (params, { signal }) => {
  if (holdTools) {
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
    aborted.push(params.call.id);
  }
  return { content: JSON.stringify(TABLES) };
});

type Expected = "IdempotencyConflict" | "ReplayRunError" | "RequestCancelled";

async function refused(request: Promise<unknown>, name: Expected): Promise<SegueRpcError> {
  try {
    await request;
  } catch (error) {
    assert.ok(error instanceof SegueRpcError, String(error));
    assert.ok(error.is(name), `expected ${name}, got ${error.code}: ${error.message}`);
    assert.equal(error.code, ErrorCodes[name]);
    return error;
  }
  assert.fail(`expected ${name}`);
}

function succeeded(response: RunResponse): RunResponse {
  assert.equal(response.result.status, "success", JSON.stringify(response));
  return response;
}

// run, with run/event notifications and a tool/call answered by this client.
const first = client.request("run", { agent: "analyst", input: "Which tables are there?", idempotency_key: "k1" });
const one = succeeded(await first);
assert.equal(one.result.answer, `The database has 4 tables: ${TABLES.join(", ")}.`);
assert.deepEqual(
  [(events.get(first.id) ?? [])[0]?.type, (events.get(first.id) ?? []).at(-1)?.type],
  ["RUN_STARTED", "RUN_COMPLETED"],
);

// A replayed turn, and the 1.0 errors by the codes this client knows: IdempotencyConflict is -32002 here.
const two = succeeded(
  await client.request("run", {
    agent: "analyst",
    input: "How many orders are there?",
    runs: [one.result.run_id],
    replay_last: "all",
  }),
);
const conflict = await refused(
  client.request("run", { agent: "analyst", input: "Other", idempotency_key: "k1" }),
  "IdempotencyConflict",
);
assert.equal(conflict.code, -32002);
assert.ok(conflict.is("IdempotencyConflict") && conflict.data.idempotency_key === "k1");
const replay = await refused(
  client.request("run", { agent: "analyst", input: "?", runs: ["01J9Z3M6Q2W8X4Y7T5R1N0P3K6"], replay_last: "all" }),
  "ReplayRunError",
);
assert.ok(replay.is("ReplayRunError") && replay.data.reason === "not_found");

// retry: the finished run again, as a new run.
const retried = succeeded(await client.request("retry", { agent: "analyst", run_id: two.result.run_id }));
assert.notEqual(retried.result.run_id, two.result.run_id);

// resume: a run paused for approval, approved.
const paused = await client.request("run", { agent: "careful", input: "How many orders are there?" });
assert.equal(paused.result.status, "waiting_approval");
assert.deepEqual(paused.pending?.map((p) => [p.call.name, p.client_tool]), [["describe_table", false]]);
const resumed = succeeded(
  await client.request("resume", { agent: "careful", run_id: paused.result.run_id, approved: true }),
);
assert.equal(resumed.result.answer, "Orders:\n- orders: 220");

// runs/list and runs/get.
const detail = await client.request("runs/get", { run_id: two.result.run_id });
assert.equal(detail.run.continued_from, one.result.run_id);
const listed = await client.request("runs/list", { agent_name: "analyst" });
assert.deepEqual(
  listed.runs.map((r) => r.run_id),
  [retried.result.run_id, two.result.run_id, one.result.run_id],
);

// catalog/explain.
const explained = await client.request("catalog/explain", { model: "claude-sonnet-4-6", vendor: "anthropic" });
assert.equal(explained.label, "claude-sonnet-4-6@anthropic");
assert.ok(explained.keys.some((k) => k.path.join(".") === "llm.cache_kind"));

// $/cancelRequest: the run waits on a tool this client holds; cancelling it cancels the tool/call too.
holdTools = true;
const slow = client.request("run", { agent: "analyst", input: "Which tables are there?" });
while (!(events.get(slow.id) ?? []).some((e) => e.type === "TOOL_CALL")) {
  await new Promise((resolve) => setTimeout(resolve, 10));
}
slow.cancel();
await refused(slow, "RequestCancelled");
assert.equal((events.get(slow.id) ?? []).at(-1)?.result?.status, "cancelled");

assert.equal(await client.close(), 0);
assert.equal(aborted.length, 1, "the server cancelled its tool/call, and the handler's signal fired");
console.log(JSON.stringify({ runs: listed.runs.length, cancelled: slow.id }));
