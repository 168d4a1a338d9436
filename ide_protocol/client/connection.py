"""One HTTP/1.1 connection to an IDE's socket, and one response read from it.

The low layer of the client: any method, any header set, any body, so the conformance
checker can send the requests a conformant server must refuse and the tracer can see
every byte. `ClientConnection` sends one request at a time and keeps the socket for the
next (keep-alive, PROTOCOL.md §2); `ClientResponse` reads its answer incrementally: the
head first, then body pieces, SSE events or JSON-RPC messages. The HTTP framing itself
is `wire.http11`'s (sans-IO); this module only moves its bytes.
"""
from __future__ import annotations

import asyncio
import collections
import errno
import itertools
import socket
from typing import Any, AsyncIterator, Callable, Deque, List, Optional, Tuple

from ..common import lockfile
from ..common.stream_close import close_stream
from ..wire import http11, jsonrpc, sse
from .errors import IdeTimeout, ProtocolViolation, ServerGone

__all__ = ["DEFAULT_TIMEOUT", "DEFAULT_CONNECT_TIMEOUT", "READ_SIZE", "MAX_MESSAGE_BYTES", "WireHook",
           "deadline_after", "time_left",
           "open_socket", "ClientConnection", "ClientResponse"]

#: Ordinary requests time out after 60 s in the CLI (PROTOCOL.md §3).
DEFAULT_TIMEOUT = 60.0
DEFAULT_CONNECT_TIMEOUT = 5.0
READ_SIZE = 256 * 1024
#: The largest body `read_body` collects and the largest SSE event decoded: a response
#: past it is a `ProtocolViolation`, not a process eating memory (a GET stream itself is
#: endless, and is never kept: its events are handed out as they come).
MAX_MESSAGE_BYTES = http11.DEFAULT_MAX_BODY
#: How much of a body a response keeps as evidence for error messages (`describe`).
EVIDENCE_BYTES = 4096


def deadline_after(timeout: Optional[float]) -> Optional[float]:
    """The loop time by which a wait of `timeout` seconds must be over (None: never).

    Every wait of the client is bounded by a deadline, not by a timeout per read: a
    peer that drips one byte a second, or sends a notification every few seconds,
    cannot keep a request alive past it."""
    return None if timeout is None else asyncio.get_event_loop().time() + timeout


def time_left(deadline: Optional[float]) -> Optional[float]:
    """Seconds until `deadline` (never negative), None for no deadline."""
    return None if deadline is None else max(0.0, deadline - asyncio.get_event_loop().time())


async def open_socket(path: str, timeout: Optional[float] = DEFAULT_CONNECT_TIMEOUT
                      ) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to an IDE's socket (Unix) or named pipe (Windows), as streams.

    Refusals become `ServerGone` naming the path, so a stale lock gives a readable error.
    """
    try:
        if lockfile._is_pipe_path(path):  # Windows: \\.\pipe\mcp-<uuid>.sock (§1)
            from ..common import winpipe

            return await asyncio.wait_for(winpipe.open_pipe_connection(path), timeout)
        return await asyncio.wait_for(_open_unix(path), timeout)
    except asyncio.TimeoutError:
        raise IdeTimeout("connecting to %s took longer than %s s (%s)" % (
            path, timeout, "its listen backlog stayed full: the server accepts too slowly" if _backlog_full(path)
            else "no answer")) from None
    except (OSError, ValueError) as exc:
        raise ServerGone("cannot connect to the IDE socket %s: %s" % (path, exc)) from None


async def _open_unix(path: str) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Streams on a Unix socket connected to `path`, waiting while the server's listen
    backlog is full: there a Unix socket's connect fails at once with EAGAIN (which
    asyncio's own connect then turns into a puzzling EINVAL) instead of queueing."""
    family = getattr(socket, "AF_UNIX", None)
    if family is None:
        raise OSError(errno.EAFNOSUPPORT, "Unix sockets are not available here")
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        pause = 0.005
        while True:
            try:
                sock.connect(path)
                break
            except BlockingIOError:  # the backlog is full: wait for a place
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.1)
        return await asyncio.open_unix_connection(sock=sock, limit=2 ** 20)
    except BaseException:
        sock.close()
        raise


def _backlog_full(path: str) -> bool:
    """Whether one more connect to `path` would fail for a full listen backlog."""
    try:
        with socket.socket(getattr(socket, "AF_UNIX"), socket.SOCK_STREAM) as sock:
            sock.setblocking(False)
            sock.connect(path)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


