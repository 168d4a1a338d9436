#!/usr/bin/env python3
"""A fake ACP agent for the tests: speaks ACP v1 the way Copilot CLI 1.0.102 does in
tests/captures/copilot-cli-1.0.102-acp-session.log (standard library only, runs on its own), over stdio or, like
`copilot --acp --port P`, on TCP: `fake_agent.py --port P` (0: any free port) listens
on 127.0.0.1, prints `FAKE_ACP_PORT=<port>` on stdout, serves each connection as its
own agent connection and runs until it is killed. As with the real agent (docs/ACP.md
§8), every connection lists the stored sessions, but prompts only those it opened or
loaded; a session that never ran a prompt cannot be loaded.

What it imitates: its own requests are numbered from 0; it answers requests
concurrently (so responses can come out of order); `available_commands_update` comes
before the `session/new` answer; lines it cannot parse (and batches) are dropped without
a reply; U+2028 is written raw; a second prompt on a busy session cancels the first.

The prompt's first word picks a scenario (see `Agent.turn`). Environment:
  FAKE_ACP_START=fail      print one stderr line and exit 1 (a failed start)
  FAKE_ACP_STUBBORN=eof    ignore stdin EOF (needs SIGTERM); =term also ignores SIGTERM
  FAKE_ACP_LOG=path        append every line received (C>A) and sent (A>C)
  FAKE_ACP_IGNORE_CANCEL=1 keep running turns after session/cancel
  FAKE_ACP_STORE=path      keep sessions (and their history) in this JSON file, so a
                           later run can list and load them, as the real agent does
  FAKE_ACP_BANNER=text     write this line to stdout before any protocol
  FAKE_ACP_CAPS=bare       advertise no optional capability (no loadSession, no list)
  FAKE_ACP_LATE_COMMANDS=s send the commands list only s seconds after session/new

Hostile turns (an agent that does what a well-behaved one never would): FORGE answers
the running prompt with a forged string id first; BADUTF8 sends a request that is not
UTF-8 and reports the client's answer; ERRDATA fails the prompt with an error whose
`data` holds the reason (and control characters, and bulk); BIGANSWER answers the
prompt with one over-long line.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import uuid

MODES = ["https://agentclientprotocol.com/protocol/session-modes#" + m
         for m in ("agent", "plan", "autopilot")]
COMMANDS = [{"name": "context", "description": "Show context usage"},
            {"name": "usage", "description": "Show session usage"},
            {"name": "session", "description": "Session info", "input": {"hint": "info"}}]
OPTIONS = [{"optionId": "allow_once", "kind": "allow_once", "name": "Allow once"},
           {"optionId": "allow_always", "kind": "allow_always", "name": "Always allow"},
           {"optionId": "reject_once", "kind": "reject_once", "name": "Deny"}]
LOG = os.environ.get("FAKE_ACP_LOG")


def log(direction, data):
    if LOG:
        with open(LOG, "ab") as handle:
            handle.write(direction.encode() + b" " + data.rstrip(b"\n") + b"\n")


def write_stdout(data):
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except (BrokenPipeError, ValueError):
        os._exit(0)


class Store:
    """The sessions, shared by every connection (and kept in FAKE_ACP_STORE if set)."""

    def __init__(self, path):
        self.path = path
        self.sessions = {}
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                for session in json.load(handle):
                    session["closed"] = True  # loaded by no connection yet
                    self.sessions[session["id"]] = session

    def save(self):
        if self.path:
            with open(self.path + ".tmp", "w", encoding="utf-8") as handle:
                json.dump(list(self.sessions.values()), handle)
            os.replace(self.path + ".tmp", self.path)


STORE = Store(os.environ.get("FAKE_ACP_STORE"))


def config_options(session):
    return [{"type": "select", "id": "mode", "name": "Mode", "category": "mode",
             "currentValue": session["mode"],
             "options": [{"value": m, "name": m.rsplit("#", 1)[1].title()} for m in MODES]},
            {"type": "select", "id": "allow_all", "name": "Allow All", "category": "permissions",
             "currentValue": session["allow_all"],
             "options": [{"value": "on", "name": "On"}, {"value": "off", "name": "Off"}]}]


class Agent:
    """One agent connection (stdio, or one TCP socket)."""

    def __init__(self, write=write_stdout, hang_up=None):
        self.write = write
        self.hang_up = hang_up  # hang_up(reset) closes a TCP connection
        self.next_id = 0
        self.waiting = {}
        self.sessions = STORE.sessions
        self.mine = set()  # the sessions this connection opened or loaded
        self.turns = {}
        self.tasks = set()

    def connection_lost(self, cancel_turns=True):
        for sid in self.mine:
            self.sessions[sid]["closed"] = True
        if cancel_turns:  # (stdio: a prompt pending at EOF is never answered)
            for turn in self.turns.values():
                turn.cancel()
        STORE.save()

    # ------------------------------------------------------------------ plumbing

    def write_line(self, data):
        log("A>C", data)
        self.write(data)

    def send(self, obj):
        self.write_line(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")

    async def request(self, method, params):
        msg_id = self.next_id
        self.next_id += 1
        future = asyncio.get_event_loop().create_future()
        self.waiting[msg_id] = future
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await future

    def update(self, sid, update):
        self.send({"jsonrpc": "2.0", "method": "session/update",
              "params": {"sessionId": sid, "update": update}})
        session = self.sessions.get(sid)
        if session is not None:
            session["history"].append(update)

    def chunk(self, sid, text, kind="agent_message_chunk"):
        self.update(sid, {"sessionUpdate": kind, "content": {"type": "text", "text": text}})

    def on_line(self, line):
        log("C>A", line)
        try:
            msg = json.loads(line.decode("utf-8"))
        except ValueError:
            return  # dropped without a reply, like the real agent
        if not isinstance(msg, dict):
            return  # batches, strings and numbers: dropped too
        if "method" not in msg:
            future = self.waiting.pop(msg.get("id"), None)
            if future is not None and not future.done():
                future.set_result(msg)
            return
        if msg.get("jsonrpc") != "2.0":
            if "id" in msg:
                self.send({"jsonrpc": "2.0", "id": msg["id"], "error": {
                    "code": -32600, "message": 'Invalid request: "jsonrpc" must be "2.0"'}})
            return
        if "id" in msg:
            task = asyncio.ensure_future(self.answer(msg))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        elif msg["method"] == "session/cancel" and not os.environ.get("FAKE_ACP_IGNORE_CANCEL"):
            params = msg.get("params") or {}
            turn = self.turns.get(params.get("sessionId"))
            if turn is not None and not turn.done():
                turn.cancel()

    async def answer(self, msg):
        method, params = msg["method"], msg.get("params") or {}
        handler = getattr(self, "do_" + method.replace("/", "_"), None)
        if handler is None:
            self.send({"jsonrpc": "2.0", "id": msg["id"], "error": {
                "code": -32601, "message": '"Method not found": %s' % method, "data": {"method": method}}})
            return
        if method == "session/prompt":
            self.prompt_id = msg["id"]
        try:
            result = await handler(params)
        except Ignore:
            return
        except Failure as exc:
            self.send({"jsonrpc": "2.0", "id": msg["id"], "error": exc.args[0]})
            return
        finally:
            STORE.save()
        self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})

    def session(self, params, open_only=True):
        sid = params.get("sessionId")
        session = self.sessions.get(sid)
        if session is None or (open_only and (session["closed"] or sid not in self.mine)):
            raise Failure({"code": -32602, "message": "Session %s not found" % sid, "data": {"sessionId": sid}})
        return session

    # ------------------------------------------------------------------ methods

    async def do_initialize(self, params):
        self.client_capabilities = params.get("clientCapabilities")
        if os.environ.get("FAKE_ACP_CAPS") == "bare":
            return {"protocolVersion": 1, "agentCapabilities": {},
                    "agentInfo": {"name": "fake-bare", "version": "0.0.1"}, "authMethods": []}
        return {"protocolVersion": 1,
                "agentCapabilities": {"loadSession": True,
                                      "mcpCapabilities": {"http": True, "sse": True},
                                      "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                                      "sessionCapabilities": {"close": {}, "list": {}}},
                "agentInfo": {"name": "fake", "title": "Fake agent", "version": "0.0.1"},
                "authMethods": [{"id": "fake-login", "name": "Log in"}],
                "_echo": {"clientCapabilities": params.get("clientCapabilities"),
                          "clientInfo": params.get("clientInfo")}}

    async def do_authenticate(self, params):
        if params.get("methodId") != "fake-login":
            raise Failure({"code": -32602, "message": "unknown auth method"})
        return {}

    async def do_session_new(self, params):
        cwd = params.get("cwd")
        if not isinstance(cwd, str):
            raise Failure({"code": -32602, "message": "Invalid params: cwd is required"})
        if not os.path.isdir(cwd):
            raise Failure({"code": -32603, "message": "Directory does not exist or cannot be accessed: %s" % cwd})
        sid = str(uuid.uuid4())
        session = {"id": sid, "cwd": cwd, "closed": False, "title": None, "mode": MODES[0],
                   "allow_all": "off", "history": [], "tokens": 0, "updatedAt": "2026-01-01T00:00:00Z"}
        self.sessions[sid] = session
        self.mine.add(sid)
        late = os.environ.get("FAKE_ACP_LATE_COMMANDS")
        if late:  # some agents send the list a moment after the answer
            asyncio.get_event_loop().call_later(
                float(late), self.update, sid, {"sessionUpdate": "available_commands_update",
                                                "availableCommands": COMMANDS})
            return self.session_result(session)
        # ACP.md §2: the commands list names the session before session/new answers.
        self.update(sid, {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS})
        asyncio.get_event_loop().call_soon(
            self.update, sid, {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS})
        return self.session_result(session)

    def session_result(self, session):
        return {"sessionId": session["id"], "configOptions": config_options(session),
                "modes": {"availableModes": [{"id": m, "name": m.rsplit("#", 1)[1].title()} for m in MODES],
                          "currentModeId": session["mode"]}}

    async def do_session_load(self, params):
        sid = params.get("sessionId")
        session = self.sessions.get(sid)
        if session is None:
            raise Failure({"code": -32002, "message": "Resource not found: Session %s not found" % sid})
        if not session["closed"] and sid in self.mine:
            raise Failure({"code": -32602, "message": "Session %s is already loaded" % sid})
        if not any(u["sessionUpdate"] == "user_message_chunk" for u in session["history"]):
            raise Failure({"code": -32603, "message": "Internal error: Persisted event journal is unavailable"})
        session["closed"] = False
        self.mine.add(sid)
        history, session["history"] = session["history"], []
        for update in history:  # replayed before the answer (ACP.md §3.5)
            if update["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk",
                                           "tool_call", "tool_call_update"):
                self.update(sid, update)
        result = self.session_result(session)
        del result["sessionId"]
        return result

    async def do_session_list(self, params):
        cwd = params.get("cwd")
        return {"sessions": [{"sessionId": s["id"], "cwd": s["cwd"], "title": s["title"],
                              "updatedAt": s["updatedAt"]}
                             for s in self.sessions.values() if cwd is None or s["cwd"] == cwd]}

    async def do_session_close(self, params):
        session = self.session(params)
        session["closed"] = True
        turn = self.turns.get(session["id"])
        if turn is not None and not turn.done():
            turn.cancel()
        return {}

    async def do_session_set_mode(self, params):
        session = self.session(params)
        if params.get("modeId") not in MODES:
            raise Failure({"code": -32602, "message": "Invalid mode '%s'." % params.get("modeId")})
        session["mode"] = params["modeId"]
        self.update(session["id"], {"sessionUpdate": "current_mode_update", "currentModeId": session["mode"]})
        return {}

    async def do_session_set_config_option(self, params):
        session = self.session(params)
        key, value = params.get("configId"), params.get("value")
        if key == "allow_all" and value in ("on", "off"):
            session["allow_all"] = value
        elif key == "mode" and value in MODES:
            session["mode"] = value
        else:
            raise Failure({"code": -32602, "message": "Invalid config option %s=%s" % (key, value)})
        self.update(session["id"], {"sessionUpdate": "config_option_update",
                                    "configOptions": config_options(session)})
        return {"configOptions": config_options(session)}

    async def do_session_prompt(self, params):
        session = self.session(params)
        sid = session["id"]
        blocks = params.get("prompt")
        text = ""
        if isinstance(blocks, list):
            text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        previous = self.turns.get(sid)
        if previous is not None and not previous.done():
            previous.cancel()  # ACP.md §3.4: a second prompt cancels the first
        turn = asyncio.ensure_future(self.turn(session, text))
        self.turns[sid] = turn
        try:
            return await turn
        except asyncio.CancelledError:  # session/cancel, a newer prompt, or session/close
            return {"stopReason": "cancelled"}

    async def do__fake_echo(self, params):
        await asyncio.sleep(float(params.get("delay", 0)))
        return {"value": params.get("value")}

    async def do__fake_ignore(self, params):
        raise Ignore()

    # ------------------------------------------------------------------ turns

    def usage(self, session):
        session["tokens"] += 100
        n = session["tokens"]
        return {"inputTokens": n, "outputTokens": n // 10, "totalTokens": n + n // 10}

    async def turn(self, session, text):
        sid = session["id"]
        words = text.split()
        word = words[0].upper() if words else ""
        rest = text[len(words[0]):].strip() if words else ""
        if session["title"] is None:
            session["title"] = text[:40]
            self.update(sid, {"sessionUpdate": "session_info_update", "title": session["title"],
                              "updatedAt": "2026-01-01T00:00:01Z"})
        self.update(sid, {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}})
        handler = getattr(self, "turn_" + word.lower(), None) if word.isalnum() else None
        if handler is None:
            self.update(sid, {"sessionUpdate": "usage_update", "used": 8000, "size": 64000})
            self.chunk(sid, "Hello from the fake ")
            self.chunk(sid, "agent.")
            return {"stopReason": "end_turn", "usage": self.usage(session)}
        return await handler(session, rest)

    async def permission(self, sid, call):
        response = await self.request("session/request_permission",
                                      {"sessionId": sid, "toolCall": call, "options": OPTIONS})
        if "error" in response:
            return "error"
        outcome = (response.get("result") or {}).get("outcome") or {}
        if outcome.get("outcome") == "selected":
            return outcome.get("optionId")
        return outcome.get("outcome") or "invalid"

    async def turn_edit(self, session, rest):
        sid = session["id"]
        path = os.path.join(session["cwd"], rest or "hello.txt")
        call_id = "call_%s" % uuid.uuid4().hex[:12]
        old, new = "line two", "line two (edited)"
        self.chunk(sid, "I will edit it.")
        diff = [{"type": "diff", "path": path, "oldText": old, "newText": new}]
        self.update(sid, {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": "Editing " + path,
                          "kind": "edit", "status": "pending", "locations": [{"path": path}],
                          "rawInput": {"path": path, "old_str": old, "new_str": new}, "content": diff})
        choice = await self.permission(sid, {
            "toolCallId": call_id, "title": "Edit file", "kind": "edit", "status": "pending",
            "rawInput": {"fileName": path, "diff": "@@ -2 +2 @@\n-%s\n+%s\n" % (old, new)},
            "locations": [{"path": path}]})
        if choice in ("allow_once", "allow_always"):
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text.replace(old, new, 1))
            self.update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                              "status": "completed", "content": diff,
                              "rawOutput": {"content": "File updated.", "outcome": choice}})
            self.chunk(sid, "Tool finished.")
        elif choice == "reject_once":
            self.update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "failed",
                              "rawOutput": {"message": "The user rejected this tool call.", "code": "rejected"}})
            self.chunk(sid, "Info: Operation cancelled by user")
        else:
            self.update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "failed",
                              "rawOutput": {"message": "Permission denied (%s)." % choice, "code": "rejected"}})
        return {"stopReason": "end_turn", "usage": self.usage(session)}

    async def turn_perm2(self, session, rest):
        """Two permission requests at once, then wait for a cancel."""
        sid = session["id"]
        for n in (1, 2):
            asyncio.ensure_future(self.permission(sid, {"toolCallId": "call_p%d" % n, "title": "Run %d" % n,
                                                        "kind": "execute", "status": "pending",
                                                        "rawInput": {"command": "true"}}))
        await asyncio.sleep(60)
        return {"stopReason": "end_turn"}

    async def turn_slow(self, session, rest):
        self.chunk(session["id"], "working...")
        await asyncio.sleep(float(rest) if rest else 60)
        self.chunk(session["id"], "slow done")
        return {"stopReason": "end_turn", "usage": self.usage(session)}

    async def turn_slowpid(self, session, rest):
        """Report our pid, then a slow turn (shutdown tests check the pid is gone)."""
        self.chunk(session["id"], "AGENT-PID %d\n" % os.getpid())
        return await self.turn_slow(session, rest)

    async def turn_run(self, session, rest):
        """A shell tool call: the first update has no status, the last replaces content."""
        sid = session["id"]
        call_id = "call_run1"
        self.update(sid, {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": "echo hi",
                          "kind": "execute", "status": "pending", "rawInput": {"command": "echo hi"}})
        self.update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                          "content": [{"type": "content", "content": {"type": "text", "text": "hi\n"}}]})
        self.update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "completed",
                          "content": [{"type": "content", "content": {"type": "text", "text": "hi\n<exit 0>"}}],
                          "rawOutput": {"exitCode": 0}})
        self.chunk(sid, "Ran it.")
        return {"stopReason": "end_turn", "usage": self.usage(session)}

    async def turn_runslow(self, session, rest):
        sid = session["id"]
        self.update(sid, {"sessionUpdate": "tool_call", "toolCallId": "call_long", "title": "sleep 60",
                          "kind": "execute", "status": "pending", "rawInput": {"command": "sleep 60"}})
        self.update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "call_long",
                          "status": "in_progress"})
        await asyncio.sleep(60)
        return {"stopReason": "end_turn"}

    async def turn_plan(self, session, rest):
        sid = session["id"]
        entries = [{"content": "Read", "priority": "high", "status": "completed"},
                   {"content": "Write", "priority": "medium", "status": "in_progress"}]
        self.update(sid, {"sessionUpdate": "plan", "entries": entries[:1]})
        self.update(sid, {"sessionUpdate": "plan", "entries": entries})
        self.chunk(sid, "thinking", kind="agent_thought_chunk")
        self.update(sid, {"sessionUpdate": "current_mode_update", "currentModeId": MODES[1]})
        session["mode"] = MODES[1]
        session["allow_all"] = "on"
        self.update(sid, {"sessionUpdate": "config_option_update", "configOptions": config_options(session)})
        self.update(sid, {"sessionUpdate": "available_commands_update",
                          "availableCommands": COMMANDS[:1]})
        self.update(sid, {"sessionUpdate": "session_info_update", "title": "Planned work"})
        self.update(sid, {"sessionUpdate": "usage_update", "used": 9000, "size": 64000})
        self.update(sid, {"sessionUpdate": "future_kind_of_update", "whatever": [1, 2]})
        self.chunk(sid, "Planned.")
        return {"stopReason": "end_turn", "usage": self.usage(session)}

    async def turn_error(self, session, rest):
        sid = session["id"]
        self.update(sid, {"sessionUpdate": "usage_update", "used": 70308, "size": 64000})
        self.chunk(sid, "Info: retrying\n")
        self.chunk(sid, "Error: Request exceeds the model's prompt budget ")
        self.chunk(sid, "(70308 tokens; limit 64000).")
        return {"stopReason": "end_turn"}

    async def turn_crash(self, session, rest):
        self.chunk(session["id"], "about to crash")
        sys.stderr.write("fatal: simulated crash\n")
        sys.stderr.flush()
        await asyncio.sleep(0.05)
        os._exit(3)

    async def turn_signal(self, session, rest):
        """Die by a signal mid-turn (SIGKILL: no chance to say anything)."""
        self.chunk(session["id"], "about to be killed")
        sys.stderr.write("fatal: killing myself\n")
        sys.stderr.flush()
        await asyncio.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)

    async def turn_crashhold(self, session, rest):
        """Crash, leaving a process in another session that holds stdout and stderr open
        (the client must not wait for it)."""
        self.chunk(session["id"], "about to crash")
        child = subprocess.Popen(["sleep", "60"], start_new_session=True)
        self.chunk(session["id"], "HOLDER %d\n" % child.pid)
        sys.stderr.write("fatal: crashed, a child still holds the pipes\n")
        sys.stderr.flush()
        await asyncio.sleep(0.05)
        os._exit(4)

    async def turn_hangup(self, session, rest):
        """TCP: close this connection mid-turn (`RESET` style: `HANGUP reset`)."""
        self.chunk(session["id"], "hanging up")
        await asyncio.sleep(0.05)
        self.hang_up(rest == "reset")
        await asyncio.sleep(60)

    async def turn_unicode(self, session, rest):
        self.chunk(session["id"], "a\u2028b\u2029c \u65e5\u672c \U0001F30D \"q\" \\ \t\r\x0c end")
        return {"stopReason": "end_turn", "usage": self.usage(session)}

    async def turn_big(self, session, rest):
        size = int(rest) if rest else 5 * 1024 * 1024
        self.chunk(session["id"], "B" * (size - 3) + "END")
        return {"stopReason": "end_turn", "usage": self.usage(session)}

    async def turn_diff(self, session, rest):
        """`DIFF {"oldText": ..., "newText": ...}`: a completed edit carrying that diff."""
        block = dict(json.loads(rest), type="diff", path=os.path.join(session["cwd"], "f.txt"))
        self.update(session["id"], {"sessionUpdate": "tool_call", "toolCallId": "call_d", "title": "Editing f.txt",
                                    "kind": "edit", "status": "completed", "content": [block]})
        return {"stopReason": "end_turn"}

    async def turn_biganswer(self, session, rest):
        """The prompt's own answer as one over-long line (the turn waits for it)."""
        size = int(rest) if rest else 5 * 1024 * 1024
        return {"stopReason": "end_turn", "_pad": "A" * size}

    async def turn_forge(self, session, rest):
        """Answer the running prompt with its id as a string (not the client's id),
        then work on and answer for real."""
        forged = {"jsonrpc": "2.0", "id": str(self.prompt_id), "result": {"stopReason": "forged"}}
        self.send(forged)
        await asyncio.sleep(0.3)
        self.chunk(session["id"], "after the forgery")
        return {"stopReason": "end_turn"}

    async def turn_badutf8(self, session, rest):
        """A request whose bytes are not UTF-8: JSON-RPC wants -32700 with id null."""
        future = asyncio.get_event_loop().create_future()
        self.waiting[None] = future
        self.write_line(b'{"jsonrpc":"2.0","id":77,"method":"fs/read_text_file","params":{"path":"/\xff"}}\n')
        try:
            answer = await asyncio.wait_for(future, 5.0)
            self.chunk(session["id"], "PARSE-ANSWER " + json.dumps(answer))
        except asyncio.TimeoutError:
            self.chunk(session["id"], "NO-ANSWER")
        return {"stopReason": "end_turn"}

    async def turn_errdata(self, session, rest):
        raise Failure({"code": -32603, "message": "Internal error",
                       "data": {"details": "Query closed before response received\x1b[2J",
                                "bulk": "x" * 5000}})

    async def turn_junk(self, session, rest):
        sid = session["id"]
        for line in (b"not json at all", b"[1,2", b'"just a string"', b"42", b"   ", b"",
                     b'[{"jsonrpc":"2.0","method":"session/update","params":{}}]',
                     b'{"jsonrpc":"2.0","id":999999,"result":{}}',
                     b'{"jsonrpc":"2.0","method":"session/update","params":"bad"}',
                     b'{"jsonrpc":"2.0","id":"junk-1","method":42}',
                     b"\xff\xfe not utf-8"):
            self.write_line(line + b"\n")
        self.chunk(sid, "still fine")
        return {"stopReason": "end_turn", "usage": self.usage(session)}

    async def turn_raw(self, session, rest):
        """`RAW method {params}`: send any request to the client, report its answer."""
        method, _, params = rest.partition(" ")
        params = json.loads(params) if params.strip() else {}
        params.setdefault("sessionId", session["id"])
        response = await self.request(method, params)
        response.pop("jsonrpc", None)
        response.pop("id", None)
        self.chunk(session["id"], "RAW-RESULT " + json.dumps(response))
        return {"stopReason": "end_turn"}

    async def turn_term(self, session, rest):
        """`TERM {"create": {...}, "steps": [...]}`: drive terminal/* and report."""
        plan = json.loads(rest)
        create = dict(plan["create"], sessionId=session["id"])
        results = [await self.request("terminal/create", create)]
        term = (results[0].get("result") or {}).get("terminalId")
        for step in plan.get("steps", []):
            if step.startswith("sleep:"):
                await asyncio.sleep(float(step[6:]))
                continue
            method = {"output": "terminal/output", "wait": "terminal/wait_for_exit",
                      "kill": "terminal/kill", "release": "terminal/release"}[step]
            results.append(await self.request(method, {"sessionId": session["id"], "terminalId": term}))
        for r in results:
            r.pop("jsonrpc", None)
            r.pop("id", None)
        self.chunk(session["id"], "TERM-RESULT " + json.dumps(results))
        return {"stopReason": "end_turn"}

    async def turn_spawn(self, session, rest):
        """Start a grandchild in our process group and report its pid (orphan tests)."""
        child = subprocess.Popen(["sleep", "60"])
        self.chunk(session["id"], "PID %d" % child.pid)
        return {"stopReason": "end_turn"}


