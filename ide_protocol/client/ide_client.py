"""The client side of the `/ide` protocol: talk to any IDE server as Copilot CLI does.

Two layers, so that the conformance checker and the tracer reuse the HTTP logic instead
of growing their own:

* **Low level** — `ClientConnection` (one socket, one request at a time, keep-alive) and
  `ClientResponse` (a response read incrementally: head first, then body pieces, SSE
  events or JSON-RPC messages). Any header set, any body, any method: the checker uses
  this to send the requests a conformant server must refuse.
* **High level** — `IdeClient`: discovery from the lock files (PROTOCOL.md §1), the
  handshake (`server/discover`, `initialize`, `notifications/initialized`, §3), tools
  (§4) with typed helpers, the GET stream and its pushes (§5), DELETE at the end, and a
  small pool of keep-alive connections (§2: the CLI pools them too).

Everything is asyncio and the standard library. Failures are explicit: a server that
vanishes gives `ServerGone` (never a hang), a server that does not answer in time gives
`IdeTimeout`, HTTP-level refusals give `HttpStatusError`, JSON-RPC errors give
`jsonrpc.JsonRpcError`.
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import json
import os
import uuid
from typing import Any, AsyncIterator, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from ..wire import http11, jsonrpc, sse
from ..common import lockfile, tools
from ..common.lockfile import LockInfo

__all__ = [
    "ClientError", "ServerGone", "IdeTimeout", "HttpStatusError", "NoIdeFound", "ProtocolViolation",
    "ClientConnection", "ClientResponse", "Push", "IdeClient", "discover", "open_socket",
    "cli_headers", "DEFAULT_TIMEOUT", "PUSH_METHODS",
]

#: Ordinary requests time out after 60 s in the CLI (PROTOCOL.md §3).
DEFAULT_TIMEOUT = 60.0
DEFAULT_CONNECT_TIMEOUT = 5.0
READ_SIZE = 256 * 1024
CLIENT_NAME = "copilot-cli"
CLIENT_VERSION = "1.0.102"
PROTOCOL_VERSION = "2025-11-25"
DRAFT_PROTOCOL_VERSION = "2026-07-28"
#: The notifications an IDE pushes on the GET stream (PROTOCOL.md §5).
PUSH_METHODS = ("selection_changed", "diagnostics_changed", "add_file_reference", "add_selection")

POST_ACCEPT = "application/json, text/event-stream"
STREAM_ACCEPT = "text/event-stream"


# ------------------------------------------------------------------------- errors


class ClientError(Exception):
    """Base of the errors this module raises (besides `jsonrpc.JsonRpcError`)."""


class ServerGone(ClientError, ConnectionError):
    """The server closed the connection (or refused one) before the exchange was complete."""


class IdeTimeout(ClientError, asyncio.TimeoutError):
    """The server did not answer within the configured timeout."""


class ProtocolViolation(ClientError):
    """The server answered something unparsable (bad HTTP framing, not JSON, ...)."""


class HttpStatusError(ClientError):
    """An HTTP status other than the expected one; carries the whole answer as evidence."""

    def __init__(self, status: int, reason: str, headers: http11.Headers, body: bytes, what: str = "") -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        text = body[:300].decode("utf-8", "replace")
        super().__init__("%sHTTP %d %s%s" % (what + ": " if what else "", status, reason,
                                              (" — " + text) if text else ""))


class NoIdeFound(ClientError):
    """No lock file matches the folder. `others` are the usable locks the CLI would list
    in its `/ide` picker, `rejected` the lock files it would skip, with the reason."""

    def __init__(self, folder: str, directory: str, others: Sequence[LockInfo],
                 rejected: Sequence[Tuple[str, str]]) -> None:
        self.folder = folder
        self.directory = directory
        self.others = list(others)
        self.rejected = list(rejected)
        lines = ["no IDE lock in %s lists the folder %s (exact match on the real path, PROTOCOL.md §1)"
                 % (directory, folder)]
        for info in self.others:
            lines.append("  other IDE: %s (pid %d) folders %s — lock %s"
                         % (info.ide_name, info.pid, ", ".join(info.workspace_folders), info.path))
        for path, reason in self.rejected:
            lines.append("  skipped: %s: %s" % (path, reason))
        super().__init__("\n".join(lines))


# -------------------------------------------------------------------- low level


async def open_socket(path: str, timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT
                      ) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to an IDE's socket (Unix) or named pipe (Windows), as streams.

    Refusals become `ServerGone` naming the path, so a stale lock gives a readable error.
    """
    try:
        if lockfile._is_pipe_path(path):  # Windows: \\.\pipe\mcp-<uuid>.sock (§1)
            from ..common import winpipe

            return await asyncio.wait_for(winpipe.open_pipe_connection(path), timeout)
        return await asyncio.wait_for(asyncio.open_unix_connection(path, limit=2 ** 20), timeout)
    except asyncio.TimeoutError:
        raise IdeTimeout("connecting to %s took longer than %s s" % (path, timeout)) from None
    except (OSError, ValueError) as exc:
        raise ServerGone("cannot connect to the IDE socket %s: %s" % (path, exc)) from None


