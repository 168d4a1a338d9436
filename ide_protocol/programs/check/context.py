"""What a check works with: `CheckContext` (hand-made requests, sessions, tool calls,
all closed after the check), `Reply` (one complete answer with its decoded events and
messages, and a printable evidence, read within `ANSWER_LIMIT` by `read_reply`), and
the shape tests shared by several sections.

Requests go through `client.ClientConnection`, so the checker sends exactly what the
CLI sends (PROTOCOL.md §2) and can also send what a conformant server must refuse.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple, Union

from ...wire import http11, json_text, jsonrpc, sse
from ...wire.http11 import rules as http_rules
from ...client import (DEFAULT_CONNECT_TIMEOUT, STREAM_ACCEPT, ClientConnection, ClientError, ClientResponse,
                        ProtocolViolation, cli_headers, program_client_info)
from ...client.connection import deadline_after, time_left
from ...common.lockfile import LockInfo
from .outcomes import BRIEF_WAIT, DEFAULT_CHECK_TIMEOUT, Fail, Outcome


#: The largest answer the checker reads (its body, or one SSE event of it): past it the
#: answer is refused and its connection closed. The checker's requests are answered in
#: a few kilobytes (a workspace's diagnostics in a few hundred); the bound keeps the
#: checker's memory near it whatever a server sends (each answer is decoded once, as
#: it comes: a bounded multiple of this, not of the body's size).
ANSWER_LIMIT = 8 * 1024 * 1024

#: How much of an answer's body a `Reply` keeps as it came (for the evidence, and for
#: the checks of a short body such as 401's "Unauthorized").
KEPT_BODY = 64 * 1024


class Reply:
    """A complete answer: status, headers, the start of its body (`body`, at most
    `KEPT_BODY` bytes; `body_size` counts them all), and the SSE events / JSON-RPC
    messages decoded from it as it was read (best effort; `decode_error` says what
    failed). Made by `read_reply`."""

    def __init__(self, response: ClientResponse, request_line: str, body: bytes = b"",
                 events: Sequence[sse.SSEEvent] = (), messages: Sequence[Any] = (),
                 decode_error: Optional[str] = None) -> None:
        self.response = response
        self.status = response.status
        self.reason = response.reason
        self.headers = response.headers
        self.body = body
        self.body_size = response.body_size
        self.request_line = request_line
        self.events: List[sse.SSEEvent] = list(events)
        self.messages: List[Any] = list(messages)
        self.decode_error = decode_error

    @property
    def content_type(self) -> str:
        return self.response.content_type

    def message(self) -> Any:
        """The JSON-RPC message carried (the first one)."""
        return self.messages[0] if self.messages else None

    def answer(self, request_id: Any) -> Optional[Dict[str, Any]]:
        return next((m for m in self.messages if jsonrpc.answers(m, request_id)), None)

    def evidence(self) -> str:
        lines = ["> " + self.request_line, "< HTTP/%s %d %s" % (self.response.http_version, self.status, self.reason)]
        for k, v in self.headers:
            lines.append("< %s: %s" % (k, v))
        text = self.body[:2400].decode("utf-8", "replace")
        if text:
            lines.append("< " + (text if len(text) <= 600 and self.body_size <= 600 else text[:600] + "…"))
        return "\n".join(lines)


async def read_reply(response: ClientResponse, request_line: str, timeout: Optional[float]) -> Reply:
    """Read `response` to its end, decoding it as it comes (`timeout` bounds it all):
    an SSE body event by event, each JSON-RPC message parsed once; any other body whole,
    as one message when it is JSON. Every piece is at most `ANSWER_LIMIT` bytes, and so
    is all that is kept of the events' data together (past it: ProtocolViolation, the
    connection closed)."""
    response.max_message = ANSWER_LIMIT
    deadline = deadline_after(timeout)
    events: List[sse.SSEEvent] = []
    messages: List[Any] = []
    decode_error = None
    if response.is_sse:
        kept = 0
        while True:
            event = await response.next_event(time_left(deadline))
            if event is None:
                break
            kept += len(event.data)
            if kept > ANSWER_LIMIT:
                response.conn.close()
                raise ProtocolViolation("the %d response's events hold more than %d bytes of data"
                                        % (response.status, ANSWER_LIMIT))
            events.append(event)
            try:
                messages.append(jsonrpc.loads(event.data))
            except jsonrpc.JsonRpcError:
                decode_error = "SSE data is not JSON: %r" % event.data[:200]
        body = bytes(response.body)  # (its first EVIDENCE_BYTES: what the events were read from)
    else:
        body = await response.read_body(time_left(deadline))
        if body.strip():
            try:
                messages.append(jsonrpc.loads(body))
            except jsonrpc.JsonRpcError:
                decode_error = "body is not JSON"
        body = body[:KEPT_BODY]
    return Reply(response, request_line, body, events, messages, decode_error)


def sent_chunked(response: ClientResponse) -> bool:
    """Whether a response's body came in chunked coding (PROTOCOL.md §2), by the wire
    layer's framing rule."""
    try:
        return http_rules.body_framing(response.headers) is http_rules.CHUNKED
    except http_rules.Refusal:  # (a body-less answer whose fields were never judged)
        return False


