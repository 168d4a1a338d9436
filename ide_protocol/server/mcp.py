"""MCP over Streamable HTTP, as Copilot CLI's `/ide` client uses it (PROTOCOL.md §2–3).

`McpApp` is the application run by `transport.HttpConnection` for each request. It knows
HTTP statuses, sessions, SSE and JSON-RPC, but nothing of sockets, and nothing of the
IDE: the methods (`tools/list`, `tools/call`, ...) come from a `rpc.Dispatcher`
given by the owner (`server.IdeServer`). Handlers receive a `CallContext` naming the
session and the request, which is how per-session tools (`update_session_name`,
`open_diff`) find their session.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import rpc
from ..wire import http11, jsonrpc, sse
from ..common.lockfile import uuid4
from .transport import Continuation, Responder

log = logging.getLogger(__name__)

#: Versions we can speak; the first is answered when the client asks for another
#: (PROTOCOL.md §3).
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_VERSION = SUPPORTED_VERSIONS[0]

MCP_PATHS = ("/mcp", "/")
ALLOW = "GET, POST, DELETE"
SSE_HEADERS = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]
STREAM_HEADERS = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache, no-transform")]


class Session:
    """One MCP session: what the server knows of one connected CLI."""

    def __init__(self, session_id: str, client_session_id: Optional[str], protocol_version: str,
                 client_info: Any) -> None:
        self.id = session_id
        self.client_session_id = client_session_id
        self.protocol_version = protocol_version
        self.client_info = client_info if isinstance(client_info, dict) else {}
        self.client_pid: Optional[str] = None
        self.initialized = False
        self.name: Optional[str] = None
        self.created = time.monotonic()
        self.last_seen = self.created
        self.stream: Optional[Responder] = None
        #: The head fields of this session's SSE answers (a tuple: encoded once).
        self.sse_headers = tuple(SSE_HEADERS) + (("mcp-session-id", session_id),)
        self.running: Dict[Any, "_Running"] = {}  # JSON-RPC id -> the running method
        self.active_requests = 0
        self.ended = False
        self._ended_event = asyncio.Event()

    @property
    def busy(self) -> bool:
        """A GET stream or a request is open: never idle-expired then (issue #3)."""
        return self.stream is not None or self.active_requests > 0

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    async def wait_ended(self) -> None:
        await self._ended_event.wait()

    def info(self) -> Dict[str, Any]:
        return {"id": self.id, "client_session_id": self.client_session_id, "name": self.name,
                "client": self.client_info.get("name"), "client_version": self.client_info.get("version"),
                "client_pid": self.client_pid, "protocol_version": self.protocol_version,
                "initialized": self.initialized, "stream_open": self.stream is not None,
                "running_requests": len(self.running)}


class _Running:
    """A request whose method has to wait (it runs in its connection's handler task):
    `cancel()` stops the method, and the request is then answered with an empty stream.
    `task` is None until that task takes the method up; a cancellation before then
    is noticed when it does (Python < 3.12 starts the task one loop pass later)."""

    __slots__ = ("task", "finished", "cancel_requested")

    def __init__(self) -> None:
        self.task: "Optional[asyncio.Task[Any]]" = None
        self.finished = False
        self.cancel_requested = False

    def done(self) -> bool:
        return self.finished

    def cancel(self) -> bool:
        if self.finished or self.cancel_requested:
            return False
        self.cancel_requested = True
        return self.task.cancel() if self.task is not None else True

    def uncancel(self) -> None:
        # Python 3.11+ counts cancellations; this one has been handled.
        uncancel = getattr(self.task, "uncancel", None)
        if uncancel is not None:
            uncancel()


class _Later:
    """A `transport.Continuation` that can also be given up: `close()` runs instead of
    the coroutine when the connection drops before its handler task takes it up, so
    that what the request holds (its place in `Session.running`, a stream) is let go."""

    __slots__ = ("_run", "_close", "_args")

    def __init__(self, run: Callable[..., Any], close: Callable[..., None], *args: Any) -> None:
        self._run = run
        self._close = close
        self._args = args

    def __call__(self) -> Any:
        return self._run(*self._args)

    def close(self) -> None:
        self._close(*self._args)


class CallContext:
    """What a method handler knows about the request it serves."""

    __slots__ = ("session", "request_id", "headers")

    def __init__(self, session: Optional[Session], request_id: Any, headers: http11.Headers) -> None:
        self.session = session
        self.request_id = request_id
        self.headers = headers


def _drop_deferred(deferred: rpc.Deferred, responder: Responder) -> None:
    deferred.drop()


def _json_error(status: int, code: int, message: str, msg_id: Any = None) -> Tuple[int, List[Tuple[str, str]], bytes]:
    body = jsonrpc.dumps(jsonrpc.error_response(msg_id, jsonrpc.JsonRpcError(code, message)))
    return status, [("Content-Type", "application/json")], body


class McpApp:
    """Routes HTTP requests to MCP sessions and JSON-RPC methods."""

    def __init__(self, dispatcher: rpc.Dispatcher, nonce: str, *,
                 server_info: Optional[Dict[str, Any]] = None,
                 capabilities: Optional[Dict[str, Any]] = None,
                 json_response: bool = False,
                 reuse_client_session_id: bool = True,
                 on_session_start: Optional[Callable[[Session], None]] = None,
                 on_session_end: Optional[Callable[[Session, str], None]] = None,
                 on_stream_open: Optional[Callable[[Session], None]] = None,
                 on_exchange: Optional[Callable[[str, Dict[str, Any]], None]] = None,
                 streams_early: Optional[Callable[[jsonrpc.Request], bool]] = None) -> None:
        self.dispatcher = dispatcher
        #: Which requests may block for long, so their response head is sent first.
        self.streams_early: Callable[[jsonrpc.Request], bool] = streams_early or (lambda msg: False)
        self._nonce = nonce.encode("utf-8")
        self.server_info = server_info or {"name": "vscode-copilot-cli", "version": "0.0.1",
                                           "title": "VS Code Copilot CLI"}
        self.capabilities = capabilities or {"tools": {"listChanged": True}}
        self.json_response = json_response
        self.reuse_client_session_id = reuse_client_session_id
        self.sessions: Dict[str, Session] = {}
        self.on_session_start = on_session_start
        self.on_session_end = on_session_end
        self.on_stream_open = on_stream_open
        self.on_exchange = on_exchange
        self.requests_served = 0
        # Heads accepted before (origin, nonce, session and version checked), by the
        # identity of their header index, which byte-identical heads share; each with
        # its session. Bounded: a head not found is simply checked again.
        self._known_heads: Dict[int, Tuple[Dict[str, List[str]], Session]] = {}
        dispatcher.add("initialize", self._initialize)
        dispatcher.add("ping", lambda params, ctx: {})
        dispatcher.add("notifications/initialized", self._initialized)
        dispatcher.add("notifications/cancelled", self._cancelled)

    # ---------------------------------------------------------------- the HTTP entry

    def __call__(self, request: http11.Request, body: bytes, responder: Responder) -> Optional[Continuation]:
        """Answer a request (the `transport.App` contract): at once where nothing has to
        wait, which is every request but a GET stream and a method that waits (open_diff);
        for those, the returned continuation does the waiting in the connection's task."""
        self.requests_served += 1
        headers = request.headers
        index = headers.index()
        known = self._known_heads.get(id(index))
        if known is not None and known[0] is index and not known[1].ended and request.method == "POST":
            # Byte for byte the head of a POST accepted before: same nonce, same
            # session, same answers to every check below (the CLI's usual request).
            known[1].last_seen = time.monotonic()  # (Session.touch)
            return self._post(request, body, responder, known[1])
        # PROTOCOL.md §2: a browser is the only thing that sends Origin; refuse it first
        # (DNS-rebinding style attacks), then check the nonce on every request.
        if headers.get("origin") is not None:
            responder.send_now(403, [("Content-Type", "text/plain")], b"Forbidden")
            return None
        if not self._authorized(headers.get("authorization")):
            responder.send_now(401, [("Content-Type", "text/plain")], b"Unauthorized")
            return None
        if request.path not in MCP_PATHS:
            responder.send_now(404, [("Content-Type", "text/plain")], b"Not Found")
            return None
        method = request.method
        if method == "POST":
            return self._post(request, body, responder, None)
        if method == "GET":
            return self._get(request, responder)
        if method == "DELETE":
            self._delete(request, responder)
        else:
            responder.send_now(405, [("Allow", ALLOW), ("Content-Type", "text/plain")], b"Method Not Allowed")
        return None

    def _authorized(self, value: Optional[str]) -> bool:
        if value is None:
            return False
        # Constant time over the secret: hmac.compare_digest (PROTOCOL.md §2).
        scheme, _, secret = value.strip().partition(" ")
        return scheme.lower() == "nonce" and hmac.compare_digest(secret.strip().encode("utf-8"), self._nonce)

    def _session_for(self, request: http11.Request) -> Tuple[Optional[Session], Optional[Tuple[int, List[Tuple[str, str]], bytes]]]:
        session_id = request.headers.get("mcp-session-id")
        if session_id is None:
            return None, _json_error(400, jsonrpc.INVALID_REQUEST, "Bad Request: missing mcp-session-id header")
        session = self.sessions.get(session_id)
        if session is None:
            return None, _json_error(404, jsonrpc.SESSION_NOT_FOUND, "Session not found")
        session.touch()
        return session, None

    def _version_error(self, request: http11.Request) -> Optional[Tuple[int, List[Tuple[str, str]], bytes]]:
        # Never required (1.0.102 does not send it, PROTOCOL.md §2), but a wrong one is
        # refused as the MCP transport spec asks.
        version = request.headers.get("mcp-protocol-version")
        if version is not None and version not in SUPPORTED_VERSIONS:
            return _json_error(400, jsonrpc.INVALID_REQUEST, "Bad Request: unsupported MCP-Protocol-Version %s" % version)
        return None

    # --------------------------------------------------------------------------- POST

    def _post(self, request: http11.Request, body: bytes, responder: Responder,
              known: Optional[Session]) -> Optional[Continuation]:
        """A JSON-RPC message; `known`: the session, when the head was accepted before."""
        try:
            obj = jsonrpc.loads(body)
        except jsonrpc.JsonRpcError as exc:
            responder.send_now(*_json_error(400, exc.code, exc.message))
            return None
        if isinstance(obj, list):
            responder.send_now(*_json_error(400, jsonrpc.INVALID_REQUEST, "Batches are not supported"))
            return None
        msg = jsonrpc.parse_message(obj)
        if isinstance(msg, jsonrpc.Invalid):
            responder.send_now(*_json_error(400, msg.error.code, msg.error.message, msg.id))
            return None
        if self.on_exchange is not None:
            self.on_exchange("in", obj)
        if isinstance(msg, jsonrpc.Request) and msg.method == "initialize":
            self._answer_initialize(request, msg, responder)
            return None
        session, error = (known, None) if known is not None else self._session_for(request)
        if session is None:
            if isinstance(msg, jsonrpc.Request) and msg.method == "server/discover":
                # PROTOCOL.md §3: an error makes the CLI fall back to initialize at once.
                # -32601 says the truth: we implement the stateful protocol only.
                self._answer(responder, None, jsonrpc.error_response(
                    msg.id, jsonrpc.JsonRpcError(jsonrpc.METHOD_NOT_FOUND, "Method not found: server/discover")))
                return None
            assert error is not None
            responder.send_now(*error)
            return None
        if known is None:
            version_error = self._version_error(request)
            if version_error is not None:
                responder.send_now(*version_error)
                return None
            self._remember_head(request.headers, session)
        context = CallContext(session, getattr(msg, "id", None), request.headers)
        if not isinstance(msg, jsonrpc.Request):
            # Notifications and the client's responses: 202, empty (PROTOCOL.md §2; the
            # CLI opens its GET stream only after a 202 for notifications/initialized).
            if isinstance(msg, jsonrpc.Notification):
                deferred = self.dispatcher.dispatch_now(msg, context)
                if isinstance(deferred, rpc.Deferred):
                    return _Later(self._finish_notification, _drop_deferred, deferred, responder)
            responder.send_now(202, [("Content-Type", "text/plain")], b"")
            return None
        # A request: answered at once when its method can (issue 6: no task, no loop
        # pass), its head, event and last chunk in one write.
        answer = self.dispatcher.dispatch_now(msg, context)
        if not isinstance(answer, rpc.Deferred):
            self._answer(responder, session, answer)
            return None
        return self._later(session, msg, answer, responder)

    def _remember_head(self, headers: http11.Headers, session: Session) -> None:
        if len(self._known_heads) >= 64:
            self._known_heads.clear()
        index = headers.index()
        self._known_heads[id(index)] = (index, session)

    async def _finish_notification(self, deferred: rpc.Deferred, responder: Responder) -> None:
        await deferred.run()
        responder.send_now(202, [("Content-Type", "text/plain")], b"")

    @staticmethod
    def _request_done(session: Session, msg: jsonrpc.Request, call: "_Running") -> None:
        call.finished = True
        if session.running.get(msg.id) is call:
            del session.running[msg.id]
        session.active_requests -= 1
        session.touch()

    def _drop_request(self, session: Session, msg: jsonrpc.Request, call: "_Running",
                      deferred: rpc.Deferred, responder: Responder) -> None:
        deferred.drop()
        self._request_done(session, msg, call)

    def _later(self, session: Session, msg: jsonrpc.Request, answer: rpc.Deferred,
               responder: Responder) -> Continuation:
        """A request whose method has to wait."""
        if not self.json_response and self.streams_early(msg):
            # Head first for a method that blocks (open_diff waits for a person): the
            # client sees a live 200 at once, before the method starts.
            responder.start_nowait(200, session.sse_headers)
        # The method has to wait: it runs in the connection's handler task (issue 6: a
        # task per request costs more than most methods); `call` is what
        # notifications/cancelled and the end of the session cancel.
        session.active_requests += 1
        call = _Running()
        session.running[msg.id] = call
        return _Later(self._finish_request, self._drop_request, session, msg, call, answer, responder)

    async def _finish_request(self, session: Session, msg: jsonrpc.Request, call: _Running,
                              deferred: rpc.Deferred, responder: Responder) -> None:
        call.task = asyncio.current_task()
        response: Optional[Dict[str, Any]] = None
        try:
            if call.cancel_requested:
                deferred.drop()  # cancelled before this task could take it up
            else:
                try:
                    response = await deferred.run()
                finally:
                    call.finished = True
        except asyncio.CancelledError:
            if not call.cancel_requested:
                raise  # our connection went away (the transport cancelled us), or we stop
            call.uncancel()
            response = None  # cancelled by notifications/cancelled: no answer is due
        finally:
            self._request_done(session, msg, call)
        self._answer(responder, session, response)

    def _answer(self, responder: Responder, session: Optional[Session], response: Optional[Dict[str, Any]]) -> None:
        if self.on_exchange is not None and response is not None:
            self.on_exchange("out", response)
        if self.json_response and not responder.started:
            headers = [("mcp-session-id", session.id)] if session is not None else []
            if response is None:
                responder.send_now(202, [("Content-Type", "text/plain")] + headers, b"")
            else:
                responder.send_now(200, [("Content-Type", "application/json")] + headers, jsonrpc.dumps(response))
            return
        event = sse.encode_message(jsonrpc.dumps(response)) if response is not None else b""
        if not responder.started:
            # Head, event and last chunk in one write: one system call, one wake-up.
            responder.send_chunked_now(200, session.sse_headers if session is not None else tuple(SSE_HEADERS),
                                       (event,) if event else ())
        else:
            responder.end_now(event)

    # ------------------------------------------------------------------- initialize

    def _answer_initialize(self, request: http11.Request, msg: jsonrpc.Request, responder: Responder) -> None:
        params = msg.params if isinstance(msg.params, dict) else {}
        requested = params.get("protocolVersion")
        version = requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION
        client_sid = request.headers.get("x-copilot-session-id")
        session_id = None
        if self.reuse_client_session_id and client_sid:
            # VS Code reuses the CLI's own session id (PROTOCOL.md §3). A live session
            # with that id (its GET stream open) is a conflict; a stale one is taken over.
            old = self.sessions.get(client_sid)
            if old is not None:
                if old.stream is not None and not old.stream.closed:
                    responder.send_now(*_json_error(409, jsonrpc.INVALID_REQUEST,
                                                    "Conflict: session %s is active" % client_sid, msg.id))
                    return
                self.end_session(old, "replaced")
            session_id = client_sid
        if session_id is None:
            session_id = uuid4()
        session = Session(session_id, client_sid, version, params.get("clientInfo"))
        session.client_pid = request.headers.get("x-copilot-pid")
        self.sessions[session_id] = session
        if self.on_session_start is not None:
            self.on_session_start(session)
        result = {"protocolVersion": version, "capabilities": self.capabilities, "serverInfo": self.server_info}
        self._answer(responder, session, jsonrpc.result_response(msg.id, result))

    def _initialize(self, params: Any, context: CallContext) -> Any:
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
        task = context.session.running.get(request_id)
        if task is not None and not task.done():
            log.info("request %r cancelled by the client: %s", request_id, params.get("reason"))
            task.cancel()

    # ---------------------------------------------------------------------------- GET

    def _get(self, request: http11.Request, responder: Responder) -> Optional[Continuation]:
        session, error = self._session_for(request)
        if session is None:
            assert error is not None
            responder.send_now(*error)
            return None
        accept = request.headers.get("accept") or ""
        if accept and "text/event-stream" not in accept and "*/*" not in accept:
            responder.send_now(406, [("Content-Type", "text/plain")], b"Not Acceptable: text/event-stream required")
            return None
        if session.stream is not None and not session.stream.closed:
            responder.send_now(409, [("Content-Type", "text/plain")], b"Conflict: a stream is already open for this session")
            return None
        responder.start_nowait(200, STREAM_HEADERS + [("Connection", "keep-alive"), ("mcp-session-id", session.id)])
        session.stream = responder
        return _Later(self._stream, self._stream_done, session, responder)

    async def _stream(self, session: Session, responder: Responder) -> None:
        """A session's GET stream stays open until the session ends or the peer goes
        (pushes are written to it by `send_on_stream`)."""
        try:
            if self.on_stream_open is not None:
                self.on_stream_open(session)
            ended = asyncio.ensure_future(session.wait_ended())
            gone = asyncio.ensure_future(responder.wait_closed())
            try:
                await asyncio.wait({ended, gone}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                ended.cancel()
                gone.cancel()
        finally:
            self._stream_done(session, responder)
        responder.end_now()

    @staticmethod
    def _stream_done(session: Session, responder: Responder) -> None:
        if session.stream is responder:
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
        return stream.chunk_nowait(event if event is not None else sse.encode_message(jsonrpc.dumps(message)))

    def broadcast(self, message: Dict[str, Any]) -> int:
        """Send to every session with an open stream (PROTOCOL.md §5); returns how many."""
        event = sse.encode_message(jsonrpc.dumps(message))  # once for all the streams (issue 6)
        return sum(1 for session in list(self.sessions.values()) if self.send_on_stream(session, message, event))

    # ------------------------------------------------------------------------- DELETE

    def _delete(self, request: http11.Request, responder: Responder) -> None:
        session, error = self._session_for(request)
        if session is None:
            assert error is not None
            responder.send_now(*error)
            return
        self.end_session(session, "deleted")
        responder.send_now(200, [], b"")

    def end_session(self, session: Session, reason: str) -> None:
        """End a session: its stream closes, its running requests are cancelled and the
        owner resolves its pending diffs (`on_session_end`)."""
        if session.ended:
            return
        session.ended = True
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
        for key, (_, known) in list(self._known_heads.items()):
            if known is session:
                del self._known_heads[key]
        session._ended_event.set()
        for task in list(session.running.values()):
            task.cancel()
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
