"""MCP over Streamable HTTP, as Copilot CLI's `/ide` client uses it (PROTOCOL.md §2–3).

`McpApp` is the application the transport calls for each request (the interface is
in `answers`): `app(request, body, connection) -> Reply | Stream | PendingReply`. It
decides the whole answer as a value and writes nothing itself: it knows HTTP statuses,
sessions, SSE and JSON-RPC, but no sockets, and nothing of the IDE either: the methods
(`tools/list`, `tools/call`, ...) come from an `rpc.Dispatcher` given by the owner
(`ide_server.IdeServer`). Handlers receive a `sessions.CallContext` naming the session
and the request.

The way of one `tools/call`: `judge_head` checks what every request's head must pass
(Origin, nonce, path, method: a pure function of the head, which the transport calls
exactly once for every request, as soon as the head arrives; `answer` is given only
the requests it passed), `_session_for` the session and its protocol version (for every
request that names a session, in that one place); `_post` decodes
the JSON-RPC message and gives it to the dispatcher, which calls the tool; its response
becomes a `Reply` (one SSE event, chunked) that the transport writes. A method that has to wait
becomes a `PendingReply` (or, for one that waits for a person, a `Stream` whose head
goes first), run by the connection's task.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import time
from typing import Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Set, Union

from .. import rpc
from ..wire import http11, jsonrpc, sse
from .answers import Answer, PendingReply, Reply, Stream, plain
from .limits import DEFAULT_ORPHAN_TIMEOUT
from .sessions import CallContext, GetStream, RunningRequest, Session

log = logging.getLogger(__name__)

__all__ = ["CallContext", "McpApp", "Session", "SUPPORTED_VERSIONS", "LATEST_VERSION"]

#: Versions we can speak; the first is answered when the client asks for another
#: (PROTOCOL.md §3).
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_VERSION = SUPPORTED_VERSIONS[0]

MCP_PATHS = ("/mcp", "/")
METHODS = ("POST", "GET", "DELETE")
ALLOW = "GET, POST, DELETE"
#: The head fields of an answer to a request, and of a GET stream (PROTOCOL.md §2).
SSE_HEADERS = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"))
STREAM_HEADERS = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache, no-transform"))

#: A notification or a client's response: 202, empty (PROTOCOL.md §2; the CLI opens its
#: GET stream only after a 202 for notifications/initialized, §3).
ACCEPTED = Reply(202, (("Content-Type", "text/plain"),), b"")

#: The refusals of `judge_head` (PROTOCOL.md §2), values that never change.
_FORBIDDEN = plain(403, "Forbidden", close_after=True)
_UNAUTHORIZED = plain(401, "Unauthorized", close_after=True)
_NOT_FOUND = plain(404, "Not Found")
_NOT_ALLOWED = plain(405, "Method Not Allowed", ("Allow", ALLOW))


#: A clock for the session timers: `loop.call_later`'s shape (a test may give its own).
CallLater = Callable[[float, Callable[[], None]], asyncio.TimerHandle]


def refuse_unauthenticated(fields: Mapping[str, List[str]], nonce: bytes) -> Optional[Reply]:
    """The first two checks of every request's head (PROTOCOL.md §2, "Errors and edge
    cases"), or None: an `Origin` header is a browser's, refused first (403, DNS-rebinding
    style attacks); then `Authorization` must be `Nonce <nonce>`, compared in constant
    time (401). Both refusals close the connection. `fields`: lower-cased name -> values.
    Whoever holds a nonce judges by this: the server, and a relay holding its own."""
    if "origin" in fields:
        return _FORBIDDEN
    authorization = fields.get("authorization")
    if not authorization:
        return _UNAUTHORIZED
    scheme, _, secret = authorization[0].strip().partition(" ")
    if scheme.lower() != "nonce" or not hmac.compare_digest(secret.strip().encode("utf-8", "surrogateescape"), nonce):
        return _UNAUTHORIZED
    return None


def refuse_misdirected(request: http11.Request) -> Optional[Reply]:
    """The next two checks of a head, after `refuse_unauthenticated` (PROTOCOL.md §2,
    "Errors and edge cases"), or None: a path other than `/mcp` or `/` (404), then a
    method other than GET, POST, DELETE (405)."""
    if request.target not in MCP_PATHS and request.path not in MCP_PATHS:
        return _NOT_FOUND
    if request.method not in METHODS:
        return _NOT_ALLOWED
    return None


def _json_error(status: int, code: int, message: str, msg_id: Any = None) -> Reply:
    body = jsonrpc.dumps(jsonrpc.error_response(msg_id, jsonrpc.JsonRpcError(code, message)))
    return Reply(status, (("Content-Type", "application/json"),), body)


class McpApp:
    """Routes HTTP requests to MCP sessions and JSON-RPC methods; each answer a value."""

    def __init__(self, dispatcher: rpc.Dispatcher, nonce: str, *,
                 server_info: Optional[Dict[str, Any]] = None,
                 capabilities: Optional[Dict[str, Any]] = None,
                 json_response: bool = False,
                 reuse_client_session_id: bool = True,
                 on_session_start: Optional[Callable[[Session], None]] = None,
                 on_session_end: Optional[Callable[[Session, str], None]] = None,
                 on_stream_open: Optional[Callable[[Session], None]] = None,
                 on_exchange: Optional[Callable[[str, Dict[str, Any]], None]] = None,
                 streams_early: Optional[Callable[[jsonrpc.Request], bool]] = None,
                 max_sessions: Optional[int] = None,
                 orphan_timeout: float = DEFAULT_ORPHAN_TIMEOUT,
                 call_later: Optional[CallLater] = None) -> None:
        self.dispatcher = dispatcher
        #: Which requests may block for long (a person decides), so that the head of
        #: their answer goes first and the client sees a live 200 at once.
        self.streams_early: Callable[[jsonrpc.Request], bool] = streams_early or (lambda msg: False)
        self._nonce = nonce.encode("utf-8")
        self.server_info = server_info or {"name": "vscode-copilot-cli", "version": "0.0.1",
                                           "title": "VS Code Copilot CLI"}
        self.capabilities = capabilities or {"tools": {"listChanged": True}}
        self.json_response = json_response
        self.reuse_client_session_id = reuse_client_session_id
        self.sessions: Dict[str, Session] = {}
        #: Connection number -> ids of the sessions it carried (PROTOCOL.md §3).
        self._carried: Dict[int, Set[str]] = {}
        self.on_session_start = on_session_start
        self.on_session_end = on_session_end
        self.on_stream_open = on_stream_open
        self.on_exchange = on_exchange
        self.requests_served = 0
        #: At most this many sessions (None or 0: no limit); at the limit the session idle
        #: longest makes room, else initialize is answered 503 (README "Limits and safety").
        self.max_sessions = max_sessions
        #: Seconds a session outlives the last connection that carried it, when its
        #: client went (PROTOCOL.md §3, "When a session ends"); the timers are kept in
        #: `_orphan_timers`, made by `call_later` (the running loop's, by default), and
        #: cancelled by `end_all()`.
        self.orphan_timeout = orphan_timeout
        self._call_later = call_later
        self._orphan_timers: Set[asyncio.TimerHandle] = set()
        dispatcher.add("initialize", self._initialize_again)
        dispatcher.add("ping", lambda params, ctx: {})
        dispatcher.add("notifications/initialized", self._initialized)
        dispatcher.add("notifications/cancelled", self._cancelled)

    # ---------------------------------------------------------------- the HTTP entry

    def answer(self, request: http11.Request, body: bytes, connection: int = 0) -> Answer:
        """The answer to one request whose head `judge_head` passed (`answers.App`: the
        transport gives the application only those). The object itself is the same
        application (`app(request, body, connection)`); an owner hands the listener
        this method beside `judge_head`."""
        self.requests_served += 1
        method = request.method
        if method == "POST":
            return self._post(request, body, connection)
        if method == "GET":
            return self._get(request, connection)
        return self._delete(request)  # (the only other method judge_head passes)

    __call__ = answer

    def judge_head(self, request: http11.Request) -> Optional[Reply]:
        """The refusal of a request judged by its head alone, or None (`answers.Judge`).
        A pure function of the head: nothing is remembered, so every request is judged
        in full, the same head again included. The transport calls it once for every
        request, before reading the body: a refused request is never buffered. A peer
        without the nonce (or a browser) is answered with `close`: it has no business
        keeping a connection."""
        fields = request.headers.index()  # (lower-cased name -> values)
        refusal = refuse_unauthenticated(fields, self._nonce)
        if refusal is not None:
            return refusal
        return refuse_misdirected(request)

    def _make_room(self) -> bool:
        """Whether one more session fits, after ending the one idle longest if needed
        (no stream, no request: a client that comes back starts a new handshake)."""
        if not self.max_sessions or len(self.sessions) < self.max_sessions:  # (None or 0: no limit)
            return True
        idle = [s for s in self.sessions.values() if not s.busy]
        if not idle:
            return False
        self.end_session(min(idle, key=lambda s: s.last_seen), "evicted (session limit)")
        return True

    def _carry(self, session: Session, connection: int) -> None:
        """Note that `connection` carried a request or the stream of `session`
        (0: not a real connection, an application called directly). Noted once: the
        two records change together (here, in `connection_closed`, in `end_session`),
        so a connection the session holds is already in `_carried`."""
        if connection and connection not in session.connections and not session.ended:
            session.connections.add(connection)
            self._carried.setdefault(connection, set()).add(session.id)

    def connection_closed(self, connection: int, client_went: bool = True) -> None:
        """A connection is gone (`Listener`'s `on_connection_closed`). The sessions it was
        the last open carrier of are abandoned when their client went: they end
        `orphan_timeout` seconds later unless a new connection carries them meanwhile
        (PROTOCOL.md §3, "When a session ends"). One whose last connection the server
        closed for idleness lives on until the idle session timeout."""
        orphans = []
        for session_id in self._carried.pop(connection, ()):
            session = self.sessions.get(session_id)
            if session is None:
                continue
            session.connections.discard(connection)
            if not session.connections:
                orphans.append(session)
        if not orphans or not client_went:
            return
        call_later = self._call_later or asyncio.get_event_loop().call_later

        def end() -> None:
            self._orphan_timers.discard(timer)
            for session in orphans:
                if not session.ended and not session.connections:
                    self.end_session(session, "client gone")
        timer = call_later(self.orphan_timeout, end)
        self._orphan_timers.add(timer)

    def end_all(self, reason: str) -> None:
        """End every session, and the timers that would have ended some (the server
        stops)."""
        for timer in self._orphan_timers:
            timer.cancel()
        self._orphan_timers.clear()
        for session in list(self.sessions.values()):
            self.end_session(session, reason)

    def _session_for(self, request: http11.Request, connection: int = 0) -> Union[Session, Reply]:
        """The session a request belongs to, or the answer refusing it: no
        `mcp-session-id` → 400, an unknown one → 404 (PROTOCOL.md §3), an unsupported
        `mcp-protocol-version` → 400. That header is never required (1.0.102 does not
        send it, PROTOCOL.md §2), but a wrong one is refused, as the MCP transport asks;
        initialize and server/discover have no session yet and negotiate in the body."""
        fields = request.headers.index()
        ids = fields.get("mcp-session-id")
        session_id = ids[0] if ids else None
        if session_id is None:
            return _json_error(400, jsonrpc.INVALID_REQUEST, "Bad Request: missing mcp-session-id header")
        session = self.sessions.get(session_id)
        if session is None:
            return _json_error(404, jsonrpc.SESSION_NOT_FOUND, "Session not found")
        versions = fields.get("mcp-protocol-version")
        version = versions[0] if versions else None
        if version is not None and version not in SUPPORTED_VERSIONS:
            return _json_error(400, jsonrpc.INVALID_REQUEST, "Bad Request: unsupported MCP-Protocol-Version %s" % version)
        session.touch()
        self._carry(session, connection)
        return session

    # --------------------------------------------------------------------------- POST

    def _post(self, request: http11.Request, body: bytes, connection: int = 0) -> Answer:
        """One JSON-RPC message (PROTOCOL.md §2: no batches)."""
        try:
            obj = jsonrpc.loads(body)
        except jsonrpc.JsonRpcError as exc:
            return _json_error(400, exc.code, exc.message)
        msg: Any = jsonrpc.parse_message(obj)
        kind = type(msg)  # (exactly one of the classes `parse_message` gives)
        if kind is jsonrpc.Invalid:
            if isinstance(obj, list):
                return _json_error(400, jsonrpc.INVALID_REQUEST, "Batches are not supported")
            return _json_error(400, msg.error.code, msg.error.message, msg.id)
        if self.on_exchange is not None:
            self.on_exchange("in", obj)
        if kind is jsonrpc.Request and msg.method == "initialize":
            return self._initialize(request, msg, connection)
        session = self._session_for(request, connection)
        if not isinstance(session, Session):
            if kind is jsonrpc.Request and msg.method == "server/discover":
                # PROTOCOL.md §3: an error makes the CLI fall back to initialize at once.
                # -32601 says the truth: we implement the stateful protocol only.
                return self._reply(None, jsonrpc.error_response(
                    msg.id, jsonrpc.JsonRpcError(jsonrpc.METHOD_NOT_FOUND, "Method not found: server/discover")))
            return session
        if kind is jsonrpc.Request:
            response = self.dispatcher.dispatch_now(msg, CallContext(session, msg.id, request.headers))
            if isinstance(response, rpc.Deferred):
                return self._answer_when_done(session, msg, response)
            return self._reply(session, response)
        context = CallContext(session, getattr(msg, "id", None), request.headers)
        if kind is jsonrpc.Notification:
            waiting = self.dispatcher.dispatch_now(msg, context)
            if isinstance(waiting, rpc.Deferred):
                return PendingReply(lambda: self._accepted_after(waiting), waiting.drop)
        return ACCEPTED

    async def _accepted_after(self, waiting: rpc.Deferred) -> Reply:
        await waiting.run()
        return ACCEPTED

    def _answer_when_done(self, session: Session, msg: jsonrpc.Request, waiting: rpc.Deferred) -> Answer:
        """A request whose method has to wait: it runs in its own task (`RunningRequest`,
        cancellable by notifications/cancelled, PROTOCOL.md §3) while the connection's
        task waits for its answer."""
        running = RunningRequest(session, msg.id, waiting)
        if not self.json_response and self.streams_early(msg):
            # Head first for a method that blocks (open_diff waits for a person,
            # PROTOCOL.md §4): the client sees a live 200 at once; the event follows.
            return Stream(200, session.sse_headers, self._event_when_done(running), running.release)
        return PendingReply(lambda: self._reply_when_done(running), running.release)

    async def _reply_when_done(self, running: RunningRequest) -> Reply:
        return self._reply(running.session, await running.response())

    async def _event_when_done(self, running: RunningRequest) -> AsyncIterator[bytes]:
        response = await running.response()
        if response is not None:  # (cancelled: the stream ends with no event)
            yield self._event(response)

    def _event(self, response: Dict[str, Any]) -> bytes:
        if self.on_exchange is not None:
            self.on_exchange("out", response)
        return sse.encode_message(jsonrpc.dumps(response))

    def _reply(self, session: Optional[Session], response: Optional[Dict[str, Any]]) -> Reply:
        """The answer carrying a JSON-RPC response (None: no answer is due, the request
        was cancelled): one SSE event in a chunked body (PROTOCOL.md §2), or with
        `json_response` a plain `application/json` body."""
        if self.json_response:
            sid = (("mcp-session-id", session.id),) if session is not None else ()
            if response is None:
                return Reply(202, tuple(ACCEPTED.headers) + sid, b"")
            if self.on_exchange is not None:
                self.on_exchange("out", response)
            return Reply(200, (("Content-Type", "application/json"),) + sid, jsonrpc.dumps(response))
        event = self._event(response) if response is not None else b""
        return Reply(200, session.sse_headers if session is not None else SSE_HEADERS, event, chunked=True)

    # ------------------------------------------------------------------- initialize

    def _initialize(self, request: http11.Request, msg: jsonrpc.Request, connection: int = 0) -> Reply:
        """Create a session (PROTOCOL.md §3) and answer with its `mcp-session-id`."""
        params = msg.params if isinstance(msg.params, dict) else {}
        requested = params.get("protocolVersion")
        version = requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION
        client_sid = request.headers.get("x-copilot-session-id")
        session_id = None
        if self.reuse_client_session_id and client_sid:
            # VS Code reuses the CLI's own session id (PROTOCOL.md §3). A live session
            # with that id (its GET stream open) is a conflict; a stale one is taken over.
            # The conflict's words are VS Code's: the CLI looks for them, and when it
            # connects by itself it then stays quiet (PROTOCOL.md §2, the errors table).
            old = self.sessions.get(client_sid)
            if old is not None:
                if old.stream is not None:
                    return _json_error(409, jsonrpc.INVALID_REQUEST,
                                       "Conflict: A connection for this session already exists", msg.id)
                self.end_session(old, "replaced")
            session_id = client_sid
        if session_id is None:
            import uuid  # (here, once per session: importing the server needs no `uuid`)
            session_id = str(uuid.uuid4())
        if not self._make_room():
            return _json_error(503, jsonrpc.INTERNAL_ERROR, "Service Unavailable: too many sessions (limit %d), "
                                                            "none idle" % (self.max_sessions or 0), msg.id)
        session = Session(session_id, client_sid, version, params.get("clientInfo"), SSE_HEADERS)
        session.client_pid = request.headers.get("x-copilot-pid")
        self.sessions[session_id] = session
        self._carry(session, connection)
        if self.on_session_start is not None:
            self.on_session_start(session)
        result = {"protocolVersion": version, "capabilities": self.capabilities, "serverInfo": self.server_info}
        return self._reply(session, jsonrpc.result_response(msg.id, result))

    def _initialize_again(self, params: Any, context: CallContext) -> Any:
        # Reached only for a second initialize inside a session (the HTTP layer answers
        # the real one): harmless, answer the session's terms again.
        session = context.session
        version = session.protocol_version if session is not None else LATEST_VERSION
        return {"protocolVersion": version, "capabilities": self.capabilities, "serverInfo": self.server_info}

    def _initialized(self, params: Any, context: CallContext) -> None:
        if context.session is not None:
            context.session.initialized = True

    def _cancelled(self, params: Any, context: CallContext) -> None:
        # PROTOCOL.md §3: the CLI gives up after 60 s and says so; drop that work.
        if context.session is None or not isinstance(params, dict):
            return
        request_id = params.get("requestId")
        if isinstance(request_id, (list, dict)):
            return  # no request has such an id (and it cannot be looked up)
        running = context.session.running.get(request_id)
        if running is not None and not running.done():
            log.info("request %r cancelled by the client: %s", request_id, params.get("reason"))
            running.cancel()

    # ---------------------------------------------------------------------------- GET

    def _get(self, request: http11.Request, connection: int = 0) -> Answer:
        """A session's GET stream (PROTOCOL.md §2): open until the session ends or the
        peer goes; pushes are written to it by `send_on_stream`."""
        session = self._session_for(request, connection)
        if not isinstance(session, Session):
            return session
        accept = request.headers.get("accept") or ""
        if accept and "text/event-stream" not in accept and "*/*" not in accept:
            return _json_error(406, jsonrpc.INVALID_REQUEST, "Not Acceptable: text/event-stream required")
        if session.stream is not None:
            # PROTOCOL.md §2, errors and edge cases: a JSON-RPC error like every refusal
            # past the head's checks.
            return _json_error(409, jsonrpc.INVALID_REQUEST, "Conflict: a stream is already open for this session")
        stream = session.stream = GetStream()
        if self.on_stream_open is not None:
            try:
                self.on_stream_open(session)  # (its pushes are written after the head)
            except Exception:
                log.exception("on_stream_open failed")
        return Stream(200, STREAM_HEADERS + (("mcp-session-id", session.id),), stream,
                      lambda: self._stream_closed(session, stream))

    @staticmethod
    def _stream_closed(session: Session, stream: GetStream) -> None:
        stream.close()
        if session.stream is stream:
            session.stream = None
        session.touch()

    def send_on_stream(self, session: Session, message: Dict[str, Any], event: Optional[bytes] = None) -> bool:
        """Write one notification on a session's GET stream; False when none is open.
        `event`: the message already encoded as an SSE event (a broadcast encodes once)."""
        stream = session.stream
        if stream is None or stream.closed:
            return False
        if self.on_exchange is not None:
            self.on_exchange("push", message)
        return stream.push(event if event is not None else sse.encode_message(jsonrpc.dumps(message)))

    def broadcast(self, message: Dict[str, Any]) -> int:
        """Send to every session with an open stream (PROTOCOL.md §5); returns how many."""
        event = sse.encode_message(jsonrpc.dumps(message))  # encoded once for all the streams
        return sum(1 for session in list(self.sessions.values()) if self.send_on_stream(session, message, event))

    # ------------------------------------------------------------------------- DELETE

    def _delete(self, request: http11.Request) -> Reply:
        """End the session: 200; an unknown one (a repeated DELETE) 404 (PROTOCOL.md §2, §7)."""
        session = self._session_for(request)
        if not isinstance(session, Session):
            return session
        self.end_session(session, "deleted")
        return Reply(200, (), b"")

    def end_session(self, session: Session, reason: str) -> None:
        """End a session: its stream ends, its running requests are cancelled and the
        owner resolves its pending diffs (`on_session_end`)."""
        if session.ended:
            return
        session.ended = True
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
        for connection in session.connections:
            carried = self._carried.get(connection)
            if carried is not None:
                carried.discard(session.id)
        session.connections.clear()
        if session.stream is not None:
            session.stream.end()
        for running in list(session.running.values()):
            running.cancel()
        if self.on_session_end is not None:
            try:
                self.on_session_end(session, reason)
            except Exception:
                log.exception("on_session_end failed")

    def expire_idle(self, idle_timeout: float, now: Optional[float] = None) -> List[Session]:
        """End sessions abandoned without DELETE: no stream, no request, quiet for
        `idle_timeout` seconds."""
        now = time.monotonic() if now is None else now
        expired = [s for s in list(self.sessions.values())
                   if not s.busy and now - s.last_seen >= idle_timeout]
        for session in expired:
            self.end_session(session, "idle")
        return expired