class ClientResponse:
    """One response, read incrementally from its connection.

    The head (`status`, `reason`, `headers`) is known when the object is returned; the
    body is read on demand: `read_body()`, `iter_data()`, `iter_events()` (SSE) or
    `messages()` (JSON-RPC, whichever the content type). When the body is complete the
    connection is free for the next request (keep-alive, PROTOCOL.md §2).
    """

    def __init__(self, conn: "ClientConnection", head: http11.Response, method: str) -> None:
        self.conn = conn
        self.status = head.status
        self.reason = head.reason
        self.headers = head.headers
        self.http_version = head.http_version
        self.method = method
        self.complete = False
        self.body = bytearray()  # everything read so far (kept for evidence)
        self._decoder: Optional[sse.SSEDecoder] = None
        self._pending_events: Deque[sse.SSEEvent] = collections.deque()

    @property
    def content_type(self) -> str:
        return (self.headers.get("content-type") or "").split(";")[0].strip().lower()

    @property
    def is_sse(self) -> bool:
        return self.content_type == "text/event-stream"

    @property
    def chunked(self) -> bool:
        return "chunked" in self.headers.tokens("transfer-encoding")

    async def next_data(self, timeout: Optional[float] = None) -> Optional[bytes]:
        """The next piece of the body, or None at its end."""
        if self.complete:
            return None
        event = await self.conn._next_event(timeout, "the body of a %d response to %s" % (self.status, self.method))
        if isinstance(event, http11.Data):
            self.body += event.data
            return event.data
        if isinstance(event, http11.EndOfMessage):
            self.complete = True
            self.conn._response_done(self)
            return None
        raise ProtocolViolation("unexpected %r inside a response body" % (event,))

    async def iter_data(self, timeout: Optional[float] = None) -> AsyncIterator[bytes]:
        """Body pieces as they arrive; `timeout` bounds the wait for each piece."""
        while True:
            data = await self.next_data(timeout)
            if data is None:
                return
            yield data

    async def read_body(self, timeout: Optional[float] = None) -> bytes:
        while await self.next_data(timeout) is not None:
            pass
        return bytes(self.body)

    async def next_event(self, timeout: Optional[float] = None) -> Optional[sse.SSEEvent]:
        """The next SSE event of a `text/event-stream` body, or None at its end."""
        if self._decoder is None:
            self._decoder = sse.SSEDecoder()
        pending = self._pending_events
        while not pending:
            data = await self.next_data(timeout)
            if data is None:
                return None
            pending.extend(self._decoder.feed(data))
        return pending.popleft()

    async def iter_events(self, timeout: Optional[float] = None) -> AsyncIterator[sse.SSEEvent]:
        while True:
            event = await self.next_event(timeout)
            if event is None:
                return
            yield event

    async def next_message(self, timeout: Optional[float] = None) -> Optional[Any]:
        """The next JSON-RPC message carried by the body (one per SSE event, or the
        whole `application/json` body), or None at its end. Raises ProtocolViolation on
        a body that is not JSON."""
        if self.is_sse:
            event = await self.next_event(timeout)
            if event is None:
                return None
            try:
                return jsonrpc.loads(event.data)
            except jsonrpc.JsonRpcError:
                raise ProtocolViolation("SSE event data is not JSON: %r" % event.data[:200]) from None
        if self.complete:
            return None
        body = await self.read_body(timeout)
        if not body.strip():
            return None
        try:
            return jsonrpc.loads(body)
        except jsonrpc.JsonRpcError:
            raise ProtocolViolation("%d response body is not JSON: %r" % (self.status, body[:200])) from None

    async def messages(self, timeout: Optional[float] = None) -> List[Any]:
        """Every JSON-RPC message of the body (reads it to the end)."""
        out = []
        while True:
            message = await self.next_message(timeout)
            if message is None:
                return out
            out.append(message)

    def text(self) -> str:
        return bytes(self.body).decode("utf-8", "replace")

    def describe(self) -> str:
        """A one-line summary with the start of the body, for error messages."""
        text = self.text()
        return "HTTP %d %s [%s]%s" % (self.status, self.reason, self.headers.get("content-type") or "no content-type",
                                      (" " + text[:300]) if text else "")

    def __repr__(self) -> str:
        return "<ClientResponse %d %s on #%d>" % (self.status, self.reason, self.conn.number)


