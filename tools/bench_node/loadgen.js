// Keep-alive load generator of tools/bench.py, the same for every server it compares.
//
//   node tools/bench_node/loadgen.js '{"socket": PATH, "auth": "Nonce ...", "concurrency": 16,
//                                      "duration": 1.0, "warmup": 0.3, "serverPid": PID,
//                                      "expectText": "...", "protocolHeader": false}'
//
// It speaks as Copilot CLI 1.0.102 does (tests/captures/copilot-cli-1.0.102-ide-session.log,
// PROTOCOL.md §2 and §3): the CLI's headers in the CLI's order, every POST body chunked,
// one write per request, keep-alive connections. First the handshake on one connection
// (server/discover, which must fail but not with 401; initialize; then
// notifications/initialized, which must answer 202 or 200), then
// `concurrency` connections (that one and more) each send `tools/call get_selection`
// back to back, every request with an id of its own, for `warmup` seconds not counted
// and `duration` seconds counted; then DELETE ends the session. The first answer on each
// connection is decoded and its selection text compared with `expectText`; every answer
// must be a 200. Prints one JSON line: n, errors, rps, p50_us, p99_us, the generator's
// CPU use and the server's (from /proc/PID/stat) over the counted window.
// No packages beyond Node itself.
"use strict";

const crypto = require("node:crypto");
const fs = require("node:fs");
const net = require("node:net");

const cfg = JSON.parse(process.argv[2] || "{}");
const concurrency = cfg.concurrency || 1;
const warmupMs = (cfg.warmup === undefined ? 0.3 : cfg.warmup) * 1000;
const durationMs = (cfg.duration || 1.0) * 1000;
const clientSession = crypto.randomUUID();  // each CLI process has a session UUID of its own
const META = '{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' +
  '"io.modelcontextprotocol/clientInfo":{"name":"copilot-cli","version":"1.0.102"},' +
  '"io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{"form":{},"url":{}}}';

function fail(message) {
  process.stdout.write(JSON.stringify({ error: message }) + "\n");
  process.exit(1);
}
setTimeout(() => fail("timed out"), warmupMs + durationMs + 30000).unref();

// ------------------------------------------------------------------ requests

let sessionId = null;
let extraHeaders = "";

function request(method, body) {
  let head = method + " /mcp HTTP/1.1\r\nX-Copilot-Session-Id: " + clientSession +
    "\r\nX-Copilot-PID: 32748\r\nX-Copilot-Parent-PID: 32746\r\n";
  if (cfg.auth) head += "Authorization: " + cfg.auth + "\r\n";
  head += method === "GET" ? "accept: text/event-stream\r\n" : "accept: application/json, text/event-stream\r\n";
  if (body !== undefined) head += "content-type: application/json\r\n";
  if (sessionId) head += "mcp-session-id: " + sessionId + "\r\n";
  head += extraHeaders + "Host: localhost\r\nConnection: keep-alive\r\n";
  if (body === undefined) return head + "\r\n";
  // Always chunked, one chunk and the last chunk (PROTOCOL.md §2); the bodies are ASCII.
  return head + "Transfer-Encoding: chunked\r\n\r\n" + body.length.toString(16) + "\r\n" + body + "\r\n0\r\n\r\n";
}

function getSelection(id) {
  return request("POST", '{"jsonrpc":"2.0","id":' + id + ',"method":"tools/call","params":{"_meta":' + META +
    ',"progressToken":' + id + '},"arguments":{},"name":"get_selection"}}');
}

// ------------------------------------------------------------------ responses

const CRLF2 = Buffer.from("\r\n\r\n");

