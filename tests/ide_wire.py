"""A raw-bytes test client that talks to the IDE server the way Copilot CLI 1.0.102 does
(tests/captures/copilot-cli-1.0.102-ide-session.log):

* empty probe connections (connect, close without a byte) before connecting;
* every POST chunked (`Transfer-Encoding: chunked`, one chunk then `0\\r\\n\\r\\n`), never
  `Content-Length`, never `mcp-protocol-version`;
* the CLI's headers in the CLI's order;
* keep-alive: a pool of connections, the next request goes on an idle connection,
  including one whose SSE response the server just ended;
* the GET stream is read incrementally, one SSE event at a time.

Built on the library's own sans-IO `http11.ResponseParser` and `sse.SSEDecoder`; the
request bytes are assembled here by hand so that the test does not depend on the
library's writers.
"""
from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ide_protocol.wire import http11, sse

#: Generous bound for one wait; only there so that a hang fails instead of blocking.
WAIT = 20.0

CLIENT_INFO = {"name": "copilot-cli", "version": "1.0.102"}

DISCOVER_PARAMS = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
                             "io.modelcontextprotocol/clientCapabilities": {}}}


async def open_connection(path: str) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to a server's socket: a Unix socket, or a named pipe on Windows (the
    library's own pipe client, `winpipe.open_pipe_connection`, as nothing else in the
    standard library opens one as streams)."""
    from ide_protocol.common import lock_rules, winpipe

    if lock_rules.is_pipe_path(path):
        return await winpipe.open_pipe_connection(path)
    return await asyncio.open_unix_connection(path)


async def listen(listener: Any, directory: str) -> str:
    """Start a `transport.Listener` where its platform's servers listen: a Unix socket
    in `directory`, a named pipe on Windows (PROTOCOL.md §1). Returns the path."""
    if os.name == "nt":
        return await listener.start_pipe()
    return await listener.start_unix(directory)


def send_and_vanish(path: str, data: bytes) -> None:
    """A peer that connects, sends `data` and is gone before any answer (a Unix
    socket, or a named pipe opened as a file on Windows)."""
    from ide_protocol.common import lock_rules

    if lock_rules.is_pipe_path(path):
        with open(path, "r+b", buffering=0) as pipe:
            pipe.write(data)
        return
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        sock.sendall(data)
    finally:
        sock.close()


class HeldPipe:
    """A Windows named pipe held open with a few instances and nobody answering: it
    exists, and opening it succeeds (or finds every instance busy), as long as it is
    held, as a listening server's pipe does (PROTOCOL.md §1). The pipe counterpart of a
    bound, listening Unix socket that never accepts; made with `_winapi`, as
    multiprocessing makes its pipes, so that no event loop is needed."""

    def __init__(self, path: Optional[str] = None, instances: int = 4) -> None:
        import _winapi  # type: ignore[import-not-found]  # Windows only

        from ide_protocol.common import winpipe

        self.path = winpipe.pipe_name(path)
        self._handles: List[Any] = []
        mode = _winapi.PIPE_WAIT  # a byte pipe (PIPE_TYPE_BYTE is 0) that blocks
        for index in range(instances):
            first = _winapi.FILE_FLAG_FIRST_PIPE_INSTANCE if index == 0 else 0
            self._handles.append(_winapi.CreateNamedPipe(
                self.path, _winapi.PIPE_ACCESS_DUPLEX | first, mode, _winapi.PIPE_UNLIMITED_INSTANCES,
                4096, 4096, 0, _winapi.NULL))

    def close(self) -> None:
        import _winapi  # type: ignore[import-not-found]

        handles, self._handles = self._handles, []
        for handle in handles:
            _winapi.CloseHandle(handle)


def pipe_is_held(path: str) -> bool:
    """Whether a server holds the named pipe `path`: it opens, or every instance is
    busy (ERROR_PIPE_BUSY, 231); no such pipe is False (written apart from the
    library's `winpipe.probe_pipe`, so that tests can check it)."""
    try:
        with open(path, "r+b", buffering=0):
            return True
    except FileNotFoundError:
        return False
    except OSError as exc:
        return getattr(exc, "winerror", None) == 231


def run(coro: Any, timeout: float = 30.0) -> Any:
    """Run one test coroutine on a fresh loop; a hang fails after `timeout` seconds."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def until(predicate: Any, timeout: float = WAIT, what: str = "condition") -> None:
    """Poll until `predicate()` is true (a wait for the server to catch up, never a
    timing assertion: the bound only turns a hang into a failure)."""
    loop = asyncio.get_event_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        await asyncio.sleep(0.005)


def chunked(body: bytes) -> bytes:
    """The CLI's framing: the whole body as one chunk, then the last chunk."""
    if not body:
        return b"0\r\n\r\n"
    return b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n"


def head(method: str, target: str, headers: Sequence[Tuple[str, str]]) -> bytes:
    lines = ["%s %s HTTP/1.1" % (method, target)] + ["%s: %s" % (k, v) for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class Reply:
    """One complete response: status, headers, raw body, SSE events (if any)."""

    def __init__(self, response: http11.Response, body: bytes, events: List[sse.SSEEvent], complete: bool) -> None:
        self.response = response
        self.status = response.status
        self.headers = response.headers
        self.body = body
        self.events = events
        self.complete = complete  # False when the connection closed before the end

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type") or ""

    @property
    def messages(self) -> List[Any]:
        if "text/event-stream" in self.content_type:
            return [json.loads(e.data) for e in self.events]
        return [json.loads(self.body.decode("utf-8"))] if self.body else []

    @property
    def message(self) -> Any:
        msgs = self.messages
        assert len(msgs) == 1, "expected one JSON-RPC message, got %r" % (msgs,)
        return msgs[0]

    def __repr__(self) -> str:
        return "Reply(%d, %r, %r, %r)" % (self.status, self.headers.raw, self.body[:200], self.events)


class Conn:
    """One socket connection, read incrementally with the library's response parser."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int = 0) -> None:
        self.reader = reader
        self.writer = writer
        self.number = number
        self.parser = http11.ResponseParser()
        self._events: List[Any] = []
        self.eof = False
        self.busy = False
        self._decoder: Optional[sse.SSEDecoder] = None
        self.stream_head: Optional[http11.Response] = None

    @classmethod
    async def open(cls, path: str, number: int = 0) -> "Conn":
        reader, writer = await asyncio.wait_for(open_connection(path), WAIT)
        return cls(reader, writer, number)

    def send_raw(self, data: bytes, expect: Optional[str] = None) -> None:
        if expect is not None:
            self.parser.expect(expect)
        self.writer.write(data)

    async def _more(self) -> None:
        if self.eof:
            raise EOFError("connection closed by the server")
        try:
            data = await asyncio.wait_for(self.reader.read(65536), WAIT)
        except (ConnectionError, OSError):
            data = b""
        if data:
            self._events.extend(self.parser.feed(data))
        else:
            self.eof = True
            self._events.extend(self.parser.feed_eof())

    async def next_event(self) -> Any:
        while not self._events:
            await self._more()
        return self._events.pop(0)

    async def read_head(self) -> http11.Response:
        event = await self.next_event()
        if not isinstance(event, http11.Response):
            raise AssertionError("expected a response head, got %r" % (event,))
        return event

    async def read_reply(self) -> Reply:
        """A whole response (until its end, or until the connection closes)."""
        response = await self.read_head()
        body: List[bytes] = []
        decoder = sse.SSEDecoder()
        events: List[sse.SSEEvent] = []
        is_sse = "text/event-stream" in (response.headers.get("content-type") or "")
        while True:
            try:
                event = await self.next_event()
            except EOFError:
                return Reply(response, b"".join(body), events, False)
            if isinstance(event, http11.Data):
                body.append(event.data)
                if is_sse:
                    events.extend(decoder.feed(event.data))
            elif isinstance(event, http11.EndOfMessage):
                return Reply(response, b"".join(body), events, True)
            elif isinstance(event, (http11.ConnectionClosed, http11.ParseError)):
                return Reply(response, b"".join(body), events, False)

    # -- a GET stream, read one event at a time

    async def open_stream(self) -> http11.Response:
        self.stream_head = await self.read_head()
        self._decoder = sse.SSEDecoder()
        self._pending_sse: List[sse.SSEEvent] = []
        return self.stream_head

    async def next_sse(self) -> Optional[sse.SSEEvent]:
        """The next event of the open stream; None when the server ended the stream
        (last chunk) or closed the connection."""
        assert self._decoder is not None, "no stream open on this connection"
        while not self._pending_sse:
            try:
                event = await self.next_event()
            except EOFError:
                self._decoder = None
                return None
            if isinstance(event, http11.Data):
                self._pending_sse.extend(self._decoder.feed(event.data))
            elif isinstance(event, (http11.EndOfMessage, http11.ConnectionClosed, http11.ParseError)):
                self._decoder = None
                return None
        return self._pending_sse.pop(0)

    async def next_notification(self) -> Optional[Dict[str, Any]]:
        event = await self.next_sse()
        if event is None:
            return None
        assert event.event == "message" and event.id is None, event
        return json.loads(event.data)

    async def wait_closed(self) -> bool:
        """True once the server closed the connection (pending bytes are drained)."""
        while not self.eof:
            await self._more()
        return True

    def close(self) -> None:
        try:
            self.writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass

    def abort(self) -> None:
        """Vanish: reset the connection without a clean shutdown."""
        transport = self.writer.transport
        try:
            transport.abort()
        except (ConnectionError, OSError, RuntimeError, AttributeError):
            self.close()


class Cli:
    """Copilot CLI's side of one `/ide` connection: pooled keep-alive connections,
    the handshake, requests, the GET stream, DELETE."""

    def __init__(self, socket_path: str, nonce: Optional[str] = None, *,
                 auth: Optional[str] = None, client_session_id: Optional[str] = None,
                 pid: int = 32748, parent_pid: int = 32746) -> None:
        self.socket_path = socket_path
        self.auth = auth if auth is not None else ("Nonce " + nonce if nonce is not None else None)
        self.client_session_id = client_session_id or str(uuid.uuid4())
        self.pid = pid
        self.parent_pid = parent_pid
        self.session_id: Optional[str] = None
        self.pool: List[Conn] = []
        self.next_id = 0
        self._numbers = 0

    # -- bytes

    def headers(self, method: str, session: bool = True, extra: Sequence[Tuple[str, str]] = (),
                accept: Optional[str] = None) -> List[Tuple[str, str]]:
        """The CLI's headers, in its order (PROTOCOL.md §2)."""
        h = [("X-Copilot-Session-Id", self.client_session_id), ("X-Copilot-PID", str(self.pid)),
             ("X-Copilot-Parent-PID", str(self.parent_pid))]
        if self.auth is not None:
            h.append(("Authorization", self.auth))
        if method == "POST":
            h.append(("accept", accept or "application/json, text/event-stream"))
            h.append(("content-type", "application/json"))
        elif method == "GET":
            h.append(("accept", accept or "text/event-stream"))
        if session and self.session_id is not None:
            h.append(("mcp-session-id", self.session_id))
        h.append(("Host", "localhost"))
        h.append(("Connection", "keep-alive"))
        h.extend(extra)
        if method == "POST":
            h.append(("Transfer-Encoding", "chunked"))
        return h

    def encode(self, method: str, body: Union[bytes, Dict[str, Any], List[Any], None] = None, *,
               target: str = "/mcp", session: bool = True, extra: Sequence[Tuple[str, str]] = ()) -> bytes:
        data = b""
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode("utf-8")
        out = head(method, target, self.headers(method, session, extra))
        if method == "POST":
            out += chunked(data)
        return out

    # -- connections

    async def probe(self, count: int = 2) -> None:
        """The CLI's empty connections before each connect attempt."""
        for _ in range(count):
            reader, writer = await open_connection(self.socket_path)
            writer.close()

    async def new_conn(self) -> Conn:
        self._numbers += 1
        conn = await Conn.open(self.socket_path, self._numbers)
        self.pool.append(conn)
        return conn

    async def conn(self) -> Conn:
        """An idle pooled connection (keep-alive reuse), else a new one."""
        for conn in self.pool:
            if not conn.busy and not conn.eof:
                return conn
        return await self.new_conn()

    async def exchange(self, method: str, body: Any = None, *, conn: Optional[Conn] = None,
                       **kw: Any) -> Tuple[Reply, Conn]:
        conn = conn or await self.conn()
        conn.busy = True
        try:
            conn.send_raw(self.encode(method, body, **kw), expect=method)
            reply = await conn.read_reply()
        finally:
            conn.busy = False
        if not reply.complete or not reply.response.keep_alive:
            conn.close()
            if conn in self.pool:
                self.pool.remove(conn)
        return reply, conn

    async def post(self, body: Any, **kw: Any) -> Reply:
        return (await self.exchange("POST", body, **kw))[0]

    def new_id(self) -> int:
        request_id = self.next_id
        self.next_id += 1
        return request_id

    async def send_request(self, method: str, params: Any = None, **kw: Any) -> Reply:
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "id": self.new_id(), "method": method}
        if params is not None:
            msg["params"] = params
        return await self.post(msg, **kw)

    async def request(self, method: str, params: Any = None, **kw: Any) -> Any:
        """A request whose answer must be a success; returns the result."""
        reply = await self.send_request(method, params, **kw)
        assert reply.status == 200, reply
        msg = reply.message
        assert "result" in msg, msg
        return msg["result"]

    async def notify(self, method: str, params: Any = None, **kw: Any) -> Reply:
        msg: Dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        return await self.post(msg, **kw)

    async def call_tool(self, name: str, arguments: Optional[Dict[str, Any]] = None, **kw: Any) -> Dict[str, Any]:
        params: Dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return await self.request("tools/call", params, **kw)

    async def handshake(self, probes: int = 2, version: str = "2025-11-25") -> Dict[str, Any]:
        """Probes, server/discover (must fail), initialize, notifications/initialized."""
        await self.probe(probes)
        self.session_id = None
        self.next_id = 0
        discover = await self.send_request("server/discover", DISCOVER_PARAMS)
        assert discover.status in (200, 404), discover
        assert "error" in discover.message, discover
        reply = await self.send_request("initialize", {"protocolVersion": version, "capabilities": {},
                                                       "clientInfo": CLIENT_INFO})
        assert reply.status == 200, reply
        self.session_id = reply.headers.get("mcp-session-id")
        assert self.session_id
        result = reply.message["result"]
        initialized = await self.notify("notifications/initialized")
        assert initialized.status == 202, initialized
        return result

    async def open_stream(self, conn: Optional[Conn] = None) -> Tuple[http11.Response, Conn]:
        """`GET /mcp`: returns the response head and the connection carrying the stream."""
        conn = conn or await self.conn()
        conn.busy = True
        conn.send_raw(self.encode("GET"), expect="GET")
        response = await conn.open_stream()
        if response.status != 200:
            # A refused stream is a plain response: read it to the end, free the conn.
            conn._decoder = None
            while True:
                event = await conn.next_event()
                if isinstance(event, (http11.EndOfMessage, http11.ConnectionClosed, http11.ParseError)):
                    break
            conn.busy = False
        return response, conn

    def stream_done(self, conn: Conn) -> None:
        """The stream on `conn` ended: the connection is free for the next request."""
        conn.busy = False

    async def delete(self, **kw: Any) -> Reply:
        return (await self.exchange("DELETE", None, **kw))[0]

    def close(self) -> None:
        for conn in self.pool:
            conn.close()
        self.pool = []

    def abort(self) -> None:
        for conn in self.pool:
            conn.abort()
        self.pool = []


def tool_json(result: Dict[str, Any]) -> Any:
    """The JSON inside a successful tool result (PROTOCOL.md §4)."""
    assert not result.get("isError"), result
    content = result["content"]
    assert isinstance(content, list) and len(content) == 1 and content[0]["type"] == "text", result
    return json.loads(content[0]["text"])


def tool_error(result: Dict[str, Any]) -> str:
    assert result.get("isError") is True, result
    assert result["content"][0]["type"] == "text"
    return result["content"][0]["text"]


def socket_dir_of(path: str) -> str:
    return os.path.dirname(path)


def make_server(tmp_path: Any, **kw: Any) -> Any:
    """An IdeServer with its lock directory inside the test's tmp_path."""
    from ide_protocol.server.ide_server import IdeServer

    folder = os.path.join(str(tmp_path), "ws")
    os.makedirs(folder, exist_ok=True)
    kw.setdefault("lock_dir", os.path.join(str(tmp_path), "locks"))
    return IdeServer([folder], **kw)


def cli_for(server: Any, **kw: Any) -> Cli:
    return Cli(server.socket_path, server.nonce, **kw)