WireHook = Callable[["ClientConnection", str, bytes], None]


class ClientConnection:
    """One HTTP/1.1 connection to an IDE server: send a request, read its response.

    One request at a time; after its response is complete the next may follow on the
    same socket (keep-alive). `on_wire(conn, direction, data)` sees every byte sent
    ("C>S") and received ("S>C"), which the tests of the tracer use to compare bytes.
    """

    _numbers = itertools.count(1)

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str = "",
                 on_wire: Optional[WireHook] = None) -> None:
        self.reader = reader
        self.writer = writer
        self.path = path
        self.number = next(ClientConnection._numbers)
        self.on_wire = on_wire
        self.requests = 0
        self.closed = False
        self.busy = False
        self.keep_alive = True
        self._parser = http11.ResponseParser()
        self._events: Deque[http11.ParserEvent] = collections.deque()
        self._eof = False

    @classmethod
    async def open(cls, path: str, timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT,
                   on_wire: Optional[WireHook] = None) -> "ClientConnection":
        reader, writer = await open_socket(path, timeout)
        return cls(reader, writer, path, on_wire)

    @property
    def reusable(self) -> bool:
        """Idle, open, and the last response allowed keep-alive."""
        return not self.closed and not self.busy and self.keep_alive and not self._eof and self._parser.idle

    async def send(self, data: bytes) -> None:
        """Write raw bytes (the checker sends hand-made requests this way)."""
        if self.closed:
            raise ServerGone("connection #%d is closed" % self.number)
        if self.on_wire is not None:
            self.on_wire(self, "C>S", data)
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, OSError, RuntimeError) as exc:
            self.close()
            raise ServerGone("the IDE server closed connection #%d while we were sending: %s"
                             % (self.number, exc)) from None

    async def request(self, method: str, target: str = "/mcp", headers: http11.HeadersLike = None,
                      body: Optional[bytes] = None, chunked: bool = True,
                      timeout: Optional[float] = DEFAULT_TIMEOUT) -> ClientResponse:
        """Send one request and wait for the head of its response.

        POST bodies go out chunked by default, as the CLI sends them (PROTOCOL.md §2);
        `chunked=False` sends `Content-Length` (other clients do). `timeout` bounds the
        wait for the response head (None: no limit, e.g. a blocking `open_diff`).
        """
        if self.busy:
            raise RuntimeError("connection #%d is busy with another request" % self.number)
        data = http11.write_request(method, target, headers, body, chunked=chunked and body is not None)
        self.busy = True
        self.requests += 1
        self._parser.expect(method)
        await self.send(data)
        return await self.read_response(method, timeout)

    async def read_response(self, method: str = "GET", timeout: Optional[float] = DEFAULT_TIMEOUT) -> ClientResponse:
        """Wait for the next response head (after `send` of a hand-made request)."""
        self.busy = True
        while True:
            event = await self._next_event(timeout, "the response to %s" % method)
            if isinstance(event, http11.Response):
                if 100 <= event.status < 200:
                    continue  # interim; its EndOfMessage follows
                response = ClientResponse(self, event, method)
                self.keep_alive = event.keep_alive
                return response
            if isinstance(event, http11.EndOfMessage):
                continue  # the end of an interim response
            raise ProtocolViolation("expected a response head, got %r" % (event,))

    async def _next_event(self, timeout: Optional[float], what: str) -> http11.ParserEvent:
        while not self._events:
            if self._eof:
                raise ServerGone("the IDE server closed connection #%d before %s was complete" % (self.number, what))
            try:
                data = await asyncio.wait_for(self.reader.read(READ_SIZE), timeout)
            except asyncio.TimeoutError:
                self.close()
                raise IdeTimeout("no answer from the IDE server within %s s while waiting for %s (connection #%d)"
                                 % (timeout, what, self.number)) from None
            except (ConnectionError, OSError) as exc:
                data = b""
                self._eof = True
                self.close()
                raise ServerGone("connection #%d to the IDE server failed while waiting for %s: %s"
                                 % (self.number, what, exc)) from None
            if data:
                if self.on_wire is not None:
                    self.on_wire(self, "S>C", data)
                events = self._parser.feed(data)
            else:
                self._eof = True
                events = self._parser.feed_eof()
            for event in events:
                if isinstance(event, http11.ParseError):
                    self.close()
                    if self._eof:
                        raise ServerGone("the IDE server closed connection #%d in the middle of %s"
                                         % (self.number, what))
                    raise ProtocolViolation("malformed HTTP from the IDE server on connection #%d: %s"
                                            % (self.number, event.message))
                if isinstance(event, http11.ConnectionClosed):
                    self.close()
                    raise ServerGone("the IDE server closed connection #%d before %s" % (self.number, what))
                self._events.append(event)
        return self._events.popleft()

    def _response_done(self, response: ClientResponse) -> None:
        self.busy = False
        if not self.keep_alive:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass

    def __repr__(self) -> str:
        return "<ClientConnection #%d %s%s>" % (self.number, self.path, " closed" if self.closed else "")


