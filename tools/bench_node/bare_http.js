// The "bare node:http" peer of tools/bench: the least a Node.js server can do for
// the same exchange. node:http parses each request (chunked bodies included), the handler
// checks the nonce, JSON.parse-s the body and answers initialize, notifications and
// tools/call with one SSE event, with no framework, no MCP SDK and no schema validation.
// What is left is the cost of Node's HTTP stack and JSON: a ceiling for any server on
// Node, not an `/ide` server (it answers every tools/call with the selection).
//
//   node tools/bench_node/bare_http.js DIR
//
// Listens on DIR/bare.sock, prints one JSON line {socket, auth, pid, versions}, exits
// when its standard input closes. No packages beyond Node itself.
"use strict";

const crypto = require("node:crypto");
const http = require("node:http");
const path = require("node:path");

const dir = process.argv[2];
if (!dir) {
  console.error("usage: bare_http.js DIR");
  process.exit(2);
}
const socketPath = path.join(dir, "bare.sock");
const nonce = crypto.randomUUID();
const expected = Buffer.from("Nonce " + nonce);
const selectionText = JSON.stringify(JSON.parse(process.env.BENCH_SELECTION || "null"), null, 2);
const sessionId = crypto.randomUUID();
const initResult = {
  protocolVersion: "2025-11-25", capabilities: { tools: { listChanged: true } },
  serverInfo: { name: "bare-node-http", version: "0.0.1" },
};

function answer(res, status, headers, body) {
  res.writeHead(status, headers);
  res.end(body);
}

function handle(req, res, raw) {
  let msg;
  try {
    msg = JSON.parse(raw);
  } catch (e) {
    answer(res, 400, { "content-type": "application/json" },
      '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}');
    return;
  }
  if (msg.id === undefined) {  // a notification: 202, no body (PROTOCOL.md §2)
    answer(res, 202, { "content-type": "text/plain" }, "");
    return;
  }
  let reply;
  if (msg.method === "initialize") {
    reply = { jsonrpc: "2.0", id: msg.id, result: initResult };
  } else if (msg.method === "tools/call") {
    reply = { jsonrpc: "2.0", id: msg.id, result: { content: [{ type: "text", text: selectionText }] } };
  } else {
    reply = { jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "Method not found" } };
  }
  answer(res, 200, { "content-type": "text/event-stream", "cache-control": "no-cache", "mcp-session-id": sessionId },
    "event: message\ndata: " + JSON.stringify(reply) + "\n\n");
}

const server = http.createServer((req, res) => {
  const got = Buffer.from(req.headers.authorization || "");
  if (got.length !== expected.length || !crypto.timingSafeEqual(got, expected)) {
    answer(res, 401, { "content-type": "text/plain" }, "Unauthorized");
    return;
  }
  if (req.method === "DELETE") {
    answer(res, 200, {}, "");
    return;
  }
  if (req.method !== "POST") {
    answer(res, 405, { allow: "GET, POST, DELETE" }, "");
    return;
  }
  const parts = [];
  req.on("data", (part) => parts.push(part));
  req.on("end", () => handle(req, res, parts.length === 1 ? parts[0].toString() : Buffer.concat(parts).toString()));
});

server.listen(socketPath, () => {
  process.stdout.write(JSON.stringify({ socket: socketPath, auth: "Nonce " + nonce, pid: process.pid,
    versions: { node: process.versions.node } }) + "\n");
});

process.stdin.on("data", () => {});
process.stdin.on("end", () => {
  server.close();
  process.exit(0);
});