// The end of the complete response at the start of buf, or -1; framing by Content-Length
// or chunked, the only two the servers here use for answers that end.
function responseEnd(buf) {
  const he = buf.indexOf(CRLF2);
  if (he < 0) return -1;
  const head = buf.latin1Slice(0, he).toLowerCase();
  const cl = head.indexOf("\r\ncontent-length:");
  if (cl >= 0) {
    const nl = head.indexOf("\r\n", cl + 2);
    const end = he + 4 + parseInt(head.slice(cl + 17, nl < 0 ? head.length : nl), 10);
    return buf.length >= end ? end : -1;
  }
  if (head.indexOf("chunked") < 0) return he + 4;  // no body (e.g. a 202 without Content-Length)
  let pos = he + 4;
  for (;;) {
    const nl = buf.indexOf("\r\n", pos);
    if (nl < 0) return -1;
    const size = parseInt(buf.latin1Slice(pos, nl), 16);
    if (size === 0) {
      const end = buf.indexOf(CRLF2, nl);  // the last chunk's CRLF, after any trailers
      return end < 0 ? -1 : end + 4;
    }
    pos = nl + 2 + size + 2;
    if (pos > buf.length) return -1;
  }
}

// Status, lower-cased headers and decoded body of one complete response.
function parseResponse(raw) {
  const he = raw.indexOf(CRLF2);
  const lines = raw.latin1Slice(0, he).split("\r\n");
  const headers = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = raw.subarray(he + 4);
  if ((headers["transfer-encoding"] || "").includes("chunked")) {
    const parts = [];
    let pos = 0;
    for (;;) {
      const nl = body.indexOf("\r\n", pos);
      const size = parseInt(body.latin1Slice(pos, nl), 16);
      if (!size) break;
      parts.push(body.subarray(nl + 2, nl + 2 + size));
      pos = nl + 2 + size + 2;
    }
    body = Buffer.concat(parts);
  }
  return { status: parseInt(lines[0].split(" ")[1], 10), headers, body: body.toString("utf8") };
}

// The JSON-RPC message of an SSE body (its last data line) or of a plain JSON body.
function message(body) {
  const datas = body.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).filter(Boolean);
  return JSON.parse(datas.length ? datas[datas.length - 1] : body);
}

// ------------------------------------------------------------------ connections

class Conn {
  constructor(sock) {
    this.sock = sock;
    this.buf = null;
    this.waiting = null;  // resolves with the raw bytes of the next complete response
    sock.setNoDelay(true);
    sock.on("data", (data) => this.onData(data));
    sock.on("error", (err) => fail("socket error: " + err.message));
    sock.on("close", () => { if (this.waiting && !stopping) fail("the server closed a connection"); });
  }

  onData(data) {
    const buf = this.buf ? Buffer.concat([this.buf, data]) : data;
    const end = responseEnd(buf);
    if (end < 0) {
      this.buf = buf;
      return;
    }
    this.buf = end < buf.length ? buf.subarray(end) : null;
    const waiting = this.waiting;
    this.waiting = null;
    waiting(buf.subarray(0, end));
  }

  send(bytes) {
    return new Promise((resolve) => {
      this.waiting = resolve;
      this.sock.write(bytes);
    });
  }
}

function connect() {
  return new Promise((resolve, reject) => {
    const sock = net.connect(cfg.socket, () => resolve(new Conn(sock)));
    sock.once("error", reject);
  });
}

// ------------------------------------------------------------------ the run

let stopping = false;

function cpuSeconds(pid) {
  try {
    const fields = fs.readFileSync("/proc/" + pid + "/stat", "latin1").split(")").pop().trim().split(" ");
    return (parseInt(fields[11], 10) + parseInt(fields[12], 10)) / (cfg.clkTck || 100);  // utime + stime in ticks
  } catch (e) {
    return NaN;
  }
}

function checkSelection(raw) {
  const r = parseResponse(raw);
  if (r.status !== 200) fail("get_selection answered " + r.status + ": " + raw.latin1Slice(0, 300));
  const text = message(r.body).result.content[0].text;
  if (cfg.expectText !== undefined && JSON.parse(text).text !== cfg.expectText) {
    fail("get_selection answered " + text.slice(0, 200));
  }
}