def cli_headers(lock_headers: Dict[str, str], session_id: str, *, accept: Optional[str] = POST_ACCEPT,
                content_type: Optional[str] = "application/json", mcp_session_id: Optional[str] = None,
                pid: Optional[int] = None, parent_pid: Optional[int] = None) -> List[Tuple[str, str]]:
    """Request headers in the CLI's order and case (PROTOCOL.md §2; the capture):
    `X-Copilot-Session-Id`, `X-Copilot-PID`, `X-Copilot-Parent-PID`, the lock's headers
    verbatim, `accept`, `content-type`, `mcp-session-id`, `Host`, `Connection`.
    (`Transfer-Encoding: chunked` is appended by the writer for bodies.)"""
    headers = [("X-Copilot-Session-Id", session_id),
               ("X-Copilot-PID", str(os.getpid() if pid is None else pid)),
               ("X-Copilot-Parent-PID", str(_parent_pid() if parent_pid is None else parent_pid))]
    headers.extend(lock_headers.items())
    if accept is not None:
        headers.append(("accept", accept))
    if content_type is not None:
        headers.append(("content-type", content_type))
    if mcp_session_id is not None:
        headers.append(("mcp-session-id", mcp_session_id))
    headers.append(("Host", "localhost"))
    headers.append(("Connection", "keep-alive"))
    return headers


def _parent_pid() -> int:
    getppid = getattr(os, "getppid", None)
    return getppid() if getppid is not None else 0


# -------------------------------------------------------------------- discovery


def discover(folder: Optional[str] = None, lock_dir: Optional[str] = None) -> LockInfo:
    """The lock the CLI would auto-connect to from `folder` (default: the cwd).

    PROTOCOL.md §1, through `lockfile.find_lock_for_folder`: strict types, live pid,
    reachable socket, exact match of the folder's real path. Raises `NoIdeFound`
    listing the other usable locks and the skipped ones with their reasons.
    """
    folder = os.getcwd() if folder is None else folder
    directory = lock_dir if lock_dir is not None else lockfile.lock_dir()
    match, others = lockfile.find_lock_for_folder(folder, directory)
    if match is not None:
        return match
    usable = {o.path for o in others}
    rejected: List[Tuple[str, str]] = []
    for path, info in lockfile.read_locks(directory):
        if isinstance(info, lockfile.LockFileError):
            rejected.append((path, info.reason))
        elif path not in usable:
            if not lockfile.pid_alive(info.pid):
                rejected.append((path, "pid %d is not alive" % info.pid))
            else:
                rejected.append((path, "socket %s refuses connections" % info.socket_path))
    raise NoIdeFound(os.path.realpath(folder), directory, others, rejected)


# ------------------------------------------------------------------- high level


class Push:
    """A notification the server pushed on the GET stream (PROTOCOL.md §5)."""

    __slots__ = ("method", "params", "raw")

    def __init__(self, method: str, params: Any, raw: Dict[str, Any]) -> None:
        self.method = method
        self.params = params
        self.raw = raw

    def __repr__(self) -> str:
        return "Push(%r, %r)" % (self.method, self.params)


_END = object()
PushCallback = Callable[[Push], Any]