def shape(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 600 else text[:600] + "…"


#: Makes the IDE under test change its workspace folders: only whoever started that IDE
#: can (a test suite, an embedding); no message of the protocol does it (PROTOCOL.md §1).
ChangeFolders = Callable[[List[str]], Awaitable[None]]


class CheckContext:
    """What a check works with: the lock, raw requests, sessions, tool calls.

    Everything opened here (connections, sessions) is closed by `cleanup()`, which the
    runner calls after each check. `change_folders`, when given, drives the IDE itself
    (see `ChangeFolders`).
    """

    def __init__(self, lock: LockInfo, raw_lock: Optional[Dict[str, Any]] = None, *,
                 timeout: float = DEFAULT_CHECK_TIMEOUT, interactive: bool = False,
                 prompt: Optional[Callable[[str], None]] = None,
                 change_folders: Optional[ChangeFolders] = None) -> None:
        self.lock = lock
        self.change_folders = change_folders
        self.raw_lock = raw_lock
        self.timeout = timeout
        #: How long to wait for what a conforming server sends at once and a server
        #: breaking the rule never sends (`registry.BRIEF_WAIT`, at most `timeout`).
        self.brief = min(timeout, BRIEF_WAIT)
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

    async def open_stream(self, session: str) -> Tuple[ClientConnection, ClientResponse]:
        """The GET stream of `session` on a connection of its own (PROTOCOL.md §2): the
        connection and the stream's response; a refusal fails the check."""
        conn = await self.connect()
        response = await conn.request("GET", "/mcp", self.headers("GET", session), timeout=self.timeout)
        if response.status != 200:
            raise Fail("GET stream refused: %d" % response.status)
        return conn, response

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
            h = cli_headers(lock_headers, self.client_session_id, accept=STREAM_ACCEPT, content_type=None,
                            mcp_session_id=session)
        else:
            h = cli_headers(lock_headers, self.client_session_id, accept=None, content_type=None,
                            mcp_session_id=session)
        return h[:-1] + list(extra) + h[-1:]  # Host stays last (the writer adds Connection after it)

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
        line = "%s %s" % (method, target)
        if isinstance(body, dict):
            line += " " + (body.get("method") or "") if isinstance(body.get("method"), str) else ""
        return await read_reply(response, line, self.timeout if timeout is None else timeout)

    async def rpc(self, method: str, params: Any = None, *, session: Optional[str] = None,
                  notification: bool = False, **kwargs: Any) -> Tuple[Reply, Any]:
        """POST a JSON-RPC request (or notification); returns the reply and its id."""
        request_id: Optional[int] = None
        if notification:
            message = jsonrpc.notification(method, params)
        else:
            request_id = new_id = self.next_id()
            message = jsonrpc.request(new_id, method, params)
        return await self.send("POST", message, session=session, **kwargs), request_id

    # -- sessions

    async def initialize(self, version: str = "2025-11-25", *, chunked: bool = True,
                         conn: Optional[ClientConnection] = None) -> Tuple[Reply, Any]:
        reply, rid = await self.rpc("initialize", {"protocolVersion": version, "capabilities": {},
                                                   "clientInfo": program_client_info("check")},
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
        await conn.send(http11.write_request("POST", "/mcp", self.headers("POST", session), data, chunked=True,
                                             keep_alive=True))
        return PendingCall(self, conn, rid, name)

    async def delete(self, session: str, conn: Optional[ClientConnection] = None,
                     timeout: Optional[float] = None) -> Reply:
        return await self.send("DELETE", None, session=session, conn=conn, timeout=timeout)

    async def cleanup(self) -> None:
        """End the check's sessions (DELETE, each bounded by a brief wait) and close its
        connections."""
        for sid in self._sessions:
            try:
                await asyncio.wait_for(self.delete(sid, timeout=self.brief), self.brief + 1)
            except (ClientError, OSError, asyncio.TimeoutError, Outcome):
                pass
        self.abandon()

    def abandon(self) -> None:
        """Close the check's connections at once (its time is up: no DELETE)."""
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
    if isinstance(result, dict) and result.get("isError"):
        raise Fail("%s failed: %s" % (name, content[0]["text"][:200]), reply.evidence())
    try:
        return json_text.loads(content[0]["text"])
    except json_text.JsonTextError:
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
        reply = await read_reply(response, "POST /mcp tools/call %s" % self.name, None)
        return reply, tool_value(reply, self.rid, self.name)

    async def started(self, grace: float = 1.0) -> None:
        """Give the server a moment to take the request: many servers send the head of
        a blocking answer at once (ours does), which proves it; otherwise wait `grace`."""
        await asyncio.wait({self.head}, timeout=grace)
        error = self.task.exception() if self.task.done() else None
        if error is not None:
            raise error

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


def expect_status(reply: Reply, status: int, what: str, rule: Optional[str] = None) -> None:
    """Fail (the check's rule, or `rule`) unless the answer's status is `status`."""
    if reply.status != status:
        raise Fail("%s: expected HTTP %d, got %d" % (what, status, reply.status), reply.evidence(), rule)


def expect_error_code(reply: Reply, code: int, what: str, rule: Optional[str] = None) -> None:
    """Fail (the check's rule, or `rule`) unless the answer is the JSON-RPC error `code`."""
    message = reply.message()
    error = message.get("error") if isinstance(message, dict) else None
    if not isinstance(error, dict) or error.get("code") != code:
        raise Fail("%s: expected JSON-RPC error %d" % (what, code), reply.evidence(), rule)


def is_position(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("line"), int) and isinstance(value.get("character"), int)
            and not isinstance(value.get("line"), bool) and value["line"] >= 0 and value["character"] >= 0)


def selection_problems(params: Any, with_current: bool) -> List[str]:
    problems = []
    if not isinstance(params, dict):
        return ["not an object"]
    for key in ("text", "filePath", "fileUrl"):
        if not isinstance(params.get(key), str):
            problems.append("%s must be a string" % key)
    if isinstance(params.get("fileUrl"), str) and not params["fileUrl"].startswith("file://"):
        problems.append("fileUrl must be a file:// URI (§6)")
    sel = params.get("selection")
    if not isinstance(sel, dict) or not is_position(sel.get("start")) or not is_position(sel.get("end")):
        problems.append("selection.start/end must be {line, character} (0-based)")
    elif not isinstance(sel.get("isEmpty"), bool):
        problems.append("selection.isEmpty must be a boolean")
    if with_current and not isinstance(params.get("current"), bool):
        problems.append("current must be a boolean")
    return problems
