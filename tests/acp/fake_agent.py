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
  FAKE_ACP_START=fail-late close stdin first, then a moment later the same (the client's
                           write fails before the agent has exited)
  FAKE_ACP_STUBBORN=eof    ignore stdin EOF (needs SIGTERM); =term also ignores SIGTERM
  FAKE_ACP_LOG=path        append every line received (C>A) and sent (A>C)
  FAKE_ACP_IGNORE_CANCEL=1 keep running turns after session/cancel
  FAKE_ACP_STORE=path      keep sessions (and their history) in this JSON file, so a
                           later run can list and load them, as the real agent does
  FAKE_ACP_BANNER=text     write this line to stdout before any protocol
  FAKE_ACP_CAPS=bare       advertise no optional capability (no loadSession, no list)
  FAKE_ACP_CAPS=full       also session resume, delete, additionalDirectories, logout
  FAKE_ACP_CAPS=noload     as full, without loadSession
  FAKE_ACP_LATE_COMMANDS=s send the commands list only s seconds after session/new
  FAKE_ACP_NAMES=hostile   put terminal escape sequences in the agent's title and
                           version and in every session id
  FAKE_ACP_HANG=m1,m2      never answer these methods
  FAKE_ACP_AGENT_NAME=n    the agentInfo name (`Copilot`: as the real one)
  FAKE_ACP_AUTH=path       session/new needs a login (=prompt: session/prompt does,
  FAKE_ACP_AUTH_AT=prompt  instead), done once `path` exists: `fake_agent.py login`
                           (the terminal methods) or authenticate make it
  FAKE_ACP_LOGIN_STATUS=n  the login program's exit status (0)
  FAKE_ACP_PAGE=n          session/list in pages of n, each with the next's cursor
                           (`loop`: the same cursor for ever)
  FAKE_ACP_VERSION=json    answer initialize with this protocolVersion ("none": none)
  FAKE_ACP_DRIVE=C:=DIR    play an agent on Windows: its folders are `C:\\...`, found
                           under DIR here (as Wine maps a drive to a folder)

Hostile turns (an agent that does what a well-behaved one never would): FORGE answers
the running prompt with a forged string id first; BADUTF8 sends a request that is not
UTF-8 and reports the client's answer; ERRDATA fails the prompt with an error whose
`data` holds the reason (and control characters, and bulk); BIGANSWER answers the
prompt with one over-long line; IDLESS sends a permission request without an id; DEAF
answers, then reads nothing more; FLOOD sends fs reads (and junk lines) and stops
reading; SAYJSON "json string" sends that text as the message (an `Error:` with escape
sequences, say), STDERR "json string" writes it as a line on stderr.

How it runs: plain threads, no event loop (this is a test double; a Python that starts
an agent some 200 times per suite run pays for `import asyncio` each time). Each request
is answered on a thread of its own, but only one thread runs the agent's code at a time:
it holds `LOCK` and lets the others run only where it waits (`pause`), as a coroutine
would at an `await`. A new request's thread runs until its first wait before the next
line is read, so answers begin in the order requests came. A turn cancelled while it
waits stops there (`Cancelled`).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
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
HANG = set(filter(None, os.environ.get("FAKE_ACP_HANG", "").split(",")))
#: FAKE_ACP_NAMES=hostile: what the names the client shows carry (a new window title,
#: a cleared screen).
NAME_ESCAPES = "\x1b]0;PWNED\x07\x1b[2J" if os.environ.get("FAKE_ACP_NAMES") == "hostile" else ""

#: Held by the one thread that runs the agent's code (see the module's docstring).
LOCK = threading.Condition()
#: A process that sleeps a minute: `sleep`, which Windows lacks (there: this Python).
SLEEPER = ["sleep", "60"] if os.name == "posix" else [sys.executable, "-c", "import time; time.sleep(60)"]
#: The running thread's `Strand` and `Turn` (None on the reading thread).
CURRENT = threading.local()


class Cancelled(Exception):
    """The turn this thread runs was cancelled while it waited."""


class Turn:
    """One prompt's turn: cancelled by session/cancel, a newer prompt or session/close."""

    def __init__(self):
        self.cancelled = False
        self.done = False

    def cancel(self):
        self.cancelled = True
        LOCK.notify_all()


class Strand(threading.Thread):
    """A thread that runs `fn(*args)` holding LOCK; `start_now` returns once it first
    waits or ends (so strands begin in the order they are started)."""

    def __init__(self, fn, *args):
        super().__init__(daemon=True)
        self.fn, self.args = fn, args
        self.parked = False  # set when it first waits, or ends

    def run(self):
        with LOCK:
            CURRENT.strand = self
            try:
                self.fn(*self.args)
            finally:
                self.parked = True
                LOCK.notify_all()

    def start_now(self):
        self.start()
        LOCK.wait_for(lambda: self.parked)