async function main() {
  const first = await connect();
  const discover = '{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":' +
    '{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' +
    '"io.modelcontextprotocol/clientInfo":{"name":"copilot-cli","version":"1.0.102"},' +
    '"io.modelcontextprotocol/clientCapabilities":{}}}}';
  const d = parseResponse(await first.send(request("POST", discover)));
  if (d.status === 401) fail("server/discover answered 401: the nonce was refused");
  const init = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",' +
    '"capabilities":{},"clientInfo":{"name":"copilot-cli","version":"1.0.102"}}}';
  const r = parseResponse(await first.send(request("POST", init)));
  if (r.status !== 200 || !r.headers["mcp-session-id"]) fail("initialize answered " + r.status + ": " + r.body);
  sessionId = r.headers["mcp-session-id"];
  if (cfg.protocolHeader) extraHeaders = "mcp-protocol-version: " + message(r.body).result.protocolVersion + "\r\n";
  const initialized = '{"jsonrpc":"2.0","method":"notifications/initialized"}';
  const note = parseResponse(await first.send(request("POST", initialized)));
  if (note.status !== 202 && note.status !== 200) fail("notifications/initialized answered " + note.status);

  const conns = [first];
  for (let i = 1; i < concurrency; i++) conns.push(await connect());
  let nextId = 100;
  for (const c of conns) checkSelection(await c.send(getSelection(nextId++)));

  const lat = [];
  let errors = 0;
  const t0 = performance.now();
  const countFrom = t0 + warmupMs;
  const countTo = countFrom + durationMs;
  let cpu0 = null, scpu0 = NaN, cpu1 = null, scpu1 = NaN;
  const OK = Buffer.from("HTTP/1.1 200");
  // The CPU of both processes over the counted window, read when it opens and closes.
  const openWindow = () => { cpu0 = process.cpuUsage(); scpu0 = cpuSeconds(cfg.serverPid); };
  const closeWindow = () => {
    if (cpu1 === null) { cpu1 = process.cpuUsage(cpu0); scpu1 = cpuSeconds(cfg.serverPid); }
  };
  if (warmupMs > 0) setTimeout(openWindow, warmupMs); else openWindow();
  setTimeout(closeWindow, warmupMs + durationMs);

  async function loop(conn) {
    for (;;) {
      const start = performance.now();
      if (start >= countTo) return;
      const raw = await conn.send(getSelection(nextId++));
      const end = performance.now();
      // Counted: the answers completed inside the window (a closed loop's throughput).
      if (end >= countFrom && end <= countTo) {
        lat.push(end - start);
        if (raw.compare(OK, 0, OK.length, 0, OK.length) !== 0) errors++;
      }
    }
  }
  await Promise.all(conns.map(loop));
  closeWindow();
  stopping = true;
  const del = parseResponse(await first.send(request("DELETE")));
  for (const c of conns) c.sock.destroy();

  lat.sort((a, b) => a - b);
  const pct = (q) => (lat.length ? lat[Math.min(lat.length - 1, Math.round(q / 100 * (lat.length - 1)))] * 1000 : NaN);
  const wall = durationMs / 1000;
  const genCpu = cpu1 ? (cpu1.user + cpu1.system) / 1e6 : NaN;
  const serverCpu = scpu1 - scpu0;
  process.stdout.write(JSON.stringify({
    n: lat.length, errors, rps: lat.length / wall, p50_us: pct(50), p99_us: pct(99),
    gen_cpu_util: genCpu / wall, gen_ceiling_rps: genCpu > 0 ? lat.length / genCpu : null,
    server_cpu_util: serverCpu / wall, server_cpu_us_per_req: lat.length ? serverCpu / lat.length * 1e6 : null,
    delete_status: del.status, concurrency,
  }) + "\n");
  process.exit(0);
}

main().catch((err) => fail(String(err && err.stack || err)));
