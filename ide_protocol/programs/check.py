"""`python3 -m ide_protocol check [--lock FILE | FOLDER]`: a conformance checker.

It runs, against a running IDE-side server, every requirement of PROTOCOL.md that a
client can observe, and prints one line per check — PASS, FAIL, WARN or SKIP — with the
evidence on failure and the PROTOCOL.md section that states the rule, so that someone
writing an IDE plugin in another language knows exactly what to fix. `--json` prints a
machine-readable report; the exit status is 1 when any check FAILs.

Each check is a small coroutine registered in `CHECKS` (decorator `@check`), run on a
fresh `CheckContext`, so a test can run exactly one check (and a test double with one
fault can prove that this check FAILs). Checks that need a person (accepting a diff)
are skipped unless `--with-diff`/`--interactive` is given.

The HTTP is spoken through `client.ClientConnection` (hand-made requests, incremental
responses): there is one HTTP client in this package, not two.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import stat
import sys
import uuid
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ..wire import http11, jsonrpc, sse
from ..common import lockfile, tools
from ..client import (DEFAULT_CONNECT_TIMEOUT, ClientConnection, ClientError, ClientResponse, IdeTimeout,
                     ServerGone, cli_headers)
from ..common.lockfile import LockInfo

PASS, FAIL, WARN, SKIP = "PASS", "FAIL", "WARN", "SKIP"
DEFAULT_CHECK_TIMEOUT = 15.0
INTERACTIVE_TIMEOUT = 600.0
TAB_PREFIX = "[ide-check]"
_UUID_LOCK = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.lock\Z")

# --------------------------------------------------------------------- outcomes


class Outcome(Exception):
    """Raised by a check to end with a status other than PASS."""

    status = FAIL

    def __init__(self, message: str, evidence: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.evidence = evidence


class Fail(Outcome):
    status = FAIL


class Warn(Outcome):
    status = WARN


class Skip(Outcome):
    status = SKIP


class Result:
    """The outcome of one check."""

    __slots__ = ("name", "status", "message", "section", "title", "evidence")

    def __init__(self, name: str, status: str, message: str, section: str, title: str,
                 evidence: Optional[str] = None) -> None:
        self.name = name
        self.status = status
        self.message = message
        self.section = section
        self.title = title
        self.evidence = evidence

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "status": self.status, "message": self.message, "section": self.section,
                "title": self.title, "evidence": self.evidence}

    def line(self) -> str:
        text = "%-4s %-32s %s (PROTOCOL.md %s)" % (self.status, self.name, self.message or self.title, self.section)
        if self.evidence and self.status in (FAIL, WARN):
            text += "\n" + "\n".join("       | " + l for l in self.evidence.splitlines()[:40])
        return text

    def __repr__(self) -> str:
        return "Result(%r, %r, %r)" % (self.name, self.status, self.message)


CheckFunc = Callable[["CheckContext"], Awaitable[Optional[str]]]


class Check:
    """A registered check: `func(ctx)` returns None or a note (PASS) or raises an Outcome."""

    __slots__ = ("name", "section", "title", "func", "interactive")

    def __init__(self, name: str, section: str, title: str, func: CheckFunc, interactive: bool) -> None:
        self.name = name
        self.section = section
        self.title = title
        self.func = func
        self.interactive = interactive


CHECKS: List[Check] = []


def check(name: str, section: str, title: str, interactive: bool = False) -> Callable[[CheckFunc], CheckFunc]:
    """Register a check (in definition order, which is the report order)."""

    def register(func: CheckFunc) -> CheckFunc:
        CHECKS.append(Check(name, section, title, func, interactive))
        return func

    return register


def get_check(name: str) -> Check:
    for c in CHECKS:
        if c.name == name:
            return c
    raise KeyError(name)


# ---------------------------------------------------------------------- context


class Reply:
    """A complete answer: status, headers, body, and the SSE events / JSON-RPC
    messages decoded from it (best effort; `decode_error` says what failed)."""

    def __init__(self, response: ClientResponse, body: bytes, request_line: str) -> None:
        self.response = response
        self.status = response.status
        self.reason = response.reason
        self.headers = response.headers
        self.body = body
        self.request_line = request_line
        self.events: List[sse.SSEEvent] = []
        self.messages: List[Any] = []
        self.decode_error: Optional[str] = None
        if response.is_sse:
            self.events = sse.SSEDecoder().feed(body + b"\n\n")
            for event in self.events:
                try:
                    self.messages.append(jsonrpc.loads(event.data))
                except jsonrpc.JsonRpcError:
                    self.decode_error = "SSE data is not JSON: %r" % event.data[:200]
        elif body.strip():
            try:
                self.messages.append(jsonrpc.loads(body))
            except jsonrpc.JsonRpcError:
                self.decode_error = "body is not JSON"

    @property
    def content_type(self) -> str:
        return self.response.content_type

    def message(self) -> Any:
        """The JSON-RPC message carried (the first one)."""
        return self.messages[0] if self.messages else None

    def answer(self, request_id: Any) -> Optional[Dict[str, Any]]:
        for m in self.messages:
            if isinstance(m, dict) and m.get("id") == request_id and ("result" in m or "error" in m):
                return m
        return None

    def evidence(self) -> str:
        lines = ["> " + self.request_line, "< HTTP/%s %d %s" % (self.response.http_version, self.status, self.reason)]
        for k, v in self.headers:
            lines.append("< %s: %s" % (k, v))
        text = self.body.decode("utf-8", "replace")
        if text:
            lines.append("< " + (text if len(text) <= 600 else text[:600] + "…"))
        return "\n".join(lines)


def _shape(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 600 else text[:600] + "…"


class CheckContext:
    """What a check works with: the lock, raw requests, sessions, tool calls.

    Everything opened here (connections, sessions) is closed by `cleanup()`, which the
    runner calls after each check.
    """

    def __init__(self, lock: LockInfo, raw_lock: Optional[Dict[str, Any]] = None, *,
                 timeout: float = DEFAULT_CHECK_TIMEOUT, interactive: bool = False,
                 prompt: Optional[Callable[[str], None]] = None) -> None:
        self.lock = lock
        self.raw_lock = raw_lock
        self.timeout = timeout
        self.interactive = interactive
        self.prompt = prompt or (lambda text: print(text, file=sys.stderr, flush=True))
        self.client_session_id = str(uuid.uuid4())
        self._conns: List[ClientConnection] = []
        self._sessions: List[str] = []
        self._shared: Optional[str] = None
        self._ids = 100

    # -- connections and raw requests

    async def connect(self) -> ClientConnection:
        conn = await ClientConnection.open(self.lock.socket_path, DEFAULT_CONNECT_TIMEOUT)
        self._conns.append(conn)
        return conn

    def headers(self, method: str = "POST", session: Optional[str] = None, *, auth: bool = True,
                authorization: Optional[str] = None, extra: Sequence[Tuple[str, str]] = ()) -> List[Tuple[str, str]]:
        """CLI-like headers (PROTOCOL.md §2); `auth=False` drops the lock's headers,
        `authorization` replaces the nonce."""
        lock_headers = dict(self.lock.headers) if auth else {}
        if authorization is not None:
            lock_headers = {k: v for k, v in lock_headers.items() if k.lower() != "authorization"}
            lock_headers["Authorization"] = authorization
        if method == "POST":
            h = cli_headers(lock_headers, self.client_session_id, mcp_session_id=session)
        elif method == "GET":
            h = cli_headers(lock_headers, self.client_session_id, accept="text/event-stream", content_type=None,
                            mcp_session_id=session)
        else:
            h = cli_headers(lock_headers, self.client_session_id, accept=None, content_type=None,
                            mcp_session_id=session)
        return h[:-2] + list(extra) + h[-2:]  # Host and Connection stay last

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    async def send(self, method: str, body: Union[None, bytes, Dict[str, Any], List[Any]] = None, *,
                   session: Optional[str] = None, headers: Optional[List[Tuple[str, str]]] = None,
                   target: str = "/mcp", conn: Optional[ClientConnection] = None, chunked: bool = True,
                   timeout: Optional[float] = None) -> Reply:
        """One complete exchange (the body is read to its end)."""
        if conn is None:
            conn = await self.connect()
        if headers is None:
            headers = self.headers(method, session)
        data = body if isinstance(body, bytes) or body is None else jsonrpc.dumps(body)
        response = await conn.request(method, target, headers, data, chunked=chunked,
                                      timeout=self.timeout if timeout is None else timeout)
        payload = await response.read_body(self.timeout if timeout is None else timeout)
        line = "%s %s" % (method, target)
        if isinstance(body, dict):
            line += " " + (body.get("method") or "") if isinstance(body.get("method"), str) else ""
        return Reply(response, payload, line)

    async def rpc(self, method: str, params: Any = None, *, session: Optional[str] = None,
                  notification: bool = False, **kwargs: Any) -> Tuple[Reply, Any]:
        """POST a JSON-RPC request (or notification); returns the reply and its id."""
        request_id = None if notification else self.next_id()
        message = (jsonrpc.notification(method, params) if notification
                   else jsonrpc.request(request_id, method, params))
        return await self.send("POST", message, session=session, **kwargs), request_id

    # -- sessions

    async def initialize(self, version: str = "2025-11-25", *, chunked: bool = True,
                         conn: Optional[ClientConnection] = None) -> Tuple[Reply, Any]:
        reply, rid = await self.rpc("initialize", {"protocolVersion": version, "capabilities": {},
                                                   "clientInfo": {"name": "ide-check", "version": "1"}},
                                    chunked=chunked, conn=conn)
        sid = reply.headers.get("mcp-session-id")
        if sid:
            self._sessions.append(sid)
        return reply, rid

    async def new_session(self) -> str:
        """initialize + notifications/initialized; Fail when that handshake fails (§3)."""
        # A fresh X-Copilot-Session-Id per session: servers may reuse it as the session
        # id (VS Code does) and answer 409 to a second live session with it.
        self.client_session_id = str(uuid.uuid4())
        reply, rid = await self.initialize()
        sid = reply.headers.get("mcp-session-id")
        answer = reply.answer(rid)
        if reply.status != 200 or not sid or answer is None or "result" not in answer:
            raise Fail("cannot open a session: initialize failed (§3)", reply.evidence())
        note, _ = await self.rpc("notifications/initialized", session=sid, notification=True)
        if note.status not in (200, 202):
            raise Fail("cannot open a session: notifications/initialized answered %d" % note.status, note.evidence())
        return sid

    async def session(self) -> str:
        if self._shared is None:
            self._shared = await self.new_session()
        return self._shared

    async def call(self, method: str, params: Any = None, session: Optional[str] = None,
                   timeout: Optional[float] = None) -> Tuple[Reply, Dict[str, Any]]:
        """A request inside a session that must get a JSON-RPC answer (Fail otherwise)."""
        sid = session or await self.session()
        reply, rid = await self.rpc(method, params, session=sid, timeout=timeout)
        answer = reply.answer(rid)
        if reply.status != 200 or answer is None:
            raise Fail("%s: no JSON-RPC answer in a 200 response" % method, reply.evidence())
        return reply, answer

    async def tool(self, name: str, arguments: Optional[Dict[str, Any]] = None, session: Optional[str] = None,
                   timeout: Optional[float] = None) -> Tuple[Reply, Any]:
        """Call a tool; returns the reply and the decoded JSON of its text result.
        Fail when the result is not `{"content":[{"type":"text","text":<JSON>}]}` (§4)."""
        sid = session or await self.session()
        reply, rid = await self.rpc("tools/call", {"name": name, "arguments": arguments or {}}, session=sid,
                                    timeout=timeout)
        return reply, tool_value(reply, rid, name)

    async def start_tool(self, name: str, arguments: Dict[str, Any], session: str) -> "PendingCall":
        """Send a tools/call on its own connection without waiting (a blocking open_diff)."""
        conn = await self.connect()
        rid = self.next_id()
        data = jsonrpc.dumps(jsonrpc.request(rid, "tools/call", {"name": name, "arguments": arguments}))
        await conn.send(http11.write_request("POST", "/mcp", self.headers("POST", session), data, chunked=True))
        return PendingCall(self, conn, rid, name)

    async def delete(self, session: str, conn: Optional[ClientConnection] = None) -> Reply:
        return await self.send("DELETE", None, session=session, conn=conn)

    async def cleanup(self) -> None:
        for sid in self._sessions:
            try:
                await asyncio.wait_for(self.delete(sid), 5)
            except (ClientError, OSError, asyncio.TimeoutError, Outcome):
                pass
        for conn in self._conns:
            conn.close()

    def scratch_path(self) -> str:
        """A file that does not exist, inside the workspace (a 'new file' diff, §4)."""
        folder = self.lock.workspace_folders[0] if self.lock.workspace_folders else os.getcwd()
        return os.path.join(folder, ".ide-check-%s.txt" % uuid.uuid4().hex[:8])


def tool_value(reply: Reply, rid: Any, name: str) -> Any:
    """The JSON inside a tool result, or Fail (PROTOCOL.md §4: every result is
    `{"content":[{"type":"text","text":"<JSON>"}]}`, a failure has `isError: true`)."""
    answer = reply.answer(rid)
    if reply.status != 200 or answer is None:
        raise Fail("%s: no JSON-RPC answer in a 200 response" % name, reply.evidence())
    if "error" in answer:
        raise Fail("%s answered a JSON-RPC error" % name, reply.evidence())
    result = answer.get("result")
    content = result.get("content") if isinstance(result, dict) else None
    if (not isinstance(content, list) or not content or not isinstance(content[0], dict)
            or content[0].get("type") != "text" or not isinstance(content[0].get("text"), str)):
        raise Fail("%s result is not {\"content\":[{\"type\":\"text\",\"text\":…}]}" % name, reply.evidence())
    if result.get("isError"):
        raise Fail("%s failed: %s" % (name, content[0]["text"][:200]), reply.evidence())
    try:
        return json.loads(content[0]["text"])
    except ValueError:
        raise Fail("%s result text is not JSON" % name, reply.evidence())


class PendingCall:
    """A request sent on its own connection whose answer is awaited later."""

    def __init__(self, ctx: CheckContext, conn: ClientConnection, rid: Any, name: str) -> None:
        self.ctx = ctx
        self.conn = conn
        self.rid = rid
        self.name = name
        self.head = asyncio.ensure_future(conn.read_response("POST", None))
        self.task = asyncio.ensure_future(self._finish())

    async def _finish(self) -> Tuple[Reply, Any]:
        response = await self.head
        body = await response.read_body(None)
        reply = Reply(response, body, "POST /mcp tools/call %s" % self.name)
        return reply, tool_value(reply, self.rid, self.name)

    async def started(self, grace: float = 1.0) -> None:
        """Give the server a moment to take the request: many servers send the head of
        a blocking answer at once (ours does), which proves it; otherwise wait `grace`."""
        await asyncio.wait({self.head}, timeout=grace)
        if self.task.done() and self.task.exception() is not None:
            raise self.task.exception()  # type: ignore[misc]

    async def result(self, timeout: float) -> Tuple[Reply, Any]:
        try:
            return await asyncio.wait_for(asyncio.shield(self.task), timeout)
        except asyncio.TimeoutError:
            raise Fail("%s still blocks after %s s" % (self.name, timeout))

    async def cancel(self) -> None:
        for t in (self.task, self.head):
            if not t.done():
                t.cancel()
        await asyncio.gather(self.task, self.head, return_exceptions=True)
        self.conn.close()


def expect_status(reply: Reply, status: int, what: str) -> None:
    if reply.status != status:
        raise Fail("%s: expected HTTP %d, got %d" % (what, status, reply.status), reply.evidence())


def expect_error_code(reply: Reply, code: int, what: str) -> None:
    message = reply.message()
    error = message.get("error") if isinstance(message, dict) else None
    if not isinstance(error, dict) or error.get("code") != code:
        raise Fail("%s: expected JSON-RPC error %d" % (what, code), reply.evidence())


# ------------------------------------------------------------------- §1 the lock


@check("lock.fields", "§1", "lock file fields and types as the CLI validates them")
async def check_lock_fields(ctx: CheckContext) -> Optional[str]:
    if ctx.raw_lock is None:
        raise Skip("no lock file given (connected by socket only)")
    try:
        info = LockInfo.from_json(ctx.raw_lock, ctx.lock.path)
    except lockfile.LockFileError as exc:
        raise Fail("the CLI would skip this lock: %s" % exc.reason, _shape(ctx.raw_lock))
    if not lockfile.pid_alive(info.pid):
        raise Fail("pid %d is not alive: the CLI skips this lock" % info.pid, _shape(ctx.raw_lock))
    notes = []
    if ctx.lock.path and not _UUID_LOCK.search(os.path.basename(ctx.lock.path)):
        notes.append("file name %s is not <uuid4>.lock" % os.path.basename(ctx.lock.path))
    if info.timestamp < 10 ** 11:
        notes.append("timestamp %r looks like seconds, not milliseconds" % info.timestamp)
    if info.scheme not in ("unix", "pipe"):
        notes.append("scheme %r is neither \"unix\" nor \"pipe\"" % info.scheme)
    if not any(k.lower() == "authorization" for k in info.headers):
        notes.append("headers carry no Authorization nonce")
    if notes:
        raise Warn("; ".join(notes), _shape(ctx.raw_lock))
    return None


@check("lock.permissions", "§1", "lock file mode 0600 (directory 0700)")
async def check_lock_permissions(ctx: CheckContext) -> Optional[str]:
    if os.name == "nt" or not ctx.lock.path:
        raise Skip("POSIX lock files only")
    mode = stat.S_IMODE(os.stat(ctx.lock.path).st_mode)
    if mode & 0o077:
        raise Fail("lock file mode is %o; others can read the nonce (must be 0600)" % mode, ctx.lock.path)
    dmode = stat.S_IMODE(os.stat(os.path.dirname(ctx.lock.path)).st_mode)
    if dmode & 0o077:
        raise Warn("lock directory mode is %o (0700 expected)" % dmode, os.path.dirname(ctx.lock.path))
    return None


@check("lock.folders", "§1", "workspaceFolders absolute, with the real (symlink-resolved) path listed")
async def check_lock_folders(ctx: CheckContext) -> Optional[str]:
    folders = ctx.lock.workspace_folders
    if not folders:
        raise Warn("no workspace folder: the CLI can never auto-connect to this IDE")
    for folder in folders:
        if not os.path.isabs(folder):
            raise Fail("folder %r is not absolute" % folder, _shape(folders))
        real = os.path.realpath(folder)
        if os.path.exists(folder) and real not in folders:
            raise Fail("folder %r resolves to %r, which is not listed: the CLI compares its physical cwd"
                       % (folder, real), _shape(folders))
    return None


@check("lock.socket", "§1", "socket reachable, tolerates empty probe connections")
async def check_lock_socket(ctx: CheckContext) -> Optional[str]:
    if not lockfile.socket_reachable(ctx.lock.socket_path):
        raise Fail("socket %s refuses connections: the CLI skips this lock" % ctx.lock.socket_path)
    for _ in range(2):  # the CLI's probes: connect and close without a byte
        conn = await ctx.connect()
        conn.close()
    reply, rid = await ctx.rpc("ping", {})
    if reply.status == 401 or reply.status >= 500:
        raise Fail("after two empty probe connections the server answers %d" % reply.status, reply.evidence())
    if not os.name == "nt" and not lockfile._is_pipe_path(ctx.lock.socket_path):
        parent = os.path.dirname(ctx.lock.socket_path)
        try:
            if stat.S_IMODE(os.stat(parent).st_mode) & 0o077:
                raise Warn("socket directory %s is not private (0700 expected)" % parent)
        except OSError:
            pass
    return None


# ---------------------------------------------------------------- §2 transport


@check("auth.missing", "§2", "401 without the Authorization header")
async def check_auth_missing(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("ping", {}, headers=ctx.headers("POST", auth=False))
    expect_status(reply, 401, "a request without the lock's Authorization header")
    if reply.content_type != "text/plain":
        raise Warn("401 should be text/plain \"Unauthorized\"", reply.evidence())
    return None


@check("auth.wrong_nonce", "§2", "401 with a wrong nonce")
async def check_auth_wrong(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("ping", {}, headers=ctx.headers("POST", authorization="Nonce " + uuid.uuid4().hex))
    expect_status(reply, 401, "a request with a wrong nonce")
    return None


@check("auth.origin", "§2", "403 when an Origin header is present")
async def check_origin(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("ping", {}, headers=ctx.headers("POST", extra=[("Origin", "http://evil.example")]))
    expect_status(reply, 403, "a request with an Origin header")
    return None


@check("http.path", "§2", "404 for a path other than /mcp")
async def check_path(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("ping", {}, target="/not-mcp")
    expect_status(reply, 404, "POST /not-mcp")
    return None


@check("http.method", "§2", "405 with Allow: GET, POST, DELETE for other methods")
async def check_method(ctx: CheckContext) -> Optional[str]:
    reply = await ctx.send("PUT", b"{}", headers=ctx.headers("POST"))
    expect_status(reply, 405, "PUT /mcp")
    allow = set(reply.headers.tokens("allow"))
    if not {"get", "post", "delete"} <= allow:
        raise Fail("405 without Allow: GET, POST, DELETE", reply.evidence())
    return None


@check("http.content_length", "§2", "a POST with Content-Length (not chunked) is accepted")
async def check_content_length(ctx: CheckContext) -> Optional[str]:
    reply, rid = await ctx.initialize(chunked=False)
    if reply.status != 200 or reply.answer(rid) is None:
        raise Fail("initialize sent with Content-Length was not answered", reply.evidence())
    return None


@check("http.large_body", "§2", "a 10 MB request body is accepted")
async def check_large_body(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply, rid = await ctx.rpc("ping", {"_meta": {"padding": "x" * (10 * 1024 * 1024)}}, session=sid)
    if reply.status != 200 or reply.answer(rid) is None:
        raise Fail("a 10 MB POST was refused (open_diff carries whole files)", reply.evidence())
    return None


@check("http.response_format", "§2", "request answered as one SSE event (or application/json)")
async def check_response_format(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply, rid = await ctx.rpc("ping", {}, session=sid)
    expect_status(reply, 200, "ping in a session")
    if reply.content_type == "application/json":
        if reply.answer(rid) is None:
            raise Fail("application/json body is not the answer", reply.evidence())
        return "application/json answer (accepted by the CLI)"
    if reply.content_type != "text/event-stream":
        raise Fail("Content-Type must be text/event-stream (or application/json)", reply.evidence())
    problems = []
    if "no-cache" not in reply.headers.tokens("cache-control"):
        problems.append("no Cache-Control: no-cache")
    if reply.headers.get("mcp-session-id") is None:
        problems.append("no mcp-session-id header")
    if not reply.response.chunked:
        problems.append("not chunked")
    if len(reply.events) != 1:
        problems.append("%d events instead of one" % len(reply.events))
    elif reply.events[0].event != "message":
        problems.append("event type %r instead of \"message\"" % reply.events[0].event)
    if reply.answer(rid) is None:
        problems.append("the event is not the JSON-RPC answer")
    if problems:
        raise Fail("; ".join(problems), reply.evidence())
    return None


@check("http.keep_alive_after_stream", "§2", "a request on the connection of an ended GET stream is answered")
async def check_keep_alive(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.new_session()
    conn = await ctx.connect()
    response = await conn.request("GET", "/mcp", ctx.headers("GET", sid), timeout=ctx.timeout)
    if response.status != 200:
        raise Fail("GET stream refused: %d" % response.status)
    deleted = await ctx.delete(sid)
    if deleted.status != 200:
        raise Fail("DELETE answered %d" % deleted.status, deleted.evidence())
    try:
        await response.read_body(ctx.timeout)
    except IdeTimeout:
        raise Fail("the GET stream did not end after DELETE")
    except ServerGone:
        raise Fail("the server closed the stream's connection instead of ending the stream with 0\\r\\n\\r\\n")
    try:
        reply, rid = await ctx.initialize(conn=conn)
    except ServerGone as exc:
        raise Fail("the server closed the connection after ending the stream; the CLI reuses it (%s)" % exc)
    except IdeTimeout:
        raise Fail("the server stopped reading the connection after ending the stream "
                   "(the CLI waits 60 s for such a request)")
    if reply.status != 200:
        raise Fail("the request on the reused connection failed", reply.evidence())
    return None


# ------------------------------------------------------------ §3 the handshake


@check("discover.fallback", "§3", "server/discover answered with an error (not 401, not success)")
async def check_discover(ctx: CheckContext) -> Optional[str]:
    reply, rid = await ctx.rpc("server/discover", {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "copilot-cli", "version": "1.0.102"},
        "io.modelcontextprotocol/clientCapabilities": {}}})
    if reply.status == 401:
        raise Fail("401 makes the CLI abort the connection attempt", reply.evidence())
    message = reply.message()
    if isinstance(message, dict) and "result" in message:
        raise Fail("success means the stateless 2026-07-28 protocol, which the server does not speak",
                   reply.evidence())
    if not (isinstance(message, dict) and isinstance(message.get("error"), dict)):
        raise Fail("expected a JSON-RPC error (404 + error, or 200 + -32601)", reply.evidence())
    if reply.status not in (200, 404, 400):
        raise Warn("unusual status %d for the error" % reply.status, reply.evidence())
    return None


@check("initialize.result", "§3", "initialize: 200, mcp-session-id, protocolVersion, capabilities.tools, serverInfo")
async def check_initialize(ctx: CheckContext) -> Optional[str]:
    reply, rid = await ctx.initialize()
    expect_status(reply, 200, "initialize")
    if not reply.headers.get("mcp-session-id"):
        raise Fail("no mcp-session-id header", reply.evidence())
    answer = reply.answer(rid)
    result = answer.get("result") if answer else None
    if not isinstance(result, dict):
        raise Fail("no result", reply.evidence())
    if result.get("protocolVersion") != "2025-11-25":
        raise Fail("protocolVersion %r, expected the requested 2025-11-25" % result.get("protocolVersion"),
                   reply.evidence())
    caps = result.get("capabilities")
    if not isinstance(caps, dict) or not isinstance(caps.get("tools"), dict):
        raise Fail("capabilities.tools missing", reply.evidence())
    info = result.get("serverInfo")
    if not isinstance(info, dict) or not isinstance(info.get("name"), str) or not isinstance(info.get("version"), str):
        raise Fail("serverInfo.name/version missing", reply.evidence())
    return None


@check("initialize.versions", "§3", "requested version echoed when supported, else 2025-11-25")
async def check_versions(ctx: CheckContext) -> Optional[str]:
    for asked, expected in (("2025-06-18", "2025-06-18"), ("1999-01-01", "2025-11-25")):
        ctx.client_session_id = str(uuid.uuid4())
        reply, rid = await ctx.initialize(asked)
        answer = reply.answer(rid)
        got = (answer.get("result") or {}).get("protocolVersion") if answer else None
        if got != expected:
            raise Fail("initialize asking %s answered %r, expected %s" % (asked, got, expected), reply.evidence())
    return None


@check("initialized.202", "§3", "notifications/initialized answered 202 (the CLI opens its stream only then)")
async def check_initialized(ctx: CheckContext) -> Optional[str]:
    reply, rid = await ctx.initialize()
    sid = reply.headers.get("mcp-session-id")
    if not sid:
        raise Fail("initialize gave no session", reply.evidence())
    note, _ = await ctx.rpc("notifications/initialized", session=sid, notification=True)
    expect_status(note, 202, "notifications/initialized")
    if note.body:
        raise Warn("202 should have an empty body", note.evidence())
    return None


@check("session.unknown", "§3", "404 for an unknown mcp-session-id")
async def check_unknown_session(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("tools/list", {}, session="no-such-session-" + uuid.uuid4().hex)
    expect_status(reply, 404, "tools/list with an unknown session id")
    return None


@check("session.missing", "§3", "400 for a request without mcp-session-id")
async def check_missing_session(ctx: CheckContext) -> Optional[str]:
    reply, _ = await ctx.rpc("tools/list", {})
    expect_status(reply, 400, "tools/list without a session id")
    return None


@check("jsonrpc.ping", "§3", "ping answered {}")
async def check_ping(ctx: CheckContext) -> Optional[str]:
    reply, answer = await ctx.call("ping")
    if answer.get("result") != {}:
        raise Fail("ping must answer {}", reply.evidence())
    return None


@check("jsonrpc.unknown_method", "§3", "unknown method answered -32601")
async def check_unknown_method(ctx: CheckContext) -> Optional[str]:
    reply, answer = await ctx.call("no/such/method", {})
    expect_error_code(reply, jsonrpc.METHOD_NOT_FOUND, "an unknown method")
    return None


@check("jsonrpc.parse_error", "§2", "unparsable JSON answered 400 with -32700")
async def check_parse_error(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply = await ctx.send("POST", b'{"jsonrpc": "2.0", "id": 1, "method": ', session=sid)
    expect_status(reply, 400, "an unparsable body")
    expect_error_code(reply, jsonrpc.PARSE_ERROR, "an unparsable body")
    return None


@check("jsonrpc.batch", "§2", "a JSON array (batch) answered 400")
async def check_batch(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    reply = await ctx.send("POST", [jsonrpc.request(1, "ping", {})], session=sid)
    expect_status(reply, 400, "a batch")
    return None


@check("delete.session", "§2", "DELETE 200 ends the stream; a second DELETE 404")
async def check_delete(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.new_session()
    conn = await ctx.connect()
    stream = await conn.request("GET", "/mcp", ctx.headers("GET", sid), timeout=ctx.timeout)
    first = await ctx.delete(sid)
    expect_status(first, 200, "DELETE of a live session")
    try:
        await stream.read_body(ctx.timeout)
    except (IdeTimeout, ServerGone) as exc:
        raise Fail("the session's GET stream did not end cleanly after DELETE: %s" % exc)
    second = await ctx.delete(sid)
    expect_status(second, 404, "a second DELETE of the same session")
    after, _ = await ctx.rpc("tools/list", {}, session=sid)
    expect_status(after, 404, "a request in a deleted session")
    return None


# -------------------------------------------------------------- §2 / §5 stream


@check("stream.get", "§2", "GET stream: 200, text/event-stream, no-cache, mcp-session-id, chunked, kept open")
async def check_stream(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    conn = await ctx.connect()
    response = await conn.request("GET", "/mcp", ctx.headers("GET", sid), timeout=ctx.timeout)
    head = "HTTP %d %s %r" % (response.status, response.reason, response.headers.raw)
    if response.status != 200:
        body = await response.read_body(ctx.timeout)
        raise Fail("GET /mcp answered %d" % response.status, head + "\n" + body.decode("utf-8", "replace"))
    problems = []
    if not response.is_sse:
        problems.append("Content-Type is not text/event-stream")
    if "no-cache" not in response.headers.tokens("cache-control"):
        problems.append("no Cache-Control: no-cache")
    if response.headers.get("mcp-session-id") is None:
        problems.append("no mcp-session-id")
    if not response.chunked:
        problems.append("not chunked")
    if problems:
        raise Fail("; ".join(problems), head)
    await ctx.call("ping", session=sid)  # a round trip on another connection, then look
    try:
        while True:  # events (a selection) are fine; the end of the body is not
            if await response.next_data(0.3) is None:
                raise Fail("the GET stream ended instead of staying open", head)
    except IdeTimeout:
        pass  # nothing more: the stream is open and idle, as it should be
    except ServerGone:
        raise Fail("the server closed the GET stream's connection", head)
    if response.headers.get("cache-control") != "no-cache, no-transform":
        raise Warn("Cache-Control %r (VS Code sends \"no-cache, no-transform\")" % response.headers.get("cache-control"))
    return None


def _check_position(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("line"), int) and isinstance(value.get("character"), int)
            and not isinstance(value.get("line"), bool) and value["line"] >= 0 and value["character"] >= 0)


def _selection_problems(params: Any, with_current: bool) -> List[str]:
    problems = []
    if not isinstance(params, dict):
        return ["not an object"]
    for key in ("text", "filePath", "fileUrl"):
        if not isinstance(params.get(key), str):
            problems.append("%s must be a string" % key)
    if isinstance(params.get("fileUrl"), str) and not params["fileUrl"].startswith("file://"):
        problems.append("fileUrl must be a file:// URI (§6)")
    sel = params.get("selection")
    if not isinstance(sel, dict) or not _check_position(sel.get("start")) or not _check_position(sel.get("end")):
        problems.append("selection.start/end must be {line, character} (0-based)")
    elif not isinstance(sel.get("isEmpty"), bool):
        problems.append("selection.isEmpty must be a boolean")
    if with_current and not isinstance(params.get("current"), bool):
        problems.append("current must be a boolean")
    return problems


@check("stream.selection_on_open", "§5", "the current selection is sent when a GET stream opens")
async def check_selection_on_open(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    _, current = await ctx.tool("get_selection", session=sid)
    if not isinstance(current, dict) or current.get("current") is not True:
        raise Skip("no active editor selection in the IDE (select some text to run this check)")
    conn = await ctx.connect()
    response = await conn.request("GET", "/mcp", ctx.headers("GET", sid), timeout=ctx.timeout)
    if response.status != 200:
        raise Fail("GET stream refused: %d" % response.status)
    try:
        event = await response.next_event(ctx.timeout)
    except IdeTimeout:
        raise Fail("get_selection reports a current selection, but no selection_changed came on the new stream",
                   _shape(current))
    if event is None:
        raise Fail("the stream ended without sending the selection")
    evidence = "event: %s\nid: %s\ndata: %s" % (event.event, event.id, event.data[:600])
    if event.event != "message" or event.id is not None:
        raise Fail("pushes are `event: message` with no id: line", evidence)
    try:
        message = json.loads(event.data)
    except ValueError:
        raise Fail("event data is not JSON", evidence)
    if not isinstance(message, dict) or message.get("method") != "selection_changed" or "id" in message:
        raise Fail("the first event is not a selection_changed notification", evidence)
    problems = _selection_problems(message.get("params"), False)
    if problems:
        raise Fail("selection_changed params: " + "; ".join(problems), evidence)
    return None


# ------------------------------------------------------------------- §4 tools

_REFERENCE = {t["name"]: t for t in tools.TOOLS}


async def _tool_list(ctx: CheckContext) -> Tuple[Reply, List[Dict[str, Any]]]:
    reply, answer = await ctx.call("tools/list", {"_meta": {"progressToken": 0}})
    result = answer.get("result")
    listed = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(listed, list) or not all(isinstance(t, dict) for t in listed):
        raise Fail("tools/list result has no tools array", reply.evidence())
    return reply, listed


@check("tools.names", "§4", "tools/list answers exactly the six tools")
async def check_tool_names(ctx: CheckContext) -> Optional[str]:
    reply, listed = await _tool_list(ctx)
    names = [t.get("name") for t in listed]
    missing = [n for n in tools.TOOL_NAMES if n not in names]
    extra = [n for n in names if n not in tools.TOOL_NAMES]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if missing or extra or dupes:
        raise Fail("missing %s, unexpected %s, repeated %s" % (missing or "none", extra or "none", dupes or "none"),
                   "listed: %s" % names)
    return None


@check("tools.descriptions", "§4", "tool descriptions present (VS Code's text reaches the model)")
async def check_tool_descriptions(ctx: CheckContext) -> Optional[str]:
    _, listed = await _tool_list(ctx)
    differ = []
    for tool in listed:
        name, text = tool.get("name"), tool.get("description")
        if not isinstance(text, str) or not text.strip():
            raise Fail("%s has no description" % name, _shape(tool))
        ref = _REFERENCE.get(name)
        if ref is not None and text != ref["description"]:
            differ.append("%s: %r" % (name, text))
    if differ:
        raise Warn("descriptions differ from VS Code's (fine unless you want the same model behaviour)",
                   "\n".join(differ))
    return None


@check("tools.schemas", "§4", "inputSchema: properties, string types, required, additionalProperties, $schema")
async def check_tool_schemas(ctx: CheckContext) -> Optional[str]:
    _, listed = await _tool_list(ctx)
    for tool in listed:
        ref = _REFERENCE.get(tool.get("name"))
        if ref is None:
            continue
        schema = tool.get("inputSchema")
        want = ref["inputSchema"]
        if not isinstance(schema, dict) or schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
            raise Fail("%s: inputSchema must be an object schema with properties" % tool["name"], _shape(tool))
        props = schema["properties"]
        if set(props) != set(want["properties"]):
            raise Fail("%s: properties %s, expected %s" % (tool["name"], sorted(props), sorted(want["properties"])),
                       _shape(schema))
        for key, prop in props.items():
            if not isinstance(prop, dict) or prop.get("type") != "string":
                raise Fail("%s: property %s must be type string" % (tool["name"], key), _shape(schema))
        if sorted(schema.get("required") or []) != sorted(want.get("required") or []):
            raise Fail("%s: required %s, expected %s" % (tool["name"], schema.get("required"), want.get("required")),
                       _shape(schema))
        if want["properties"]:
            if schema.get("additionalProperties") is not False:
                raise Fail("%s: additionalProperties must be false" % tool["name"], _shape(schema))
            if schema.get("$schema") != want["$schema"]:
                raise Fail("%s: $schema must be %s" % (tool["name"], want["$schema"]), _shape(schema))
    return None


@check("tools.execution", "§4", "every tool carries execution: {taskSupport: forbidden}, nested")
async def check_tool_execution(ctx: CheckContext) -> Optional[str]:
    _, listed = await _tool_list(ctx)
    for tool in listed:
        execution = tool.get("execution")
        if not isinstance(execution, dict) or execution.get("taskSupport") != "forbidden":
            raise Fail("%s: execution.taskSupport must be \"forbidden\"" % tool.get("name"), _shape(tool))
        if "taskSupport" in tool:
            raise Fail("%s: taskSupport must be nested in execution, not top-level" % tool.get("name"), _shape(tool))
    return None


@check("tool.get_selection", "§4", "get_selection result shape")
async def check_get_selection(ctx: CheckContext) -> Optional[str]:
    reply, value = await ctx.tool("get_selection")
    if value is None:
        return "no selection at all (null)"
    problems = _selection_problems(value, True)
    if problems:
        raise Fail("; ".join(problems), reply.evidence())
    return None


@check("tool.get_diagnostics", "§4", "get_diagnostics result shape, capitalised severities, uri filter")
async def check_get_diagnostics(ctx: CheckContext) -> Optional[str]:
    reply, value = await ctx.tool("get_diagnostics")
    if not isinstance(value, list):
        raise Fail("the result must be an array", reply.evidence())
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("uri"), str) or not isinstance(
                entry.get("filePath"), str) or not isinstance(entry.get("diagnostics"), list):
            raise Fail("each entry needs uri, filePath, diagnostics[]", _shape(entry))
        if not entry["diagnostics"]:
            raise Fail("files without diagnostics must be left out", _shape(entry))
        for diag in entry["diagnostics"]:
            rng = diag.get("range") if isinstance(diag, dict) else None
            if (not isinstance(diag, dict) or not isinstance(diag.get("message"), str) or not isinstance(rng, dict)
                    or not _check_position(rng.get("start")) or not _check_position(rng.get("end"))):
                raise Fail("a diagnostic needs message and range {start, end}", _shape(diag))
            if diag.get("severity") not in tools.SEVERITIES:
                raise Fail("severity %r: the CLI counts only %s" % (diag.get("severity"), ", ".join(tools.SEVERITIES)),
                           _shape(diag))
    if not value:
        return "no diagnostics in the IDE to inspect"
    uri = value[0]["uri"]
    reply2, only = await ctx.tool("get_diagnostics", {"uri": uri})
    if not isinstance(only, list) or [e.get("uri") for e in only if isinstance(e, dict)] != [uri]:
        raise Fail("get_diagnostics {uri: %s} must answer that file only" % uri, reply2.evidence())
    return None


@check("tool.get_vscode_info", "§4", "get_vscode_info result keys")
async def check_vscode_info(ctx: CheckContext) -> Optional[str]:
    reply, value = await ctx.tool("get_vscode_info")
    keys = ("version", "appName", "appRoot", "language", "machineId", "sessionId", "uriScheme", "shell")
    if not isinstance(value, dict):
        raise Fail("the result must be an object", reply.evidence())
    missing = [k for k in keys if k not in value]
    if missing:
        raise Fail("missing %s" % ", ".join(missing), reply.evidence())
    return None


@check("tool.update_session_name", "§4", "update_session_name answers {\"success\": true}")
async def check_update_session_name(ctx: CheckContext) -> Optional[str]:
    reply, value = await ctx.tool("update_session_name", {"name": "ide-check session"})
    if not isinstance(value, dict) or value.get("success") is not True:
        raise Fail("expected {\"success\": true}", reply.evidence())
    return None


@check("tool.close_diff_unknown", "§4", "close_diff on an unknown tab: success, already_closed true")
async def check_close_unknown(ctx: CheckContext) -> Optional[str]:
    tab = "%s no such tab %s" % (TAB_PREFIX, uuid.uuid4().hex[:6])
    reply, value = await ctx.tool("close_diff", {"tab_name": tab})
    if not isinstance(value, dict) or value.get("success") is not True or value.get("already_closed") is not True:
        raise Fail("expected success: true, already_closed: true", reply.evidence())
    if value.get("tab_name") != tab or not isinstance(value.get("message"), str):
        raise Warn("tab_name and message expected too", reply.evidence())
    return None


@check("tool.unknown", "§4", "an unknown tool gives an isError result or -32602, not a crash")
async def check_unknown_tool(ctx: CheckContext) -> Optional[str]:
    reply, answer = await ctx.call("tools/call", {"name": "no_such_tool", "arguments": {}})
    if "error" in answer:
        if answer["error"].get("code") in (jsonrpc.INVALID_PARAMS, jsonrpc.METHOD_NOT_FOUND):
            return None
        raise Fail("unexpected error code", reply.evidence())
    result = answer.get("result")
    if not isinstance(result, dict) or result.get("isError") is not True:
        raise Fail("an unknown tool must not succeed", reply.evidence())
    return None


def _diff_answer_problems(value: Any, result: str, trigger: str, tab: str) -> List[str]:
    if not isinstance(value, dict):
        return ["not an object"]
    problems = []
    for key in ("success", "result", "trigger", "message"):
        if key not in value:
            problems.append("%s missing (the CLI ignores the answer)" % key)
    if value.get("result") != result:
        problems.append("result %r, expected %s" % (value.get("result"), result))
    if value.get("trigger") != trigger:
        problems.append("trigger %r, expected %s" % (value.get("trigger"), trigger))
    if value.get("tab_name") not in (None, tab):
        problems.append("tab_name %r" % value.get("tab_name"))
    return problems


def _diff_args(path: str, tab: str) -> Dict[str, Any]:
    return {"original_file_path": path, "new_file_contents": "written by ide-check\n", "tab_name": tab}


async def _close_until_found(ctx: CheckContext, sid: str, tab: str, pending: PendingCall) -> Tuple[Reply, Any]:
    """close_diff, retried while the server has not registered the open_diff yet (it
    travels on another connection and may be read later)."""
    for _ in range(20):
        reply, closed = await ctx.tool("close_diff", {"tab_name": tab}, session=sid)
        if not (isinstance(closed, dict) and closed.get("already_closed") is True) or pending.task.done():
            return reply, closed
        await asyncio.sleep(0.1)
    return reply, closed


@check("diff.close_via_tool", "§4", "open_diff blocks; close_diff resolves it REJECTED/closed_via_tool")
async def check_diff_close(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    path = ctx.scratch_path()
    tab = "%s - %s (%s)" % (TAB_PREFIX, os.path.basename(path), uuid.uuid4().hex[:6])
    pending = await ctx.start_tool("open_diff", _diff_args(path, tab), sid)
    try:
        await pending.started()
        await ctx.call("ping", session=sid)
        if pending.task.done():
            raise Fail("open_diff answered before anyone decided: it must block until the user decides",
                       pending.task.result()[0].evidence())
        reply, closed = await _close_until_found(ctx, sid, tab, pending)
        if not isinstance(closed, dict) or closed.get("already_closed") is not False or closed.get("success") is not True:
            raise Fail("close_diff of an open tab must answer success: true, already_closed: false", reply.evidence())
        opened_reply, answer = await pending.result(ctx.timeout)
        problems = _diff_answer_problems(answer, "REJECTED", tools.CLOSED_VIA_TOOL, tab)
        if problems:
            raise Fail("open_diff answer: " + "; ".join(problems), opened_reply.evidence())
    finally:
        await pending.cancel()
    if os.path.exists(path):
        raise Fail("the IDE wrote %s: it must never write the file (the CLI does)" % path)
    return None


@check("diff.replace", "§4", "a second open_diff with the same tab_name replaces the first")
async def check_diff_replace(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    path = ctx.scratch_path()
    tab = "%s - %s (%s)" % (TAB_PREFIX, os.path.basename(path), uuid.uuid4().hex[:6])
    first = await ctx.start_tool("open_diff", _diff_args(path, tab), sid)
    second: Optional[PendingCall] = None
    try:
        await first.started()
        second = await ctx.start_tool("open_diff", _diff_args(path, tab), sid)
        reply, answer = await first.result(ctx.timeout)
        problems = _diff_answer_problems(answer, "REJECTED", tools.CLOSED_VIA_TOOL, tab)
        if problems:
            raise Fail("first open_diff answer: " + "; ".join(problems), reply.evidence())
        await second.started()
        reply2, closed = await _close_until_found(ctx, sid, tab, second)
        if not isinstance(closed, dict) or closed.get("already_closed") is not False:
            raise Fail("the second open_diff is not open after replacing the first", reply2.evidence())
        await second.result(ctx.timeout)
    finally:
        await first.cancel()
        if second is not None:
            await second.cancel()
    return None


@check("diff.accept", "§4", "a diff accepted by the user: SAVED/accepted_via_button, file not written",
       interactive=True)
async def check_diff_accept(ctx: CheckContext) -> Optional[str]:
    sid = await ctx.session()
    path = ctx.scratch_path()
    tab = "%s - %s (%s)" % (TAB_PREFIX, os.path.basename(path), uuid.uuid4().hex[:6])
    ctx.prompt("ide-check: a diff %r opens in the IDE: please ACCEPT it." % tab)
    reply, answer = await ctx.tool("open_diff", _diff_args(path, tab), session=sid,
                                   timeout=INTERACTIVE_TIMEOUT if ctx.interactive else ctx.timeout)
    problems = _diff_answer_problems(answer, "SAVED", tools.ACCEPTED_VIA_BUTTON, tab)
    if problems:
        raise Fail("open_diff answer: " + "; ".join(problems), reply.evidence())
    if os.path.exists(path):
        raise Fail("the IDE wrote %s: on SAVED the CLI writes the file, never the IDE" % path, reply.evidence())
    return None


# ------------------------------------------------------------------------ runner


async def run_check(c: Check, lock: LockInfo, raw_lock: Optional[Dict[str, Any]] = None, *,
                    timeout: float = DEFAULT_CHECK_TIMEOUT, interactive: bool = False,
                    prompt: Optional[Callable[[str], None]] = None) -> Result:
    """Run one check on a fresh context; never raises (an exception is a FAIL)."""
    ctx = CheckContext(lock, raw_lock, timeout=timeout, interactive=interactive, prompt=prompt)
    limit = INTERACTIVE_TIMEOUT + timeout if (c.interactive and interactive) else timeout * 4
    try:
        note = await asyncio.wait_for(c.func(ctx), limit)
        result = Result(c.name, PASS, note or "", c.section, c.title)
    except Outcome as out:
        result = Result(c.name, out.status, out.message, c.section, c.title, out.evidence)
    except asyncio.TimeoutError:
        result = Result(c.name, FAIL, "no answer within %s s" % limit, c.section, c.title)
    except (ClientError, jsonrpc.JsonRpcError, OSError) as exc:
        result = Result(c.name, FAIL, "%s: %s" % (type(exc).__name__, exc), c.section, c.title)
    finally:
        try:
            await asyncio.wait_for(ctx.cleanup(), 10)
        except (asyncio.TimeoutError, Exception):
            pass
    return result


async def run_checks(lock: LockInfo, raw_lock: Optional[Dict[str, Any]] = None, *,
                     names: Optional[Sequence[str]] = None, with_diff: bool = False,
                     timeout: float = DEFAULT_CHECK_TIMEOUT, interactive: bool = False,
                     on_result: Optional[Callable[[Result], None]] = None,
                     prompt: Optional[Callable[[str], None]] = None) -> List[Result]:
    """Run the checks in order (all, or `names`); checks needing a person are SKIPped
    unless `with_diff`."""
    results = []
    for c in CHECKS:
        if names is not None and c.name not in names:
            continue
        if c.interactive and not with_diff:
            result = Result(c.name, SKIP, "needs a person in the IDE: run with --with-diff", c.section, c.title)
        else:
            result = await run_check(c, lock, raw_lock, timeout=timeout, interactive=interactive, prompt=prompt)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def summary(results: Sequence[Result]) -> Dict[str, int]:
    counts = {PASS: 0, FAIL: 0, WARN: 0, SKIP: 0}
    for r in results:
        counts[r.status] += 1
    return counts


def load_lock(path: str) -> Tuple[LockInfo, Optional[Dict[str, Any]]]:
    """Read a lock file leniently: a lock with a bad field still gets checked (the
    `lock.fields` check reports the field), when at least the socket is known."""
    with open(path, "rb") as f:
        raw = json.loads(f.read().decode("utf-8-sig"))
    try:
        return LockInfo.from_json(raw, path), raw
    except lockfile.LockFileError:
        if not isinstance(raw, dict) or not isinstance(raw.get("socketPath"), str):
            raise
        headers = raw.get("headers") if isinstance(raw.get("headers"), dict) else {}
        folders = raw.get("workspaceFolders") if isinstance(raw.get("workspaceFolders"), list) else []
        return LockInfo(raw["socketPath"], str(raw.get("scheme")), {str(k): str(v) for k, v in headers.items()},
                        raw.get("pid") if isinstance(raw.get("pid"), int) else 0, str(raw.get("ideName")),
                        0, [str(f) for f in folders], False, path), raw


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m ide_protocol check",
                                description="Check a running /ide server against PROTOCOL.md.")
    p.add_argument("folder", nargs="?", help="workspace folder of the IDE to check (default: cwd)")
    p.add_argument("--lock", metavar="FILE", help="check the server of this lock file")
    p.add_argument("--lock-dir", metavar="DIR", help="lock directory (default: $COPILOT_HOME/ide or ~/.copilot/ide)")
    p.add_argument("--json", action="store_true", help="print a JSON report")
    p.add_argument("--with-diff", "--interactive", dest="with_diff", action="store_true",
                   help="also run the checks that need a person (accept a diff in the IDE)")
    p.add_argument("--only", action="append", metavar="NAME", help="run only this check (repeatable)")
    p.add_argument("--list", action="store_true", help="list the checks and exit")
    p.add_argument("--timeout", type=float, default=DEFAULT_CHECK_TIMEOUT, help="seconds per answer (default 15)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if args.list:
        for c in CHECKS:
            print("%-32s %-3s %s%s" % (c.name, c.section, c.title, " (needs --with-diff)" if c.interactive else ""))
        return 0
    try:
        if args.lock:
            lock, raw = load_lock(args.lock)
        else:
            from ..client import discover
            lock = discover(args.folder, args.lock_dir)
            _, raw = load_lock(lock.path) if lock.path else (lock, None)
    except (ClientError, OSError, ValueError) as exc:
        print("ide-check: %s" % exc, file=sys.stderr)
        return 2
    if not args.json:
        print("checking %s (pid %s) at %s" % (lock.ide_name, lock.pid, lock.socket_path), flush=True)

    def show(result: Result) -> None:
        if not args.json:
            print(result.line(), flush=True)

    results = asyncio.run(run_checks(lock, raw, names=args.only, with_diff=args.with_diff, timeout=args.timeout,
                                     interactive=args.with_diff, on_result=show))
    counts = summary(results)
    if args.json:
        print(json.dumps({"lock": lock.path, "socket": lock.socket_path, "ide": lock.ide_name,
                          "summary": counts, "results": [r.to_json() for r in results]}, indent=2))
    else:
        print("%d checks: %d passed, %d failed, %d warnings, %d skipped"
              % (len(results), counts[PASS], counts[FAIL], counts[WARN], counts[SKIP]))
    return 1 if counts[FAIL] else 0


if __name__ == "__main__":
    sys.exit(main())