def pause(seconds=None, until=None):
    """Wait, letting other strands run, until `until()` is true (True) or `seconds`
    pass (False); in a cancelled turn, raise Cancelled. Called holding LOCK."""
    strand = getattr(CURRENT, "strand", None)
    if strand is not None and not strand.parked:
        strand.parked = True
        LOCK.notify_all()
    turn = getattr(CURRENT, "turn", None)
    deadline = None if seconds is None else time.monotonic() + seconds
    while True:
        if turn is not None and turn.cancelled:
            raise Cancelled()
        if until is not None and until():
            return True
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return False
        LOCK.wait(left)


class Reply:
    """An answer awaited from the client."""

    def __init__(self):
        self.message = None

    def set(self, message):
        if self.message is None:
            self.message = message
            LOCK.notify_all()

    def wait(self, seconds=None):
        """The answer (None after `seconds` without one)."""
        pause(seconds, until=lambda: self.message is not None)
        return self.message


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
        # Which connection holds each session now: a connection that ends closes only
        # what it still holds (TCP: its end may be handled after the next client loaded
        # the session, each connection on a thread of its own).
        self.holders = {}
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


def local_path(path):
    """Where one of the agent's paths is on this machine (FAKE_ACP_DRIVE: `C:\\ws` is
    DIR/ws, and a POSIX path is not one of this agent's)."""
    drive = os.environ.get("FAKE_ACP_DRIVE")
    if not drive:
        return path
    letter, _, folder = drive.partition("=")
    if not path.upper().startswith(letter.upper() + "\\"):
        return ""  # (no folder here)
    return os.path.join(folder, *[part for part in path[len(letter) + 1:].split("\\") if part])


