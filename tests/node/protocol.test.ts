// Drives `segue serve` from TypeScript, through the exported declarations and the generated clients only, once
// over stdio (SegueClient) and once over HTTP (SegueHttpClient): initialize, discover the agents and their tools,
// a replayed three-turn conversation with a client-side tool, explain the last run, shutdown with runs in flight
// (one finishes within the timeout, one is cancelled; each one's final status is reported), exit.
// tests/test_protocol_node.py exports the bundle next to this file, compiles it with `tsc --strict` and runs it with
// SEGUE_PYTHON and SEGUE_CONFIG set; it prints a summary line the Python side checks against the run store.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";

import {
  ErrorCodes,
  PROTOCOL_VERSION,
  SegueClient,
  SegueHttpClient,
  SegueRpcError,
  type SegueClientNotifications,
  type SegueErrorName,
  type SegueMethods,
  type SegueNotifications,
  type SegueRequest,
} from "./bundle/typescript/protocol-client.js";
import type { RequestId, RunEvent, RunResponse, ToolCallParams } from "./bundle/typescript/index";

const python = process.env.SEGUE_PYTHON;
const baseConfig = process.env.SEGUE_CONFIG;
if (!python || !baseConfig) {
  throw new Error("set SEGUE_PYTHON (a Python with segue installed) and SEGUE_CONFIG (the agents file)");
}
const TABLES = ["customers", "order_items", "orders", "products"];
const UNKNOWN_RUN = "01J9Z3M6Q2W8X4Y7T5R1N0P3K6";
/** The ids of the client-side tool calls this client ran (stdio: tool/call requests; HTTP: paused runs). */
const clientToolRuns: string[] = [];

/** What both clients offer: the methods of the bundle, typed. */
interface Connection {
  request<M extends keyof SegueMethods>(
    method: M,
    params: SegueMethods[M]["params"],
  ): SegueRequest<SegueMethods[M]["result"]>;
  notify<N extends keyof SegueClientNotifications>(method: N, params: SegueClientNotifications[N]): unknown;
  onNotification<N extends keyof SegueNotifications>(
    method: N,
    handler: (params: SegueNotifications[N]) => void,
  ): () => void;
}

// -- a tool server the "slow" agent calls back: it answers a run's call only when the test says so --------------

const held = new Map<string, ServerResponse>(); // run id -> the callback waiting for its answer
const arrivals: Array<() => void> = [];
const tools = createServer((request, response) => {
  let body = "";
  request.on("data", (chunk: Buffer) => (body += chunk.toString()));
  request.on("end", () => {
    const call = JSON.parse(body) as { name: string; run_id: string };
    assert.equal(call.name, "list_tables");
    held.set(call.run_id, response);
    arrivals.splice(0).forEach((wake) => wake());
  });
});
await new Promise<void>((resolve) => tools.listen(0, "127.0.0.1", resolve));
const toolUrl = `http://127.0.0.1:${(tools.address() as AddressInfo).port}/tools/list_tables`;

async function heldCalls(count: number): Promise<void> {
  while (held.size < count) {
    await new Promise<void>((resolve) => arrivals.push(resolve));
  }
}

function release(runId: string): void {
  const response = held.get(runId);
  assert.ok(response, `no callback held for run ${runId}`);
  response.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(TABLES));
}

// The agents file: the one the Python side wrote, plus an agent whose list_tables is the tool server above.
const agents = JSON.parse(readFileSync(baseConfig, "utf8")) as { agents: Array<Record<string, unknown>> };
const analyst = agents.agents[0];
assert.ok(analyst);
agents.agents.push({
  ...analyst,
  name: "slow",
  tools: [
    {
      name: "list_tables",
      description: "List the tables of the shop database.",
      parameters: { type: "object", properties: {}, additionalProperties: false },
      url: toolUrl,
    },
  ],
});
const config = join(dirname(baseConfig), "agents-node.json");
writeFileSync(config, JSON.stringify(agents, null, 2));

// -- helpers ------------------------------------------------------------------------------------------------------

