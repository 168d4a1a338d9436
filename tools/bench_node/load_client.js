// The load client of tools/bench: one for every server it compares, so that the figures
// differ only by the server. It works as the side-by-side yardstick of the issue tracker
// does (../shared/bench/bench_client.mjs there): Node's own HTTP client with a keep-alive
// agent of `concurrency` sockets, `initialize` then `notifications/initialized`, then
// `count` calls of `tools/call get_selection` shared by `concurrency` workers, each call
// waiting for its answer before the worker sends the next.
//
//   node tools/bench_node/load_client.js SOCKET AUTH COUNT CONCURRENCY [EXPECT_TEXT]
//
// AUTH is the whole Authorization value ("Nonce ..."). A call counts as an error when its
// answer is not a 200 or does not carry its own id. When EXPECT_TEXT is given, the first
// answer's selection text must be it (every server answers the same selection). Prints one
// JSON line: rps (calls over the whole run's wall time), p50_us, p99_us, n, c, errors.
// No packages beyond Node itself.
"use strict";

const http = require("node:http");

const [socketPath, auth, countArg, concurrencyArg, expectText] = process.argv.slice(2);
const count = parseInt(countArg || "5000", 10);
const concurrency = parseInt(concurrencyArg || "1", 10);
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });

function fail(message) {
  process.stdout.write(JSON.stringify({ error: message }) + "\n");
  process.exit(1);
}

// One POST of a JSON-RPC message; resolves with the status, headers and whole body.
function post(message, sessionId) {
  const headers = {
    "Authorization": auth, "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25",
  };
  if (sessionId) headers["Mcp-Session-Id"] = sessionId;
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: "/mcp", method: "POST", agent, headers }, (res) => {
      const parts = [];
      res.on("data", (part) => parts.push(part));
      res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts).toString() }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(JSON.stringify(message));
  });
}

// The JSON-RPC message of an SSE body (its last data line) or of a plain JSON body.
function jsonOf(body) {
  const data = body.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trim());
  return JSON.parse(data.length ? data[data.length - 1] : body);
}

async function main() {
  const init = await post({ jsonrpc: "2.0", id: 0, method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "bench", version: "1" } } });
  const sessionId = init.headers["mcp-session-id"];
  if (init.status !== 200 || !sessionId) fail("initialize answered " + init.status + ": " + init.body.slice(0, 300));
  await post({ jsonrpc: "2.0", method: "notifications/initialized" }, sessionId);

  const latencies = [];
  let nextId = 1;
  let errors = 0;
  let checked = expectText === undefined;
  async function worker() {
    while (nextId <= count) {
      const id = nextId++;
      const start = process.hrtime.bigint();
      const answer = await post({ jsonrpc: "2.0", id, method: "tools/call",
        params: { name: "get_selection", arguments: {}, _meta: { progressToken: id } } }, sessionId);
      latencies.push(Number(process.hrtime.bigint() - start) / 1000);
      if (answer.status !== 200 || !answer.body.includes('"id":' + id)) errors++;
      if (!checked) {
        checked = true;
        const text = jsonOf(answer.body).result.content[0].text;
        if (JSON.parse(text).text !== expectText) fail("get_selection answered " + text.slice(0, 200));
      }
    }
  }
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  latencies.sort((a, b) => a - b);
  const at = (q) => Math.round(latencies[Math.floor(latencies.length * q)]);
  process.stdout.write(JSON.stringify({ rps: Math.round(latencies.length / seconds), p50_us: at(0.5), p99_us: at(0.99),
    n: latencies.length, c: concurrency, errors }) + "\n");
  agent.destroy();
}

main().catch((err) => fail(String((err && err.stack) || err)));
