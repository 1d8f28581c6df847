// @ag-ui/client's HttpAgent against `segue serve --http` (tests/apps/protocol/test_web.py starts the server and reads the last
// line this prints): two turns of one thread with tool calls, then a run that fails, as the protocol's RUN_ERROR.
import { HttpAgent } from "@ag-ui/client";
import assert from "node:assert/strict";

const url = process.argv[2];
const agent = new HttpAgent({ url, threadId: "node-thread" });
const runs = [];
const tools = [];
let cachedShare = null;

for (const [i, question] of ["How many orders?", "How many customers?"].entries()) {
  agent.addMessage({ id: `user-${i}`, role: "user", content: question });
  let finished = null;
  await agent.runAgent(
    { runId: `node-run-${i}` },
    {
      onToolCallStartEvent: ({ event }) => void (i === 0 && tools.push(event.toolCallName)),
      onRunFinishedEvent: ({ event }) => void (finished = event),
    },
  );
  assert.ok(finished, "the run finished");
  assert.equal(finished.runId, `node-run-${i}`);
  runs.push(finished.metadata.run_id);
  cachedShare = finished.metadata.cached_share ?? null;
}
// The agent's messages hold both turns: the questions, the tool calls with their results, and the answers.
const assistant = agent.messages.filter((m) => m.role === "assistant" && m.content);
assert.equal(assistant[0].content, "Orders:\n- orders: 220");
assert.equal(agent.messages.filter((m) => m.role === "tool").length >= 3, true);

const broken = new HttpAgent({ url: url.replace(/analyst$/, "broken"), threadId: "node-broken" });
broken.addMessage({ id: "user-x", role: "user", content: "Hello" });
let error = null;
try {
  await broken.runAgent({}, { onRunErrorEvent: ({ event }) => void (error = event.message) });
} catch (e) {
  error = error ?? String(e);
}
assert.ok(error, "the failed run reached the client as RUN_ERROR");
console.log(JSON.stringify({ runs, tools, cached_share: cachedShare, error }));