class IdeClient:
    """An `/ide` client session, connected as Copilot CLI connects (PROTOCOL.md §2–5).

        client = IdeClient.discover("/home/me/project")
        async with client:                     # handshake + GET stream
            sel = await client.get_selection()
            async for push in client.pushes():
                print(push.method, push.params)

    `timeout` bounds ordinary requests (the CLI's 60 s); `open_diff` waits without limit
    unless given one. Pushes go to `on_push` and to every `pushes()` iterator.
    """

    def __init__(self, lock: LockInfo, *, session_id: Optional[str] = None,
                 client_name: str = CLIENT_NAME, client_version: str = CLIENT_VERSION,
                 protocol_version: str = PROTOCOL_VERSION,
                 timeout: Optional[float] = DEFAULT_TIMEOUT,
                 connect_timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT,
                 pool_size: int = 4,
                 on_push: Optional[PushCallback] = None,
                 on_wire: Optional[WireHook] = None,
                 pid: Optional[int] = None, parent_pid: Optional[int] = None) -> None:
        self.lock = lock
        #: X-Copilot-Session-Id: the CLI's own session UUID (PROTOCOL.md §2).
        self.client_session_id = session_id or str(uuid.uuid4())
        self.client_name = client_name
        self.client_version = client_version
        self.protocol_version = protocol_version
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.pool_size = pool_size
        self.on_push = on_push
        self.on_wire = on_wire
        self.pid = pid
        self.parent_pid = parent_pid
        self.session_id: Optional[str] = None       # mcp-session-id from initialize
        self.server_info: Dict[str, Any] = {}
        self.initialize_result: Dict[str, Any] = {}
        self.discover_error: Optional[Dict[str, Any]] = None
        self.tools: Optional[List[Dict[str, Any]]] = None
        self.connections_opened = 0
        self._idle: List[ClientConnection] = []
        self._all: List[ClientConnection] = []
        self._ids = itertools.count(0)          # request ids restart at 0 per session (§3)
        self._progress = itertools.count(0)
        self._subscribers: List["asyncio.Queue[Any]"] = []
        self._stream_task: Optional["asyncio.Task[None]"] = None
        self._stream_conn: Optional[ClientConnection] = None
        self._stream_error: Optional[BaseException] = None
        self.stream_ended = False
        self._closed = False

    # ------------------------------------------------------------------ discovery

    @classmethod
    def discover(cls, folder: Optional[str] = None, lock_dir: Optional[str] = None, **kwargs: Any) -> "IdeClient":
        """A client for the IDE whose lock lists `folder` (see the module function)."""
        return cls(discover(folder, lock_dir), **kwargs)

    @classmethod
    def from_lock_file(cls, path: str, **kwargs: Any) -> "IdeClient":
        """A client for the server described by one lock file (validated strictly)."""
        with open(path, "rb") as f:
            raw = json.loads(f.read().decode("utf-8-sig"))
        return cls(LockInfo.from_json(raw, path), **kwargs)

    # ----------------------------------------------------------------- connections

    async def _acquire(self) -> Tuple[ClientConnection, bool]:
        """An idle pooled connection (True) or a fresh one (False)."""
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable:
                return conn, True
            conn.close()
        conn = await ClientConnection.open(self.lock.socket_path, self.connect_timeout, self.on_wire)
        self.connections_opened += 1
        self._all.append(conn)
        self._all = [c for c in self._all if not c.closed or c is conn]
        return conn, False

    def _release(self, conn: ClientConnection) -> None:
        if conn.reusable and not self._closed and len(self._idle) < self.pool_size:
            self._idle.append(conn)
        elif not conn.busy:
            conn.close()

    async def _exchange(self, method: str, headers: List[Tuple[str, str]], body: Optional[bytes],
                        timeout: Optional[float]) -> ClientResponse:
        """Send on a pooled connection; a pooled one the server closed meanwhile is
        retried once on a fresh connection (it failed before any answer arrived)."""
        conn, reused = await self._acquire()
        try:
            return await conn.request(method, "/mcp", headers, body, timeout=timeout)
        except ServerGone:
            conn.close()
            if not reused:
                raise
        conn, _ = await self._acquire()
        try:
            return await conn.request(method, "/mcp", headers, body, timeout=timeout)
        except BaseException:
            conn.close()
            raise

    def headers(self, method: str = "POST", with_session: bool = True) -> List[Tuple[str, str]]:
        """The headers the CLI sends for `method` (PROTOCOL.md §2; order as captured)."""
        sid = self.session_id if with_session else None
        if method == "POST":
            return cli_headers(self.lock.headers, self.client_session_id, mcp_session_id=sid,
                               pid=self.pid, parent_pid=self.parent_pid)
        if method == "GET":
            return cli_headers(self.lock.headers, self.client_session_id, accept=STREAM_ACCEPT, content_type=None,
                               mcp_session_id=sid, pid=self.pid, parent_pid=self.parent_pid)
        return cli_headers(self.lock.headers, self.client_session_id, accept=None, content_type=None,
                           mcp_session_id=sid, pid=self.pid, parent_pid=self.parent_pid)

    # -------------------------------------------------------------------- JSON-RPC

    async def post(self, message: Dict[str, Any], *, with_session: bool = True,
                   timeout: Optional[float] = None) -> ClientResponse:
        """POST one JSON-RPC message; returns the response with its head read."""
        timeout = self.timeout if timeout is None else timeout
        return await self._exchange("POST", self.headers("POST", with_session), jsonrpc.dumps(message), timeout)

    async def _await_answer(self, response: ClientResponse, request_id: Any, timeout: Optional[float]) -> Any:
        """Read a POST's body up to the answer to `request_id`; notifications that come
        on the way are delivered as pushes. Returns the whole response object."""
        answer = None
        try:
            while True:
                message = await response.next_message(timeout)
                if message is None:
                    break
                if isinstance(message, dict) and message.get("id") == request_id and (
                        "result" in message or "error" in message):
                    answer = message
                    # The answer is in; the end of the body must follow promptly.
                    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
                elif isinstance(message, dict) and "method" in message and "id" not in message:
                    self._deliver(message)
            return answer
        finally:
            if response.complete:
                self._release(response.conn)
            else:
                response.conn.close()

    async def request(self, method: str, params: Any = None, *, timeout: Optional[float] = -1.0,
                      with_session: bool = True) -> Any:
        """Send a request and return its `result`; raises `JsonRpcError` for an error
        answer, `HttpStatusError` for an HTTP refusal. `timeout=None`: wait forever;
        default: the client's. On timeout, `notifications/cancelled` is sent as the
        CLI does (PROTOCOL.md §3) and `IdeTimeout` raised."""
        if timeout is not None and timeout < 0:
            timeout = self.timeout
        request_id = next(self._ids)
        message = jsonrpc.request(request_id, method, params)
        try:
            response = await self._exchange("POST", self.headers("POST", with_session), jsonrpc.dumps(message),
                                            timeout)
            if response.status != 200:
                body = await self._drain(response)
                error = _json_error(body)
                if error is not None:
                    raise error
                raise HttpStatusError(response.status, response.reason, response.headers, body, method)
            answer = await self._await_answer(response, request_id, timeout)
        except IdeTimeout:
            await self._cancel_quietly(request_id, "timed out after %s s" % timeout)
            raise
        if answer is None:
            raise ProtocolViolation("the %d response to %s (id %r) carried no answer: %r"
                                    % (response.status, method, request_id, bytes(response.body)[:300]))
        if "error" in answer:
            raise jsonrpc.JsonRpcError.from_dict(answer["error"])
        return answer.get("result")

    async def _drain(self, response: ClientResponse) -> bytes:
        try:
            return await response.read_body(self.timeout)
        finally:
            if response.complete:
                self._release(response.conn)
            else:
                response.conn.close()

    async def _cancel_quietly(self, request_id: Any, reason: str) -> None:
        try:
            await asyncio.wait_for(self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason}),
                                   5)
        except (ClientError, asyncio.TimeoutError, jsonrpc.JsonRpcError, OSError):
            pass

    async def notify(self, method: str, params: Any = None, *, expect_status: int = 202) -> ClientResponse:
        """Send a notification; the server must answer `202` (PROTOCOL.md §2)."""
        message = jsonrpc.notification(method, params)
        response = await self._exchange("POST", self.headers("POST"), jsonrpc.dumps(message), self.timeout)
        body = await self._drain(response)
        if response.status != expect_status:
            raise HttpStatusError(response.status, response.reason, response.headers, body,
                                  "%s (expected %d)" % (method, expect_status))
        return response

    # ------------------------------------------------------------------- handshake

    async def connect(self, *, follow_stream: bool = True, list_tools: bool = True) -> "IdeClient":
        """The CLI's handshake (PROTOCOL.md §3): `server/discover` (an error is the
        expected answer), `initialize`, `notifications/initialized` (202), then the GET
        stream (its head is awaited, so pushes after `connect()` are not missed) and
        `tools/list`."""
        self._ids = itertools.count(0)
        self._progress = itertools.count(0)
        self.session_id = None
        self.stream_ended = False
        self._stream_error = None
        discover_params = {"_meta": {
            "io.modelcontextprotocol/protocolVersion": DRAFT_PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": self.client_name, "version": self.client_version},
            "io.modelcontextprotocol/clientCapabilities": {}}}
        try:
            await self.request("server/discover", discover_params, with_session=False)
        except jsonrpc.JsonRpcError as exc:
            self.discover_error = exc.to_dict()  # expected: fall back to initialize at once
        except HttpStatusError as exc:
            if exc.status == 401:
                raise  # the CLI aborts the attempt on 401 (§3)
            self.discover_error = {"status": exc.status}
        init_id = next(self._ids)
        message = jsonrpc.request(init_id, "initialize", {
            "protocolVersion": self.protocol_version, "capabilities": {},
            "clientInfo": {"name": self.client_name, "version": self.client_version}})
        response = await self.post(message, with_session=False)
        if response.status != 200:
            body = await self._drain(response)
            raise HttpStatusError(response.status, response.reason, response.headers, body, "initialize")
        session_id = response.headers.get("mcp-session-id")
        answer = await self._await_answer(response, init_id, self.timeout)
        if answer is None or "error" in answer:
            if answer is not None:
                raise jsonrpc.JsonRpcError.from_dict(answer["error"])
            raise ProtocolViolation("initialize answered without a result")
        if not session_id:
            raise ProtocolViolation("initialize answered without an mcp-session-id header (PROTOCOL.md §3)")
        self.session_id = session_id
        self.initialize_result = answer.get("result") or {}
        self.server_info = self.initialize_result.get("serverInfo") or {}
        await self.notify("notifications/initialized")
        if follow_stream:
            await self.open_stream()
        if list_tools:
            await self.list_tools()
        return self

    async def open_stream(self) -> None:
        """Open the GET stream (PROTOCOL.md §2) and follow it in a background task."""
        response = await self._exchange("GET", self.headers("GET"), None, self.timeout)
        if response.status != 200 or not response.is_sse:
            body = await self._drain(response)
            raise HttpStatusError(response.status, response.reason, response.headers, body, "GET stream")
        self._stream_conn = response.conn
        self._stream_task = asyncio.ensure_future(self._follow(response))

    async def _follow(self, response: ClientResponse) -> None:
        try:
            while True:
                message = await response.next_message(None)  # idle streams are normal (§2)
                if message is None:
                    break
                if isinstance(message, dict) and "method" in message and "id" not in message:
                    self._deliver(message)
            self.stream_ended = True
            self._release(response.conn)
        except asyncio.CancelledError:
            response.conn.close()
            raise
        except BaseException as exc:
            self._stream_error = exc if isinstance(exc, ClientError) else ServerGone(
                "the GET stream failed: %s" % exc)
            response.conn.close()
        finally:
            self._stream_conn = None
            for queue in list(self._subscribers):
                queue.put_nowait(_END)

    def _deliver(self, message: Dict[str, Any]) -> None:
        push = Push(message.get("method", ""), message.get("params"), message)
        for queue in list(self._subscribers):
            queue.put_nowait(push)
        if self.on_push is not None:
            result = self.on_push(push)
            if asyncio.iscoroutine(result):
                asyncio.ensure_future(result)

    async def pushes(self, timeout: Optional[float] = None) -> AsyncIterator[Push]:
        """Pushes from now on, until the stream ends (normal end: the iteration stops;
        the server vanishing: `ServerGone`). `timeout`: the longest wait for one push.
        Pushes that came before the iteration started are not replayed: to catch the
        selection sent when the stream opens (§5), `subscribe()` before `connect()`."""
        queue: "asyncio.Queue[Any]" = asyncio.Queue()
        self._subscribers.append(queue)
        try:
            if self._stream_task is None or self._stream_task.done():
                self._raise_stream_error()
                return
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), timeout)
                except asyncio.TimeoutError:
                    raise IdeTimeout("no push within %s s" % timeout) from None
                if item is _END:
                    self._raise_stream_error()
                    return
                yield item
        finally:
            self._subscribers.remove(queue)

    def subscribe(self) -> "asyncio.Queue[Any]":
        """A queue receiving every later push (and `None`-like end marker `IdeClient.END`)."""
        queue: "asyncio.Queue[Any]" = asyncio.Queue()
        self._subscribers.append(queue)
        return queue

    END = _END

    async def wait_push(self, method: Optional[str] = None, timeout: Optional[float] = -1.0,
                        queue: Optional["asyncio.Queue[Any]"] = None) -> Push:
        """The next push (of `method`, when given). Subscribe first (`subscribe()`) to
        be sure to catch a push that the next action causes."""
        if timeout is not None and timeout < 0:
            timeout = self.timeout
        own = queue is None
        q = self.subscribe() if queue is None else queue
        try:
            while True:
                try:
                    item = await asyncio.wait_for(q.get(), timeout)
                except asyncio.TimeoutError:
                    raise IdeTimeout("no %s push within %s s" % (method or "", timeout)) from None
                if item is _END:
                    self._raise_stream_error()
                    raise ServerGone("the GET stream ended before a %s push" % (method or "push"))
                if method is None or item.method == method:
                    return item
        finally:
            if own:
                self._subscribers.remove(q)

    def _raise_stream_error(self) -> None:
        if self._stream_error is not None:
            raise self._stream_error

    @property
    def stream_error(self) -> Optional[BaseException]:
        return self._stream_error

    async def wait_stream_end(self, timeout: Optional[float] = -1.0) -> None:
        """Until the GET stream ends; raises its error if it failed."""
        if timeout is not None and timeout < 0:
            timeout = self.timeout
        if self._stream_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._stream_task), timeout)
            except asyncio.TimeoutError:
                raise IdeTimeout("the GET stream did not end within %s s" % timeout) from None
        self._raise_stream_error()

    # ------------------------------------------------------------------------ tools

    async def list_tools(self) -> List[Dict[str, Any]]:
        result = await self.request("tools/list", {"_meta": {"progressToken": next(self._progress)}})
        self.tools = list(result.get("tools") or []) if isinstance(result, dict) else []
        return self.tools

    async def call_tool(self, name: str, arguments: Optional[Dict[str, Any]] = None, *,
                        timeout: Optional[float] = -1.0) -> Dict[str, Any]:
        """`tools/call`; returns the raw result (`content`, maybe `isError`)."""
        params = {"_meta": {"progressToken": next(self._progress)}, "name": name, "arguments": arguments or {}}
        return await self.request("tools/call", params, timeout=timeout)

    async def call_tool_json(self, name: str, arguments: Optional[Dict[str, Any]] = None, *,
                             timeout: Optional[float] = -1.0) -> Any:
        """`tools/call` and decode the JSON of its text (`tools.ToolError` on isError)."""
        return tools.parse_text_result(await self.call_tool(name, arguments, timeout=timeout))

    async def get_selection(self) -> Optional[Dict[str, Any]]:
        """The editor's selection (`current` false when cached), None when there is none."""
        return await self.call_tool_json("get_selection")

    async def get_diagnostics(self, uri: Optional[str] = None) -> List[Dict[str, Any]]:
        return await self.call_tool_json("get_diagnostics", {"uri": uri} if uri else {})

    async def get_vscode_info(self) -> Dict[str, Any]:
        return await self.call_tool_json("get_vscode_info")

    async def update_session_name(self, name: str) -> Dict[str, Any]:
        return await self.call_tool_json("update_session_name", {"name": name})

    async def open_diff(self, original_file_path: str, new_file_contents: str, tab_name: str, *,
                        timeout: Optional[float] = None) -> Dict[str, Any]:
        """Propose an edit and wait for the user's decision (no time limit by default,
        as in the CLI, PROTOCOL.md §4). The IDE does not write the file: on `SAVED` the
        caller writes `new_file_contents` itself."""
        return await self.call_tool_json("open_diff", {"original_file_path": original_file_path,
                                                       "new_file_contents": new_file_contents,
                                                       "tab_name": tab_name}, timeout=timeout)

    async def close_diff(self, tab_name: str) -> Dict[str, Any]:
        return await self.call_tool_json("close_diff", {"tab_name": tab_name})

    async def ping(self) -> Any:
        return await self.request("ping")

    # ---------------------------------------------------------------------- the end

    async def delete(self) -> int:
        """DELETE the session (PROTOCOL.md §2); returns the status (200, or 404 when it
        was already gone)."""
        response = await self._exchange("DELETE", self.headers("DELETE"), None, self.timeout)
        await self._drain(response)
        return response.status

    async def close(self) -> None:
        """DELETE the session, let the GET stream end, close every connection."""
        if self._closed:
            return
        try:
            if self.session_id is not None:
                try:
                    await self.delete()
                except (ClientError, OSError):
                    pass
                if self._stream_task is not None:
                    try:
                        await asyncio.wait_for(asyncio.shield(self._stream_task), 5)
                    except asyncio.TimeoutError:
                        pass
        finally:
            self._closed = True
            if self._stream_task is not None and not self._stream_task.done():
                self._stream_task.cancel()
                await asyncio.gather(self._stream_task, return_exceptions=True)
            for conn in self._all + self._idle:
                conn.close()
            self._idle = []
            self._all = []

    async def __aenter__(self) -> "IdeClient":
        try:
            return await self.connect()
        except BaseException:
            await self.close()
            raise

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


def _json_error(body: bytes) -> Optional[jsonrpc.JsonRpcError]:
    """A JSON-RPC error carried by a non-200 body (e.g. `404` + `-32001`), if any."""
    try:
        obj = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
        return jsonrpc.JsonRpcError.from_dict(obj["error"])
    return None
