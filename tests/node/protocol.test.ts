// Drives `segue serve --stdio` from TypeScript, through the exported declarations and the generated client helper
// only: a three-turn replayed conversation with a client-side tool, streamed run/event notifications, and a
// ReplayRunError with its reason. tests/test_protocol_node.py exports the bundle next to this file, compiles it
// with `tsc --strict` and runs it with SEGUE_PYTHON and SEGUE_CONFIG set.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";

import { ErrorCodes, SegueClient, SegueRpcError } from "./bundle/typescript/protocol-client.js";
import type { RequestId, RunEvent, RunResponse, ToolCallParams } from "./bundle/typescript/index";

const python = process.env.SEGUE_PYTHON;
const config = process.env.SEGUE_CONFIG;
if (!python || !config) {
  throw new Error("set SEGUE_PYTHON (a Python with segue installed) and SEGUE_CONFIG (the agents file)");
}
const TABLES = ["customers", "order_items", "orders", "products"];
const UNKNOWN_RUN = "01J9Z3M6Q2W8X4Y7T5R1N0P3K6";

const client = SegueClient.spawn(python, ["-m", "segue.cli", "serve", "--stdio", "--config", config]);

const events = new Map<RequestId, RunEvent[]>();
client.onNotification("run/event", ({ request_id, event }) => {
  events.set(request_id, [...(events.get(request_id) ?? []), event]);
});

const toolCalls: ToolCallParams[] = [];
client.onRequest("tool/call", (params) => {
  toolCalls.push(params);
  if (params.call.name !== "list_tables") {
    throw new SegueRpcError(ErrorCodes.MethodNotFound, `this client runs list_tables only, not ${params.call.name}`);
  }
  return { content: JSON.stringify(TABLES) };
});

function answerOf(response: RunResponse): string {
  assert.equal(response.result.status, "success", JSON.stringify(response));
  assert.ok(response.result.answer !== undefined);
  return response.result.answer;
}

// Turn 1: the twin asks for the table list, which only this client can give.
const first = client.request("run", { agent: "analyst", input: "Which tables are there?" });
const one = await first;
assert.equal(answerOf(one), `The database has 4 tables: ${TABLES.join(", ")}.`);
assert.deepEqual(
  toolCalls.map((c) => [c.call.name, c.request_id, c.run_id]),
  [["list_tables", first.id, one.result.run_id]],
);
const firstEvents = events.get(first.id) ?? [];
assert.equal(firstEvents[0]?.type, "RUN_STARTED");
assert.equal(firstEvents.at(-1)?.type, "RUN_COMPLETED");
const streamed = firstEvents.filter((e) => e.type === "TEXT_DELTA").map((e) => e.text ?? "");
assert.equal(streamed.join(""), one.result.answer);

// Turn 2 replays turn 1: the table list is in context, so the client is not asked again.
const second = client.request("run", {
  agent: "analyst",
  input: "How many customers per country?",
  runs: [one.result.run_id],
  replay_last: "all",
});
const two = await second;
assert.match(answerOf(two), /^Customers per country:/);
assert.deepEqual(two.result.replay?.runs_full, [one.result.run_id]);
assert.equal(toolCalls.length, 1);
const toolsOfTwo = (events.get(second.id) ?? []).filter((e) => e.type === "TOOL_CALL").map((e) => e.tool_call?.name);
assert.deepEqual(toolsOfTwo, ["describe_table", "run_query"]);

// Turn 3 replays both.
const three = await client.request("run", {
  agent: "analyst",
  input: "How many orders are there?",
  runs: [one.result.run_id, two.result.run_id],
  replay_last: "all",
});
assert.equal(answerOf(three), "Orders:\n- orders: 220");
assert.equal(toolCalls.length, 1);

// A run id that does not exist: ReplayRunError, with its reason and run id in error.data.
const refused = client.request("run", { agent: "analyst", input: "And now?", runs: [UNKNOWN_RUN], replay_last: "all" });
try {
  await refused;
  assert.fail("a replay of an unknown run must be refused");
} catch (error) {
  assert.ok(error instanceof SegueRpcError, String(error));
  assert.ok(error.is("ReplayRunError"), `${error.code}: ${error.message}`);
  assert.equal(error.code, ErrorCodes.ReplayRunError);
  assert.equal(error.data.reason, "not_found");
  assert.equal(error.data.run_id, UNKNOWN_RUN);
}
assert.deepEqual(
  (events.get(refused.id) ?? []).map((e) => [e.type, e.meta["error_type"]]),
  [["RUN_ERROR", "ReplayRunError"]],
);

const detail = await client.request("runs/get", { run_id: three.result.run_id });
assert.equal(detail.run.continued_from, two.result.run_id);
assert.deepEqual(detail.run.replay?.runs_full, [one.result.run_id, two.result.run_id]);
const listed = await client.request("runs/list", { agent_name: "analyst" });
assert.deepEqual(
  listed.runs.map((r) => r.run_id),
  [three.result.run_id, two.result.run_id, one.result.run_id],
);

assert.equal(await client.close(), 0);
console.log(
  JSON.stringify({
    runs: [one.result.run_id, two.result.run_id, three.result.run_id],
    events: Object.fromEntries([...events].map(([id, list]) => [String(id), list.length])),
  }),
);

// Never called: tsc --strict must reject each marked line, or the declarations would not be typing anything.
export function typeChecks(c: SegueClient): void {
  // Node's own streams fit the constructor (a server started some other way).
  const child = spawn("segue", ["serve", "--stdio", "--config", "agents.json"]);
  void new SegueClient(child.stdin, child.stdout);
  // @ts-expect-error: no such method
  void c.request("runs/delete", {});
  // @ts-expect-error: input is a string
  void c.request("run", { agent: "analyst", input: 5 });
  // @ts-expect-error: replay_last is a number or "all"
  void c.request("run", { agent: "analyst", input: "x", replay_last: "some" });
  // @ts-expect-error: a tool/call result needs `content`
  c.onRequest("tool/call", () => ({ text: "x" }));
  // @ts-expect-error: RunEventParams has no `foo`
  c.onNotification("run/event", (params) => params.foo);
  c.onNotification("run/event", (params) => {
    // @ts-expect-error: the event type is a closed union
    if (params.event.type === "RUN_DONE") return;
  });
}