class ClientResponse:
    """One response, read incrementally from its connection.

    The head (`status`, `reason`, `headers`) is known when the object is returned; the
    body is read on demand: `read_body()`, `iter_data()`, `iter_events()` (SSE) or
    `messages()` (JSON-RPC, whichever the content type). When the body is complete the
    connection is free for the next request (keep-alive, PROTOCOL.md §2).

    Memory is bounded whatever the server sends: `read_body` collects at most
    `max_message` bytes, one SSE event is at most that large, and the response itself
    keeps only the first `EVIDENCE_BYTES` of its body (`body`, for error messages).
    Each `timeout` bounds the whole call, however the bytes trickle in.
    """

    def __init__(self, conn: "ClientConnection", head: http11.Response, method: str,
                 max_message: int = MAX_MESSAGE_BYTES) -> None:
        self.conn = conn
        self.status = head.status
        self.reason = head.reason
        self.headers = head.headers
        self.http_version = head.http_version
        self.method = method
        self.max_message = max_message
        self.complete = False
        self.body = bytearray()  # the first EVIDENCE_BYTES of the body, for error messages
        self.body_size = 0       # every byte of the body read so far
        #: The size in bytes of the message `next_message` returned last (its SSE
        #: event's data, or the whole body): what a queue holding it costs.
        self.last_message_size = 0
        self._decoder: Optional[sse.SSEDecoder] = None
        self._pending_events: Deque[sse.SSEEvent] = collections.deque()

    @property
    def content_type(self) -> str:
        return (self.headers.get("content-type") or "").split(";")[0].strip().lower()

    @property
    def is_sse(self) -> bool:
        return self.content_type == "text/event-stream"

    async def next_data(self, timeout: Optional[float] = None) -> Optional[bytes]:
        """The next piece of the body, or None at its end."""
        return await self._next_data(deadline_after(timeout))

    async def _next_data(self, deadline: Optional[float]) -> Optional[bytes]:
        if self.complete:
            return None
        event = await self.conn._next_event(deadline, "the body of a %d response to %s" % (self.status, self.method))
        if isinstance(event, http11.Data):
            data = event.data
            if len(self.body) < EVIDENCE_BYTES:
                self.body += data[:EVIDENCE_BYTES - len(self.body)]
            self.body_size += len(data)
            return data
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
        """The rest of the body (at most `max_message` bytes: more is a
        `ProtocolViolation` and the connection is closed); `timeout` bounds it all.

        The pieces are gathered in one buffer, so that the memory held is the body's
        size, whatever the chunks: a list of the pieces cost some twenty times the
        body when the server sent it two bytes a chunk."""
        deadline = deadline_after(timeout)
        body = bytearray()
        while True:
            data = await self._next_data(deadline)
            if data is None:
                return bytes(body)
            if len(body) + len(data) > self.max_message:
                self.conn.close()
                raise ProtocolViolation("the %d response to %s has a body larger than %d bytes"
                                        % (self.status, self.method, self.max_message))
            body += data

    async def next_event(self, timeout: Optional[float] = None) -> Optional[sse.SSEEvent]:
        """The next SSE event of a `text/event-stream` body, or None at its end;
        `timeout` bounds the wait for the whole event."""
        return await self._next_event(deadline_after(timeout))

    async def _next_event(self, deadline: Optional[float]) -> Optional[sse.SSEEvent]:
        if self._decoder is None:
            self._decoder = sse.SSEDecoder(self.max_message)
        pending = self._pending_events
        while not pending:
            data = await self._next_data(deadline)
            if data is None:
                return None
            dropped = self._decoder.dropped
            pending.extend(self._decoder.feed(data))
            if self._decoder.dropped != dropped:
                self.conn.close()
                raise ProtocolViolation("an SSE event of the %d response to %s is larger than %d bytes"
                                        % (self.status, self.method, self.max_message))
        return pending.popleft()

    async def iter_events(self, timeout: Optional[float] = None) -> AsyncIterator[sse.SSEEvent]:
        while True:
            event = await self.next_event(timeout)
            if event is None:
                return
            yield event

    async def next_message(self, timeout: Optional[float] = None) -> Optional[Any]:
        """The next JSON-RPC message carried by the body (one per SSE event, or the
        whole `application/json` body), or None at its end; `timeout` bounds the whole
        wait. Raises ProtocolViolation on a body that is not JSON."""
        return await self._next_message(deadline_after(timeout))

    async def _next_message(self, deadline: Optional[float]) -> Optional[Any]:
        if self.is_sse:
            event = await self._next_event(deadline)
            if event is None:
                return None
            self.last_message_size = len(event.data)
            try:
                return jsonrpc.loads(event.data)
            except jsonrpc.JsonRpcError as exc:
                raise ProtocolViolation("SSE event data is not JSON (%s): %r" % (exc.message, event.data[:200])) from None
        if self.complete:
            return None
        body = await self.read_body(time_left(deadline))
        if not body.strip():
            return None
        self.last_message_size = len(body)
        try:
            return jsonrpc.loads(body)
        except jsonrpc.JsonRpcError as exc:
            raise ProtocolViolation("%d response body is not JSON (%s): %r"
                                    % (self.status, exc.message, body[:200])) from None

    async def messages(self, timeout: Optional[float] = None) -> List[Any]:
        """Every JSON-RPC message of the body (reads it to the end; `timeout` bounds it all)."""
        deadline = deadline_after(timeout)
        out: List[Any] = []
        while True:
            message = await self._next_message(deadline)
            if message is None:
                return out
            out.append(message)

    def text(self) -> str:
        """The start of the body (`body`), decoded."""
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
            await self.aclose()
            raise ServerGone("the IDE server closed connection #%d while we were sending: %s"
                             % (self.number, exc)) from None

    async def request(self, method: str, target: str = "/mcp", headers: http11.HeadersLike = None,
                      body: Optional[bytes] = None, chunked: bool = True,
                      timeout: Optional[float] = DEFAULT_TIMEOUT) -> ClientResponse:
        """Send one request and wait for the head of its response.

        POST bodies go out chunked by default, as the CLI sends them (PROTOCOL.md §2);
        `chunked=False` sends `Content-Length` (other clients do). `timeout` bounds the
        whole wait for the response head (None: no limit, e.g. a blocking `open_diff`).
        """
        if self.busy:
            raise RuntimeError("connection #%d is busy with another request" % self.number)
        # Kept alive, as the CLI asks on every request (PROTOCOL.md §2): the writer spells it.
        data = http11.write_request(method, target, headers, body, chunked=chunked and body is not None,
                                    keep_alive=True)
        self.busy = True
        self.requests += 1
        self._parser.expect(method)
        await self.send(data)
        return await self.read_response(method, timeout)

    async def read_response(self, method: str = "GET", timeout: Optional[float] = DEFAULT_TIMEOUT) -> ClientResponse:
        """Wait for the next response head (after `send` of a hand-made request);
        `timeout` bounds the whole wait, however slowly the head arrives."""
        self.busy = True
        deadline = deadline_after(timeout)
        while True:
            event = await self._next_event(deadline, "the response to %s" % method)
            if isinstance(event, http11.Response):
                if 100 <= event.status < 200:
                    continue  # interim; its EndOfMessage follows
                response = ClientResponse(self, event, method)
                self.keep_alive = event.keep_alive
                return response
            if isinstance(event, http11.EndOfMessage):
                continue  # the end of an interim response
            raise ProtocolViolation("expected a response head, got %r" % (event,))

    async def _next_event(self, deadline: Optional[float], what: str) -> http11.ParserEvent:
        """The next parser event, read by `deadline` (loop time; None: no limit)."""
        while not self._events:
            if self._eof:
                raise ServerGone("the IDE server closed connection #%d before %s was complete" % (self.number, what))
            try:
                data = await asyncio.wait_for(self.reader.read(READ_SIZE), time_left(deadline))
            except asyncio.TimeoutError:
                self.close()
                raise IdeTimeout("no complete answer from the IDE server in time while waiting for %s "
                                 "(connection #%d)" % (what, self.number)) from None
            except (ConnectionError, OSError) as exc:
                self._eof = True
                await self.aclose()
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

    async def aclose(self) -> None:
        """`close`, then wait briefly for the socket's end to close and take what
        asyncio kept for it (a reset's error), so that nothing is left for the garbage
        collector to print (`common.stream_close`). For every owner that can wait."""
        self.closed = True
        await close_stream(self.writer)

    def __repr__(self) -> str:
        return "<ClientConnection #%d %s%s>" % (self.number, self.path, " closed" if self.closed else "")
