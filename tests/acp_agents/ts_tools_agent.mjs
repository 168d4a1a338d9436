// An agent built on the ACP TypeScript SDK (npm @agentclientprotocol/sdk, installed by
// `make acp-agents`): the SDK's AgentSideConnection and ndJsonStream carry every
// message. It does what the SDK's example agent does not: fs read and write, a
// terminal, list and load (sessions kept in memory, for one connection).
//
//   node ts_tools_agent.mjs <path of the SDK package>
//
// The prompt's first word: "tools" asks permission, reads, writes and runs a terminal,
// each outcome one chunk line; anything else streams three chunks.
import { Readable, Writable } from "node:stream";
import path from "node:path";
import { pathToFileURL } from "node:url";

const acp = await import(pathToFileURL(path.join(process.argv[2], "dist", "acp.js")).href);

class ToolsAgent {
  constructor(connection) {
    this.connection = connection;
    this.sessions = new Map();
  }
  async initialize() {
    return {
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: { loadSession: true, sessionCapabilities: { list: {} } },
      agentInfo: { name: "ts-tools-agent", version: "0.1.0" },
    };
  }
  async newSession(params) {
    const sessionId = "ts-" + (this.sessions.size + 1);
    this.sessions.set(sessionId, { cwd: params.cwd, history: [] });
    return { sessionId };
  }
  async unstable_listSessions() {
    return { sessions: [...this.sessions].map(([sessionId, s]) => ({ sessionId, cwd: s.cwd })) };
  }
  async loadSession(params) {
    const session = this.sessions.get(params.sessionId);
    if (!session) throw acp.RequestError.resourceNotFound(params.sessionId);
    for (const [role, text] of session.history) {
      await this.connection.sessionUpdate({
        sessionId: params.sessionId,
        update: { sessionUpdate: role === "user" ? "user_message_chunk" : "agent_message_chunk",
                  content: { type: "text", text } },
      });
    }
    return {};
  }
  async authenticate() { return {}; }
  async setSessionMode() { return {}; }
  async cancel() {}
  async say(sessionId, text) {
    this.sessions.get(sessionId).history.push(["agent", text]);
    await this.connection.sessionUpdate({
      sessionId, update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } },
    });
  }
  async prompt(params) {
    const sessionId = params.sessionId;
    const session = this.sessions.get(sessionId);
    const text = params.prompt.map((b) => b.text || "").join("");
    session.history.push(["user", text]);
    if (text.split(/\s+/)[0] !== "tools") {
      for (const piece of ["one ", "two ", "three"]) await this.say(sessionId, piece);
      return { stopReason: "end_turn" };
    }
    const answer = await this.connection.requestPermission({
      sessionId,
      toolCall: { toolCallId: "call_1", title: "Write out.txt", kind: "edit", status: "pending" },
      options: [
        { optionId: "always", name: "Always", kind: "allow_always" },
        { optionId: "once", name: "Once", kind: "allow_once" },
        { optionId: "no", name: "No", kind: "reject_once" },
      ],
    });
    await this.say(sessionId, `PERMISSION ${answer.outcome.optionId || answer.outcome.outcome}\n`);
    const read = await this.connection.readTextFile({ sessionId, path: path.join(session.cwd, "hello.txt") });
    await this.say(sessionId, `READ ${JSON.stringify(read.content)}\n`);
    await this.connection.writeTextFile({ sessionId, path: path.join(session.cwd, "out.txt"),
                                          content: "written by the TS agent\n" });
    await this.say(sessionId, "WRITE ok\n");
    let terminal;
    try {
      terminal = await this.connection.createTerminal({
        sessionId, command: process.execPath, args: ["-e", "console.log('from the terminal')"], cwd: session.cwd,
      });
    } catch (err) {
      await this.say(sessionId, `TERMINAL refused: ${err.message}\n`);
      return { stopReason: "end_turn" };
    }
    const status = await terminal.waitForExit();
    const output = await terminal.currentOutput();
    await terminal.release();
    await this.say(sessionId, `TERMINAL exit=${status.exitCode} output=${JSON.stringify(output.output)}\n`);
    return { stopReason: "end_turn" };
  }
}

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
new acp.AgentSideConnection((conn) => new ToolsAgent(conn), stream);