async function rejects(request: Promise<unknown>, name: SegueErrorName): Promise<SegueRpcError> {
  try {
    await request;
  } catch (error) {
    assert.ok(error instanceof SegueRpcError, String(error));
    assert.ok(error.is(name), `expected ${name}, got ${error.code}: ${error.message}`);
    assert.equal(error.code, ErrorCodes[name]);
    return error;
  }
  assert.fail(`expected ${name}, the request succeeded`);
}

/** The value `probe` returns once it returns one (events may arrive just after the response that caused them). */
async function eventually<T>(probe: () => T | undefined): Promise<T> {
  for (let waited = 0; waited < 10_000; waited += 10) {
    const found = probe();
    if (found !== undefined) {
      return found;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.fail("waited 10 s in vain");
}

function answerOf(response: RunResponse): string {
  assert.equal(response.result.status, "success", JSON.stringify(response));
  assert.ok(response.result.answer !== undefined);
  return response.result.answer;
}

// -- the scenario, on either transport ----------------------------------------------------------------------------

interface Summary {
  conversation: string[];
  finished: string;
  cancelled: string;
  events: number;
}

async function scenario(client: Connection, transport: "stdio" | "http"): Promise<Summary> {
  const events = new Map<RequestId, RunEvent[]>();
  client.onNotification("run/event", ({ request_id, event }) => {
    events.set(request_id, [...(events.get(request_id) ?? []), event]);
  });

  // Before initialize, the session speaks protocol 1.0: newer methods say so.
  await rejects(client.request("agents/list", {}), "ServerNotInitialized");
  const init = await client.request("initialize", {
    protocol_version: PROTOCOL_VERSION,
    client_info: { name: "segue-node-test", version: "1" },
    capabilities: { client_tools: true },
  });
  assert.equal(init.protocol_version, PROTOCOL_VERSION);
  assert.equal(init.server_info.name, "segue");
  const capabilities = init.capabilities;
  assert.equal(capabilities.transport, transport);
  assert.equal(capabilities.tool_calls, transport === "stdio" ? "request" : "resume");
  assert.ok(capabilities.methods.includes("agents/get") && capabilities.methods.includes("runs/explain"));
  assert.ok(capabilities.limits.max_message_bytes > 0);
  assert.deepEqual(capabilities.features, ["prewarm", "structured-output"]);
  assert.equal(capabilities.limits.http !== undefined, transport === "http");
  await client.notify("initialized", {});
  await rejects(client.request("initialize", { protocol_version: PROTOCOL_VERSION }), "InvalidRequest");

  // Discovery: the agents, their tools and where those run.
  const listed = await client.request("agents/list", {});
  assert.deepEqual(
    listed.agents.map((a) => [a.name, a.provider.kind, a.provider.model]),
    [
      ["analyst", "twin-anthropic", "claude-sonnet-4-6"],
      ["slow", "twin-anthropic", "claude-sonnet-4-6"],
    ],
  );
  const { agent } = await client.request("agents/get", { agent: "analyst" });
  const byName = new Map(agent.tools.map((t) => [t.name, t]));
  assert.deepEqual(
    agent.tools.map((t) => [t.name, t.kind, t.client_tool]),
    [
      ["list_tables", "client", true],
      ["describe_table", "python", false],
      ["run_query", "python", false],
    ],
  );
  assert.deepEqual(byName.get("run_query")?.parameters["required"], ["sql"]);
  assert.equal(agent.catalog?.label, "claude-sonnet-4-6@anthropic");
  assert.equal(agent.layout.configured, "auto");

  // A replayed three-turn conversation; list_tables runs in this client.
  const ranBefore = clientToolRuns.length;
  async function turn(input: string, runs: string[]): Promise<RunResponse> {
    const request = client.request("run", { agent: "analyst", input, runs, replay_last: "all" });
    let response = await request;
    while (response.result.status === "waiting_approval") {
      // HTTP: the server cannot call the client, so the run pauses; run the tool here and resume.
      const pending = response.pending ?? [];
      assert.ok(pending.length > 0 && pending.every((p) => p.client_tool && p.call.name === "list_tables"));
      clientToolRuns.push(...pending.map((p) => p.call.id));
      response = await client.request("resume", {
        agent: "analyst",
        run_id: response.result.run_id,
        tool_results: pending.map((p) => ({ call_id: p.call.id, content: JSON.stringify(TABLES) })),
      });
    }
    return response;
  }
  const one = await turn("Which tables are there?", []);
  assert.equal(answerOf(one), `The database has 4 tables: ${TABLES.join(", ")}.`);
  const two = await turn("How many customers per country?", [one.result.run_id]);
  assert.match(answerOf(two), /^Customers per country:/);
  assert.deepEqual(two.result.replay?.runs_full, [one.result.run_id]);
  // Warm the cache for the third turn while the user types: the prefix that turn sends before its question.
  const conversation = [one.result.run_id, two.result.run_id];
  const warm = await client.request("prewarm", { agent: "analyst", runs: conversation, replay_last: "all" });
  assert.deepEqual(
    [warm.result.vendor, warm.result.model, warm.result.runs],
    ["anthropic", "claude-sonnet-4-6", conversation],
  );
  assert.equal(warm.result.usage.output_tokens, 0);
  await rejects(client.request("prewarm", { agent: "analyst", runs: [UNKNOWN_RUN] }), "ReplayRunError");
  const three = await turn("How many orders are there?", conversation);
  assert.equal(answerOf(three), "Orders:\n- orders: 220");
  // list_tables ran once, in this client: turns 2 and 3 replay its result.
  assert.equal(clientToolRuns.length - ranBefore, 1);

  // Explain the last run: each request against the one before it.
  const explained = await client.request("runs/explain", { run_id: three.result.run_id });
  assert.equal(explained.explanation.run_id, three.result.run_id);
  assert.equal(explained.explanation.continued_from, two.result.run_id);
  assert.equal(explained.explanation.iterations[0]?.previous_run_id, two.result.run_id);
  assert.ok(Array.isArray(explained.breaks));
  await rejects(client.request("runs/explain", { run_id: UNKNOWN_RUN }), "RunNotFound");

  // Shutdown with two runs in flight: one gets its tool result during the drain, the other never does.
  held.clear();
  const finishing = client.request("run", { agent: "slow", input: "Which tables are there?" });
  const stuck = client.request("run", { agent: "slow", input: "Which tables are there?" });
  const stuckRefused = rejects(stuck, "RequestCancelled"); // handled from the start: it rejects during the drain
  await heldCalls(2);
  const eventOf = (request: { id: number }, type: RunEvent["type"]): Promise<RunEvent> =>
    eventually(() => (events.get(request.id) ?? []).find((e) => e.type === type));
  const finishingRun = (await eventOf(finishing, "RUN_STARTED")).run_id;
  const stuckRun = (await eventOf(stuck, "RUN_STARTED")).run_id;
  const stopping = client.request("shutdown", { timeout_seconds: 2 });
  // Once shutdown is accepted, new work is refused: only then may the first run continue.
  for (;;) {
    try {
      await client.request("runs/list", {});
    } catch (error) {
      assert.ok(error instanceof SegueRpcError && error.is("InvalidRequest"), String(error));
      break;
    }
  }
  await rejects(client.request("run", { agent: "analyst", input: "One more?" }), "InvalidRequest");
  release(finishingRun);
  const report = await stopping;
  assert.equal(answerOf(await finishing), `The database has 4 tables: ${TABLES.join(", ")}.`);
  await stuckRefused;
  // Over HTTP a runs/list probe may have been in flight as shutdown arrived: it finished too.
  const probes = report.requests.filter((r) => r.method !== "run");
  assert.ok(probes.every((r) => r.method === "runs/list" && r.outcome === "finished"), JSON.stringify(probes));
  // Listed in the order they arrived; over HTTP two requests sent at once may arrive either way round.
  const runs = report.requests.filter((r) => r.method === "run").sort((a, b) => Number(a.id) - Number(b.id));
  assert.deepEqual(runs, [
    { id: finishing.id, method: "run", agent: "slow", run_id: finishingRun, outcome: "finished", status: "success" },
    { id: stuck.id, method: "run", agent: "slow", run_id: stuckRun, outcome: "cancelled", status: "cancelled" },
  ]);
  assert.equal((await eventOf(stuck, "RUN_ERROR")).result?.status, "cancelled");
  assert.equal((events.get(stuck.id) ?? []).at(-1)?.type, "RUN_ERROR", "the run's one terminal event comes last");
  await rejects(client.request("shutdown", {}), "InvalidRequest");

  return {
    conversation: [one.result.run_id, two.result.run_id, three.result.run_id],
    finished: finishingRun,
    cancelled: stuckRun,
    events: [...events.values()].reduce((n, list) => n + list.length, 0),
  };
}

// -- stdio --------------------------------------------------------------------------------------------------------

const stdio = SegueClient.spawn(python, ["-m", "segue.apps.cli.main", "serve", "--stdio", "--config", config]);
stdio.onRequest("tool/call", (params: ToolCallParams) => {
  clientToolRuns.push(params.call.id);
  if (params.call.name !== "list_tables") {
    throw new SegueRpcError(ErrorCodes.MethodNotFound, `this client runs list_tables only, not ${params.call.name}`);
  }
  return { content: JSON.stringify(TABLES) };
});
const overStdio = await scenario(stdio, "stdio");
stdio.notify("exit", {});
assert.equal(await stdio.close(), 0, "exit after shutdown: exit code 0");

// -- HTTP ---------------------------------------------------------------------------------------------------------

const server = spawn(python, ["-m", "segue.apps.cli.main", "serve", "--http", "--port", "0", "--config", config], {
  stdio: ["ignore", "inherit", "pipe"],
});
const address = await new Promise<string>((resolve, reject) => {
  let seen = "";
  server.stderr.on("data", (chunk: Buffer) => {
    seen += chunk.toString();
    const found = /(http:\/\/[\d.]+:\d+)\/rpc/.exec(seen);
    if (found?.[1]) {
      resolve(found[1]);
    }
  });
  server.once("exit", (code) => reject(new Error(`segue serve --http exited (${code}): ${seen}`)));
});
const http = new SegueHttpClient(address);
await http.listen();
const overHttp = await scenario(http, "http");
await http.notify("exit", {});
// exit freed the session: the same name starts afresh, uninitialized.
await rejects(http.request("agents/list", {}), "ServerNotInitialized");
await http.close();
const exited = new Promise<number | null>((resolve) => server.once("exit", resolve));
server.kill("SIGTERM");
assert.equal(await exited, 0);
tools.close();

console.log(JSON.stringify({ stdio: overStdio, http: overHttp }));

// Never called: tsc --strict must reject each marked line, or the declarations would not be typing anything.
export function typeChecks(c: SegueClient, h: SegueHttpClient): void {
  // Node's own streams fit the constructor (a server started some other way).
  const child = spawn("segue", ["serve", "--stdio", "--config", "agents.json"]);
  void new SegueClient(child.stdin, child.stdout);
  // @ts-expect-error: no such method
  void c.request("runs/delete", {});
  // @ts-expect-error: input is a string
  void c.request("run", { agent: "analyst", input: 5 });
  // @ts-expect-error: replay_last is a number or "all"
  void c.request("run", { agent: "analyst", input: "x", replay_last: "some" });
  // @ts-expect-error: protocol_version is required
  void h.request("initialize", {});
  // @ts-expect-error: agents/get names the agent
  void h.request("agents/get", { name: "analyst" });
  // @ts-expect-error: a tool/call result needs `content`
  c.onRequest("tool/call", () => ({ text: "x" }));
  // @ts-expect-error: RunEventParams has no `foo`
  c.onNotification("run/event", (params) => params.foo);
  // @ts-expect-error: the HTTP client answers no server requests
  h.onRequest("tool/call", () => ({ content: "x" }));
  c.onNotification("run/event", (params) => {
    // @ts-expect-error: the event type is a closed union
    if (params.event.type === "RUN_DONE") return;
  });
}