def config_options(session):
    options = [{"type": "select", "id": "mode", "name": "Mode", "category": "mode",
                "currentValue": session["mode"],
                "options": [{"value": m, "name": m.rsplit("#", 1)[1].title()} for m in MODES]},
               {"type": "select", "id": "allow_all", "name": "Allow All", "category": "permissions",
                "currentValue": session["allow_all"],
                "options": [{"value": "on", "name": "On"}, {"value": "off", "name": "Off"}]}]
    if session.get("brave") is not None:  # a boolean option: only to a client that takes them
        options.append({"type": "boolean", "id": "brave", "name": "Brave mode", "currentValue": session["brave"]})
    return options


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
        self.soon = []  # run right after the current answer is written

    def connection_lost(self, cancel_turns=True):
        for sid in self.mine:
            if STORE.holders.get(sid) is self:
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
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate travels only as a "\ud800" escape
            data = json.dumps(obj, separators=(",", ":")).encode("ascii")
        self.write_line(data + b"\n")

    def request(self, method, params):
        msg_id = self.next_id
        self.next_id += 1
        reply = self.waiting[msg_id] = Reply()
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return reply.wait()

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
            reply = self.waiting.pop(msg.get("id"), None)
            if reply is not None:
                reply.set(msg)
            return
        if msg.get("jsonrpc") != "2.0":
            if "id" in msg:
                self.send({"jsonrpc": "2.0", "id": msg["id"], "error": {
                    "code": -32600, "message": 'Invalid request: "jsonrpc" must be "2.0"'}})
            return
        if "id" in msg:
            Strand(self.answer, msg).start_now()
        elif msg["method"] == "session/cancel" and not os.environ.get("FAKE_ACP_IGNORE_CANCEL"):
            params = msg.get("params") or {}
            turn = self.turns.get(params.get("sessionId"))
            if turn is not None and not turn.done:
                turn.cancel()

    def answer(self, msg):
        method, params = msg["method"], msg.get("params") or {}
        if method in HANG:
            return  # never answered (FAKE_ACP_HANG)
        handler = getattr(self, "do_" + method.replace("/", "_"), None)
        if handler is None:
            self.send({"jsonrpc": "2.0", "id": msg["id"], "error": {
                "code": -32601, "message": '"Method not found": %s' % method, "data": {"method": method}}})
            return
        if method == "session/prompt":
            self.prompt_id = msg["id"]
        try:
            result = handler(params)
        except Ignore:
            return
        except Failure as exc:
            self.send({"jsonrpc": "2.0", "id": msg["id"], "error": exc.args[0]})
            return
        finally:
            STORE.save()
        self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        soon, self.soon = self.soon, []
        for fn in soon:
            fn()

    def session(self, params, open_only=True):
        sid = params.get("sessionId")
        session = self.sessions.get(sid)
        if session is None or (open_only and (session["closed"] or sid not in self.mine)):
            raise Failure({"code": -32602, "message": "Session %s not found" % sid, "data": {"sessionId": sid}})
        return session

    # ------------------------------------------------------------------ methods

    def do_initialize(self, params):
        self.client_capabilities = params.get("clientCapabilities")
        if os.environ.get("FAKE_ACP_CAPS") == "bare":
            return {"protocolVersion": 1, "agentCapabilities": {},
                    "agentInfo": {"name": "fake-bare", "version": "0.0.1"}, "authMethods": []}
        answer = {"protocolVersion": 1,
                "agentCapabilities": {"loadSession": True,
                                      "mcpCapabilities": {"http": True, "sse": True},
                                      "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                                      "sessionCapabilities": {"close": {}, "list": {}}},
                "agentInfo": {"name": os.environ.get("FAKE_ACP_AGENT_NAME", "fake"), "title": "Fake agent" + NAME_ESCAPES,
                              "version": "0.0.1" + NAME_ESCAPES},
                "authMethods": self.auth_methods(params),
                "_echo": {"clientCapabilities": params.get("clientCapabilities"),
                          "clientInfo": params.get("clientInfo")}}
        if os.environ.get("FAKE_ACP_CAPS") in ("full", "noload"):  # what Copilot does not offer (yet)
            answer["agentCapabilities"]["sessionCapabilities"].update(resume={}, delete={}, additionalDirectories={})
            answer["agentCapabilities"]["auth"] = {"logout": {}}
            answer["agentCapabilities"]["loadSession"] = os.environ["FAKE_ACP_CAPS"] == "full"
        version = os.environ.get("FAKE_ACP_VERSION")
        if version is not None:  # another protocol version, or ("none") none at all
            if version == "none":
                del answer["protocolVersion"]
            else:
                answer["protocolVersion"] = json.loads(version)
        return answer

    def do_authenticate(self, params):
        if params.get("methodId") != "fake-login":
            raise Failure({"code": -32602, "message": "unknown auth method"})
        if os.environ.get("FAKE_ACP_AUTH"):  # the agent's own login: done here
            with open(os.environ["FAKE_ACP_AUTH"], "w") as handle:
                handle.write("logged in\n")
        return {}

    def do_logout(self, params):
        full_only("logout")
        self.logged_out = True
        return {}

    def auth_methods(self, params):
        """With FAKE_ACP_AUTH, Copilot's terminal form first (as `copilot login`), the
        stable terminal form (only to a client that takes it), the agent's own."""
        agent_own = {"id": "fake-login", "name": "Log in"}
        if not os.environ.get("FAKE_ACP_AUTH"):
            return [agent_own]
        methods = [{"id": "fake-copilot", "name": "Log in with Fake CLI", "description": "Run `fake login`",
                    "_meta": {"terminal-auth": {"command": sys.executable, "args": [os.path.abspath(__file__),
                                                                                    "login"],
                                                "label": "Fake Login"}}}]
        if ((params.get("clientCapabilities") or {}).get("auth") or {}).get("terminal") is True:
            methods.append({"id": "fake-terminal", "name": "Log in in the terminal", "type": "terminal",
                            "args": ["login"], "env": {"FAKE_LOGIN_NAME": "tester"}})
        return methods + [agent_own]

    def need_login(self):
        if not logged_in() or getattr(self, "logged_out", False):
            raise Failure({"code": -32000, "message": "Authentication required"})

    def do_session_new(self, params):
        if os.environ.get("FAKE_ACP_AUTH_AT") != "prompt":
            self.need_login()
        cwd = params.get("cwd")
        if not isinstance(cwd, str):
            raise Failure({"code": -32602, "message": "Invalid params: cwd is required"})
        if not os.path.isdir(local_path(cwd)):
            raise Failure({"code": -32603, "message": "Directory does not exist or cannot be accessed: %s" % cwd})
        sid = str(uuid.uuid4()) + NAME_ESCAPES
        session = {"id": sid, "cwd": cwd, "closed": False, "title": None, "mode": MODES[0],
                   "additionalDirectories": params.get("additionalDirectories"),
                   "brave": False if ((self.client_capabilities or {}).get("session") or {}).get(
                       "configOptions", {}).get("boolean") is not None else None,
                   "allow_all": "off", "history": [], "tokens": 0, "updatedAt": "2026-01-01T00:00:00Z"}
        self.sessions[sid] = session
        self.mine.add(sid)
        STORE.holders[sid] = self
        late = os.environ.get("FAKE_ACP_LATE_COMMANDS")
        commands = {"sessionUpdate": "available_commands_update", "availableCommands": COMMANDS}
        if late:  # some agents send the list a moment after the answer
            def later():
                time.sleep(float(late))
                with LOCK:
                    self.update(sid, commands)
            threading.Thread(target=later, daemon=True).start()
            return self.session_result(session)
        # ACP.md §2: the commands list names the session before session/new answers.
        self.update(sid, commands)
        self.soon.append(lambda: self.update(sid, commands))
        return self.session_result(session)

    def session_result(self, session):
        return {"sessionId": session["id"], "configOptions": config_options(session),
                "modes": {"availableModes": [{"id": m, "name": m.rsplit("#", 1)[1].title()} for m in MODES],
                          "currentModeId": session["mode"]}}

    def do_session_load(self, params):
        session = self.reopen(params)
        if not any(u["sessionUpdate"] == "user_message_chunk" for u in session["history"]):
            raise Failure({"code": -32603, "message": "Internal error: Persisted event journal is unavailable"})
        history, session["history"] = session["history"], []
        for update in history:  # replayed before the answer (ACP.md §3.5)
            if update["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk",
                                           "tool_call", "tool_call_update"):
                self.update(session["id"], update)
        return self.reopened(session)

    def do_session_resume(self, params):
        """As session/load, without replaying the history (FAKE_ACP_CAPS=full only)."""
        full_only("session/resume")
        return self.reopened(self.reopen(params))

    def reopen(self, params):
        """The stored session `params` name, now this connection's."""
        sid = params.get("sessionId")
        session = self.sessions.get(sid)
        if session is None:
            raise Failure({"code": -32002, "message": "Resource not found: Session %s not found" % sid})
        if not session["closed"] and sid in self.mine:
            raise Failure({"code": -32602, "message": "Session %s is already loaded" % sid})
        return session

    def reopened(self, session):
        session["closed"] = False
        self.mine.add(session["id"])
        STORE.holders[session["id"]] = self
        result = self.session_result(session)
        del result["sessionId"]
        return result

    def do_session_delete(self, params):
        full_only("session/delete")
        sid = params.get("sessionId")
        if self.sessions.pop(sid, None) is None:
            raise Failure({"code": -32002, "message": "Resource not found: Session %s not found" % sid})
        return {}

    def do_session_list(self, params):
        cwd = params.get("cwd")
        listed = [{"sessionId": s["id"], "cwd": s["cwd"], "title": s["title"], "updatedAt": s["updatedAt"]}
                  for s in self.sessions.values() if cwd is None or s["cwd"] == cwd]
        page = os.environ.get("FAKE_ACP_PAGE")
        if not page:
            return {"sessions": listed}
        if page == "loop":  # a hostile agent: the same cursor for ever
            return {"sessions": listed[:1], "nextCursor": "again"}
        size, cursor = int(page), params.get("cursor")
        start = 0
        if cursor is not None:
            if not (isinstance(cursor, str) and cursor.startswith("from:")):
                raise Failure({"code": -32602, "message": "Invalid cursor"})
            start = int(cursor[5:])
        result = {"sessions": listed[start:start + size]}
        if start + size < len(listed):
            result["nextCursor"] = "from:%d" % (start + size)
        return result

    def do_session_close(self, params):
        session = self.session(params)
        session["closed"] = True
        turn = self.turns.get(session["id"])
        if turn is not None and not turn.done:
            turn.cancel()
        return {}

    def do_session_set_mode(self, params):
        session = self.session(params)
        if params.get("modeId") not in MODES:
            raise Failure({"code": -32602, "message": "Invalid mode '%s'." % params.get("modeId")})
        session["mode"] = params["modeId"]
        self.update(session["id"], {"sessionUpdate": "current_mode_update", "currentModeId": session["mode"]})
        return {}

    def do_session_set_config_option(self, params):
        session = self.session(params)
        key, value = params.get("configId"), params.get("value")
        if key == "brave" and session.get("brave") is not None and params.get("type") == "boolean" \
                and isinstance(value, bool):
            session["brave"] = value
        elif key == "allow_all" and value in ("on", "off"):
            session["allow_all"] = value
        elif key == "mode" and value in MODES:
            session["mode"] = value
        else:
            raise Failure({"code": -32602, "message": "Invalid config option %s=%s" % (key, value)})
        self.update(session["id"], {"sessionUpdate": "config_option_update",
                                    "configOptions": config_options(session)})
        return {"configOptions": config_options(session)}

    def do_session_prompt(self, params):
        if os.environ.get("FAKE_ACP_AUTH_AT") == "prompt":
            self.need_login()
        session = self.session(params)
        sid = session["id"]
        blocks = params.get("prompt")
        self.prompt_blocks = blocks if isinstance(blocks, list) else []
        text = ""
        if isinstance(blocks, list):
            text = "".join(b.get("text", "") for b in blocks if isinstance(b, dict))
        previous = self.turns.get(sid)
        if previous is not None and not previous.done:
            previous.cancel()  # ACP.md §3.4: a second prompt cancels the first
        turn = CURRENT.turn = self.turns[sid] = Turn()
        try:
            return self.turn(session, text)
        except Cancelled:  # session/cancel, a newer prompt, or session/close
            return {"stopReason": "cancelled"}
        finally:
            turn.done = True
            CURRENT.turn = None

    def do__fake_echo(self, params):
        pause(float(params.get("delay", 0)))
        return {"value": params.get("value")}

    def do__fake_ignore(self, params):
        raise Ignore()

    # ------------------------------------------------------------------ turns

    def usage(self, session):
        session["tokens"] += 100
        n = session["tokens"]
        return {"inputTokens": n, "outputTokens": n // 10, "totalTokens": n + n // 10}

    def turn(self, session, text):
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
        return handler(session, rest)

    def permission(self, sid, call):
        response = self.request("session/request_permission",
                                      {"sessionId": sid, "toolCall": call, "options": OPTIONS})
        if "error" in response:
            return "error"
        outcome = (response.get("result") or {}).get("outcome") or {}
        if outcome.get("outcome") == "selected":
            return outcome.get("optionId")
        return outcome.get("outcome") or "invalid"

    def turn_edit(self, session, rest):
        sid = session["id"]
        path = os.path.join(session["cwd"], rest or "hello.txt")
        call_id = "call_%s" % uuid.uuid4().hex[:12]
        old, new = "line two", "line two (edited)"
        self.chunk(sid, "I will edit it.")
        diff = [{"type": "diff", "path": path, "oldText": old, "newText": new}]
        self.update(sid, {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": "Editing " + path,
                          "kind": "edit", "status": "pending", "locations": [{"path": path}],
                          "rawInput": {"path": path, "old_str": old, "new_str": new}, "content": diff})
        choice = self.permission(sid, {
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

    def turn_perm2(self, session, rest):
        """Two permission requests at once, then wait for a cancel."""
        sid = session["id"]
        for n in (1, 2):
            Strand(self.permission, sid, {"toolCallId": "call_p%d" % n, "title": "Run %d" % n,
                                          "kind": "execute", "status": "pending",
                                          "rawInput": {"command": "true"}}).start_now()
        pause(60)
        return {"stopReason": "end_turn"}

    def turn_slow(self, session, rest):
        self.chunk(session["id"], "working...")
        pause(float(rest) if rest else 60)
        self.chunk(session["id"], "slow done")
        return {"stopReason": "end_turn", "usage": self.usage(session)}

    def turn_slowpid(self, session, rest):
        """Report our pid, then a slow turn (shutdown tests check the pid is gone)."""
        self.chunk(session["id"], "AGENT-PID %d\n" % os.getpid())
        return self.turn_slow(session, rest)

    def turn_run(self, session, rest):
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

    def turn_runslow(self, session, rest):
        sid = session["id"]
        self.update(sid, {"sessionUpdate": "tool_call", "toolCallId": "call_long", "title": "sleep 60",
                          "kind": "execute", "status": "pending", "rawInput": {"command": "sleep 60"}})
        self.update(sid, {"sessionUpdate": "tool_call_update", "toolCallId": "call_long",
                          "status": "in_progress"})
        pause(60)
        return {"stopReason": "end_turn"}

    def turn_msgids(self, session, rest):
        """Two agent messages whose chunks interleave, told apart by `messageId` (and a
        thought between them)."""
        sid = session["id"]
        for text, message_id in (("One ", "m1"), ("Two ", "m2"), ("one.", "m1"), ("two.", "m2")):
            self.update(sid, {"sessionUpdate": "agent_message_chunk", "messageId": message_id,
                              "content": {"type": "text", "text": text}})
        self.update(sid, {"sessionUpdate": "agent_thought_chunk", "messageId": "t1",
                          "content": {"type": "text", "text": "hmm"}})
        self.update(sid, {"sessionUpdate": "agent_message_chunk", "messageId": "m1",
                          "content": {"type": "text", "text": " Still one."}})
        return {"stopReason": "end_turn"}

    def turn_blocks(self, session, rest):
        """Report the prompt's content blocks: type, MIME type, URI, and how much each
        carries (text, or decoded base64 data)."""
        import base64  # (only this turn needs it)
        shown = []
        for block in self.prompt_blocks:
            inner = block.get("resource") if block.get("type") == "resource" else block
            carried = inner.get("text")
            if carried is None:
                carried = base64.b64decode(inner.get("data") or inner.get("blob") or "")
            shown.append({"type": block.get("type"), "mimeType": inner.get("mimeType"), "uri": inner.get("uri"),
                          "size": len(carried)})
        self.chunk(session["id"], "BLOCKS-RESULT " + json.dumps(shown))
        return {"stopReason": "end_turn"}

    def turn_stop(self, session, rest):
        """`STOP reason`: a little text, then the turn ends with that stop reason
        (`-` : none at all)."""
        self.chunk(session["id"], "stopping")
        return {} if rest == "-" else {"stopReason": rest}

    def turn_plan(self, session, rest):
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

    def turn_error(self, session, rest):
        sid = session["id"]
        self.update(sid, {"sessionUpdate": "usage_update", "used": 70308, "size": 64000})
        self.chunk(sid, "Info: retrying\n")
        self.chunk(sid, "Error: Request exceeds the model's prompt budget ")
        self.chunk(sid, "(70308 tokens; limit 64000).")
        return {"stopReason": "end_turn"}

    def turn_crash(self, session, rest):
        self.chunk(session["id"], "about to crash")
        sys.stderr.write("fatal: simulated crash\n")
        sys.stderr.flush()
        pause(0.05)
        os._exit(3)

    def turn_signal(self, session, rest):
        """Die by a signal mid-turn (SIGKILL: no chance to say anything)."""
        self.chunk(session["id"], "about to be killed")
        sys.stderr.write("fatal: killing myself\n")
        sys.stderr.flush()
        pause(0.05)
        os.kill(os.getpid(), signal.SIGKILL)

    def turn_crashhold(self, session, rest):
        """Crash, leaving a process in another session that holds stdout and stderr open
        (the client must not wait for it)."""
        self.chunk(session["id"], "about to crash")
        import subprocess  # (only the turns that start a process need it)
        # (stdout and stderr named: on Windows only handles named are inherited)
        child = subprocess.Popen(SLEEPER, start_new_session=True, stdout=1, stderr=2)
        self.chunk(session["id"], "HOLDER %d\n" % child.pid)
        sys.stderr.write("fatal: crashed, a child still holds the pipes\n")
        sys.stderr.flush()
        pause(0.05)
        os._exit(4)

    def turn_hangup(self, session, rest):
        """TCP: close this connection mid-turn (`RESET` style: `HANGUP reset`)."""
        self.chunk(session["id"], "hanging up")
        pause(0.05)
        self.hang_up(rest == "reset")
        pause(60)

    def turn_chunks(self, session, rest):
        """`CHUNKS n`: one message streamed as n word-sized chunks, "w0 w1 ...", as a
        model's pieces arrive (ACP.md §3.3)."""
        for n in range(int(rest)):
            self.chunk(session["id"], "w%d " % n)
        return {"stopReason": "end_turn"}

    def turn_sayjson(self, session, rest):
        """`SAYJSON "json string"`: exactly that text as the message (escapes and all)."""
        self.chunk(session["id"], json.loads(rest))
        return {"stopReason": "end_turn"}

    def turn_stderr(self, session, rest):
        """`STDERR "json string"`: that text as a line on our stderr."""
        sys.stderr.write(json.loads(rest) + "\n")
        sys.stderr.flush()
        return {"stopReason": "end_turn"}

    def turn_unicode(self, session, rest):
        self.chunk(session["id"], "a\u2028b\u2029c \u65e5\u672c \U0001F30D \"q\" \\ \t\r\x0c end")
        return {"stopReason": "end_turn", "usage": self.usage(session)}

    def turn_big(self, session, rest):
        size = int(rest) if rest else 5 * 1024 * 1024
        self.chunk(session["id"], "B" * (size - 3) + "END")
        return {"stopReason": "end_turn", "usage": self.usage(session)}

    def turn_diff(self, session, rest):
        """`DIFF {"oldText": ..., "newText": ...}`: a completed edit carrying that diff."""
        block = dict(json.loads(rest), type="diff", path=os.path.join(session["cwd"], "f.txt"))
        self.update(session["id"], {"sessionUpdate": "tool_call", "toolCallId": "call_d", "title": "Editing f.txt",
                                    "kind": "edit", "status": "completed", "content": [block]})
        return {"stopReason": "end_turn"}

    def turn_biganswer(self, session, rest):
        """The prompt's own answer as one over-long line (the turn waits for it)."""
        size = int(rest) if rest else 5 * 1024 * 1024
        return {"stopReason": "end_turn", "_pad": "A" * size}

    def turn_forge(self, session, rest):
        """Answer the running prompt with its id as a string (not the client's id),
        then work on and answer for real."""
        forged = {"jsonrpc": "2.0", "id": str(self.prompt_id), "result": {"stopReason": "forged"}}
        self.send(forged)
        pause(0.3)
        self.chunk(session["id"], "after the forgery")
        return {"stopReason": "end_turn"}

    def turn_deaf(self, session, rest):
        """Answer this prompt, then read nothing more (the client's writes fill the pipe)."""
        self.deaf = True
        return {"stopReason": "end_turn"}

    def turn_flood(self, session, rest):
        """`FLOOD n path [junk]`: n fs/read_text_file requests for `path` sent at once, no
        answer awaited, then read nothing more (as DEAF); `junk` more lines that are not
        JSON follow (each asks the client for a -32700 answer it cannot deliver). The
        turn still ends, and reports that it could write all of it."""
        words = rest.split()
        count, path = int(words[0]), words[1]
        junk = int(words[2]) if len(words) > 2 else 0
        for _ in range(count):
            msg_id = self.next_id
            self.next_id += 1
            self.send({"jsonrpc": "2.0", "id": msg_id, "method": "fs/read_text_file",
                       "params": {"sessionId": session["id"], "path": path}})
        self.deaf = True
        for n in range(junk):
            self.write_line(b"junk line %d, not JSON\n" % n)
        self.chunk(session["id"], "FLOODED %d %d" % (count, junk))
        return {"stopReason": "end_turn"}

    def stay_deaf(self):
        while getattr(self, "deaf", False):
            time.sleep(3600)

    def turn_idless(self, session, rest):
        """A permission request sent as a notification (no id: it can get no answer),
        then an ordinary request and message text: a client must read on."""
        sid = session["id"]
        self.send({"jsonrpc": "2.0", "method": "session/request_permission",
                   "params": {"sessionId": sid, "toolCall": {"toolCallId": "call_idless", "title": "Idless"},
                              "options": OPTIONS}})
        answer = self.request("session/request_permission",
                              {"sessionId": sid, "toolCall": {"toolCallId": "call_real", "title": "Real"},
                               "options": OPTIONS})
        self.chunk(sid, "read on: " + json.dumps(answer.get("result")))
        return {"stopReason": "end_turn"}

    def turn_badutf8(self, session, rest):
        """A request whose bytes are not UTF-8: JSON-RPC wants -32700 with id null."""
        reply = self.waiting[None] = Reply()
        self.write_line(b'{"jsonrpc":"2.0","id":77,"method":"fs/read_text_file","params":{"path":"/\xff"}}\n')
        answer = reply.wait(5.0)
        if answer is not None:
            self.chunk(session["id"], "PARSE-ANSWER " + json.dumps(answer))
        else:
            self.chunk(session["id"], "NO-ANSWER")
        return {"stopReason": "end_turn"}

    def turn_errdata(self, session, rest):
        raise Failure({"code": -32603, "message": "Internal error",
                       "data": {"details": "Query closed before response received\x1b[2J",
                                "bulk": "x" * 5000}})

    def turn_junk(self, session, rest):
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

    def request_then_cancel(self, method, params, after=0.3, name=None):
        """Send a request, give up on it after `after` seconds (`$/cancel_request`, as
        an agent cancelling a turn does) and return the answer that then comes.
        `name(id)` is the requestId the cancel names (the request's own id by default)."""
        msg_id = self.next_id
        self.next_id += 1
        reply = self.waiting[msg_id] = Reply()
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        pause(after)
        self.send({"jsonrpc": "2.0", "method": "$/cancel_request",
                   "params": {"requestId": name(msg_id) if name else msg_id}})
        return reply.wait(10.0) or {"no": "answer"}

    def turn_cancelreq(self, session, rest, name=None):
        """`CANCELREQ method {params}`: a request given up on after 0.3 s; report its answer."""
        method, _, params = rest.partition(" ")
        params = json.loads(params) if params.strip() else {}
        params.setdefault("sessionId", session["id"])
        response = self.request_then_cancel(method, params, name=name)
        response.pop("jsonrpc", None)
        self.chunk(session["id"], "RAW-RESULT " + json.dumps(response))
        return {"stopReason": "end_turn"}

    def turn_cancelwrong(self, session, rest):
        """`CANCELWRONG method {params}`: as CANCELREQ, but the cancel names the id as a
        string (`"3"` for request 3), which is not the request's id."""
        return self.turn_cancelreq(session, rest, name=str)

    def turn_notify(self, session, rest):
        """`NOTIFY method {params}`: send the client that notification."""
        method, _, params = rest.partition(" ")
        self.send({"jsonrpc": "2.0", "method": method, "params": json.loads(params) if params.strip() else {}})
        return {"stopReason": "end_turn"}

    def turn_raw(self, session, rest):
        """`RAW method {params}`: send any request to the client, report its answer."""
        method, _, params = rest.partition(" ")
        params = json.loads(params) if params.strip() else {}
        params.setdefault("sessionId", session["id"])
        response = self.request(method, params)
        response.pop("jsonrpc", None)
        response.pop("id", None)
        self.chunk(session["id"], "RAW-RESULT " + json.dumps(response))
        return {"stopReason": "end_turn"}

    def turn_term(self, session, rest):
        """`TERM {"create": {...}, "steps": [...]}`: drive terminal/* and report."""
        plan = json.loads(rest)
        create = dict(plan["create"], sessionId=session["id"])
        results = [self.request("terminal/create", create)]
        term = (results[0].get("result") or {}).get("terminalId")
        for step in plan.get("steps", []):
            if step.startswith("sleep:"):
                pause(float(step[6:]))
                continue
            if step.startswith("until:"):  # ask for the output until it shows this text (30 s at most)
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    answer = self.request("terminal/output", {"sessionId": session["id"], "terminalId": term})
                    if step[6:] in ((answer.get("result") or {}).get("output") or ""):
                        break
                    pause(0.05)
                continue
            if step == "cancelwait":  # a wait for exit given up on after 0.3 s
                results.append(self.request_then_cancel("terminal/wait_for_exit",
                                                        {"sessionId": session["id"], "terminalId": term}))
                continue
            method = {"output": "terminal/output", "wait": "terminal/wait_for_exit",
                      "kill": "terminal/kill", "release": "terminal/release"}[step]
            results.append(self.request(method, {"sessionId": session["id"], "terminalId": term}))
        for r in results:
            r.pop("jsonrpc", None)
            r.pop("id", None)
        self.chunk(session["id"], "TERM-RESULT " + json.dumps(results))
        return {"stopReason": "end_turn"}

    def turn_spawn(self, session, rest):
        """Start a grandchild in our process group and report its pid (orphan tests)."""
        import subprocess  # (only the turns that start a process need it)
        child = subprocess.Popen(SLEEPER)
        self.chunk(session["id"], "PID %d" % child.pid)
        return {"stopReason": "end_turn"}


class Failure(Exception):
    pass


def full_only(method):
    """A method Copilot does not have (`-32601`), unless FAKE_ACP_CAPS=full (or noload)."""
    if os.environ.get("FAKE_ACP_CAPS") not in ("full", "noload"):
        raise Failure({"code": -32601, "message": '"Method not found": %s' % method, "data": {"method": method}})


class Ignore(Exception):
    pass


def serve_tcp(port):
    """TCP mode: one `Agent` per connection, each read on a thread; runs until killed."""
    import socket  # (only TCP mode needs these)
    import struct

    def serve(conn):
        def write(data):
            try:
                conn.sendall(data)
            except OSError:  # the client went away: what is left to say is dropped
                pass

        def hang_up(reset):
            # The reading thread wakes to end of input and closes the socket: with
            # SO_LINGER 0 that close sends RST instead of FIN.
            if reset:
                linger = struct.pack("ii" if os.name == "posix" else "HH", 1, 0)  # (u_short on Windows)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                if os.name == "nt":
                    # A shutdown does not wake a thread blocked reading on Windows; a close
                    # of the socket does (the reader then fails and ends the connection).
                    socket.close(conn.detach())
                    return
            try:
                conn.shutdown(socket.SHUT_RD if reset else socket.SHUT_RDWR)
            except OSError:
                pass

        agent = Agent(write, hang_up)
        reader = conn.makefile("rb")
        try:
            for line in iter(reader.readline, b""):
                if line.strip():
                    with LOCK:
                        agent.on_line(line)
                agent.stay_deaf()
        except (ConnectionError, OSError):
            pass
        finally:
            with LOCK:
                agent.connection_lost()
                log("END", b"connection closed")  # read_log waits for this over TCP
            reader.close()
            conn.close()

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    write_stdout(b"FAKE_ACP_PORT=%d\n" % listener.getsockname()[1])
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def login():
    """`fake_agent.py login`: the login program of the terminal methods (FAKE_ACP_AUTH):
    says who logs in, marks the login done, exits with FAKE_ACP_LOGIN_STATUS (0)."""
    status = int(os.environ.get("FAKE_ACP_LOGIN_STATUS", "0"))
    write_stdout(("Logging in as %s (terminal: %s)\n" % (os.environ.get("FAKE_LOGIN_NAME", "someone"),
                                                      "yes" if os.isatty(0) else "no")).encode())
    if status == 0:
        with open(os.environ["FAKE_ACP_AUTH"], "w") as handle:
            handle.write("logged in\n")
    sys.exit(status)


def logged_in():
    """FAKE_ACP_AUTH: sessions need a login, done once that file exists."""
    path = os.environ.get("FAKE_ACP_AUTH")
    return not path or os.path.exists(path)


def main():
    if sys.argv[1:] == ["login"]:
        login()
    if os.environ.get("FAKE_ACP_START") == "fail-late":
        os.close(0)
        time.sleep(2)
    if os.environ.get("FAKE_ACP_START") in ("fail", "fail-late"):
        sys.stderr.write("Offline mode requires a local model provider. Set FAKE_PROVIDER to configure one.\n")
        sys.exit(1)
    stubborn = os.environ.get("FAKE_ACP_STUBBORN", "")
    if stubborn == "term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--port" in sys.argv:
        serve_tcp(int(sys.argv[sys.argv.index("--port") + 1]))
        return
    if os.environ.get("FAKE_ACP_BANNER"):
        write_stdout(os.environ["FAKE_ACP_BANNER"].encode() + b"\n")
    agent = Agent()
    for line in iter(sys.stdin.buffer.readline, b""):
        if line.strip():
            with LOCK:
                agent.on_line(line)
        agent.stay_deaf()
    with LOCK:
        agent.connection_lost(cancel_turns=False)
    if stubborn:
        while True:  # ignore EOF: only a signal ends us
            time.sleep(3600)
    os._exit(0)  # like the real agent: a prompt pending at EOF is never answered


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