class Failure(Exception):
    pass


class Ignore(Exception):
    pass


async def serve_tcp(port):
    """TCP mode: one `Agent` per connection; runs until killed."""

    async def on_connection(reader, writer):
        def hang_up(reset):
            if reset:  # SO_LINGER 0: close() sends RST instead of FIN
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
            else:
                writer.close()

        agent = Agent(writer.write, hang_up)
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                if line.strip():
                    agent.on_line(line)
        except (ConnectionError, OSError):
            pass
        finally:
            agent.connection_lost()
            log("END", b"connection closed")  # read_log waits for this over TCP
            writer.close()

    server = await asyncio.start_server(on_connection, "127.0.0.1", port, limit=64 * 1024 * 1024)
    write_stdout(b"FAKE_ACP_PORT=%d\n" % server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


async def main():
    if os.environ.get("FAKE_ACP_START") == "fail":
        sys.stderr.write("Offline mode requires a local model provider. Set FAKE_PROVIDER to configure one.\n")
        sys.exit(1)
    stubborn = os.environ.get("FAKE_ACP_STUBBORN", "")
    if stubborn == "term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--port" in sys.argv:
        await serve_tcp(int(sys.argv[sys.argv.index("--port") + 1]))
        return
    if os.environ.get("FAKE_ACP_BANNER"):
        write_stdout(os.environ["FAKE_ACP_BANNER"].encode() + b"\n")
    loop = asyncio.get_event_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    agent = Agent()
    while True:
        line = await reader.readline()
        if not line:
            break
        if line.strip():
            agent.on_line(line)
    agent.connection_lost(cancel_turns=False)
    if stubborn:
        while True:  # ignore EOF: only a signal ends us
            await asyncio.sleep(3600)
    os._exit(0)  # like the real agent: a prompt pending at EOF is never answered


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
