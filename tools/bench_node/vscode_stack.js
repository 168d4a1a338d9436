// The "VS Code stack" peer of tools/bench: an `/ide` server built the way VS Code
// builds its own (Express 5, the official MCP TypeScript SDK's McpServer and
// StreamableHTTPServerTransport, one of each per session, the six tools registered with
// zod schemas, express.json({limit: '10mb'}), a nonce check in front), on a Unix socket.
//
//   NODE_PATH=.bench-node/node_modules node tools/bench_node/vscode_stack.js DIR
//
// Listens on DIR/vscode.sock, prints one JSON line {socket, auth, pid, versions} when it
// accepts connections, and exits when its standard input closes (tools/bench holds
// it). The selection it answers comes from the BENCH_SELECTION environment variable (the
// same JSON tools/bench gives our server), so both answer the same bytes of content.
// Development only (`make bench-node`); nothing here is part of the library.
"use strict";

const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");
const express = require("express");
const { z } = require("zod");
const SDK = "@modelcontextprotocol/sdk";  // the release pinned in package.json
const { McpServer } = require(SDK + "/server/mcp.js");
const { StreamableHTTPServerTransport } = require(SDK + "/server/streamableHttp.js");
const { isInitializeRequest } = require(SDK + "/types.js");

const dir = process.argv[2];
if (!dir) {
  console.error("usage: vscode_stack.js DIR");
  process.exit(2);
}
const socketPath = path.join(dir, "vscode.sock");
const nonce = crypto.randomUUID();
const selection = JSON.parse(process.env.BENCH_SELECTION || "null");

// Every result is one text item holding JSON, pretty-printed as VS Code does (PROTOCOL.md §4).
const asText = (value) => ({ content: [{ type: "text", text: JSON.stringify(value, null, 2) }] });

function createServer() {
  const server = new McpServer(
    { name: "vscode-copilot-cli", version: "0.0.1", title: "VS Code Copilot CLI" },
    { capabilities: { tools: { listChanged: true } } });
  server.registerTool("get_vscode_info", {
    description: "Get information about the current VS Code instance",
  }, async () => asText({
    version: "1.0.0", appName: "bench", appRoot: dir, language: "en", machineId: "bench",
    sessionId: "bench", uriScheme: "vscode", shell: "/bin/sh",
  }));
  server.registerTool("get_selection", {
    description: "Get text selection. Returns current selection if an editor is active, otherwise returns " +
      "the latest cached selection. The \"current\" field indicates if this is from the active editor " +
      "(true) or cached (false).",
  }, async () => asText(selection));
  server.registerTool("open_diff", {
    description: "Opens a diff view comparing original file content with new content. Blocks until user " +
      "accepts, rejects, or closes the diff.",
    inputSchema: {
      original_file_path: z.string().describe("Path to the original file"),
      new_file_contents: z.string().describe("The new file contents to compare against"),
      tab_name: z.string().describe("Name for the diff tab"),
    },
  }, async ({ original_file_path, tab_name }) => asText({
    // The benchmark's editor accepts every diff at once, as tools/bench's host of ours does.
    success: true, result: "SAVED", trigger: "accepted_via_button", tab_name,
    message: "User accepted changes for " + original_file_path,
  }));
  server.registerTool("close_diff", {
    description: "Closes a diff tab by its tab name. Use this when the client rejects an edit to close the " +
      "corresponding diff view.",
    inputSchema: {
      tab_name: z.string().describe("The tab name of the diff to close (must match the tab_name used when " +
        "opening the diff)"),
    },
  }, async ({ tab_name }) => asText({
    success: true, already_closed: true, tab_name,
    message: "No active diff found with tab name \"" + tab_name + "\" (may already be closed)",
  }));
  server.registerTool("get_diagnostics", {
    description: "Gets language diagnostics (errors, warnings, hints) from VS Code",
    inputSchema: {
      uri: z.string().optional().describe("File URI to get diagnostics for. Optional. If not provided, " +
        "returns diagnostics for all files."),
    },
  }, async () => asText([]));
  server.registerTool("update_session_name", {
    description: "Update the display name for the current CLI session",
    inputSchema: { name: z.string().describe("The new session name") },
  }, async () => asText({ success: true }));
  return server;
}

// The nonce of the lock file, compared on every request in constant time (PROTOCOL.md §2).
const expected = Buffer.from("Nonce " + nonce);
function checkNonce(req, res, next) {
  const got = Buffer.from(req.headers.authorization || "");
  if (got.length !== expected.length || !crypto.timingSafeEqual(got, expected)) {
    res.status(401).type("text/plain").send("Unauthorized");
    return;
  }
  next();
}

const transports = new Map();
const app = express();
app.use(express.json({ limit: "10mb" }));
app.use(checkNonce);

app.post("/mcp", async (req, res) => {
  const sid = req.headers["mcp-session-id"];
  let transport = sid ? transports.get(sid) : undefined;
  if (!transport) {
    if (sid || !isInitializeRequest(req.body)) {
      // As VS Code answers the CLI's first request, server/discover, which carries no
      // session: 404 and a JSON-RPC error, and the CLI goes on with initialize (PROTOCOL.md §3).
      res.status(404).json({ jsonrpc: "2.0", id: (req.body && req.body.id) ?? null,
        error: { code: -32001, message: "Session not found" } });
      return;
    }
    // A new session: one transport and one McpServer of its own (PROTOCOL.md §3).
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      onsessioninitialized: (id) => { transports.set(id, transport); },
    });
    transport.onclose = () => { if (transport.sessionId) transports.delete(transport.sessionId); };
    await createServer().connect(transport);
  }
  await transport.handleRequest(req, res, req.body);
});

async function sessionRequest(req, res) {
  const transport = transports.get(req.headers["mcp-session-id"]);
  if (!transport) {
    res.status(404).type("text/plain").send("Session not found");
    return;
  }
  await transport.handleRequest(req, res);
}
app.get("/mcp", sessionRequest);
app.delete("/mcp", sessionRequest);

const listener = app.listen(socketPath, () => {
  const version = (name) => JSON.parse(fs.readFileSync(
    path.join(require.resolve("express").split("node_modules")[0], "node_modules", name, "package.json"))).version;
  process.stdout.write(JSON.stringify({
    socket: socketPath, auth: "Nonce " + nonce, pid: process.pid,
    versions: { node: process.versions.node, express: version("express"),
      "@modelcontextprotocol/sdk": version(SDK), zod: version("zod") },
  }) + "\n");
});

process.stdin.on("data", () => {});
process.stdin.on("end", () => {
  listener.close();
  for (const transport of transports.values()) transport.close();
  process.exit(0);
});
