"""The asyncio glue: a listening socket and HTTP/1.1 connections over it.

This is the thin layer between the sans-IO `http11` parser and an application
coroutine `app(request, body, responder)`. Each connection is an `asyncio.Protocol`
(`HttpConnection`): bytes arrive in `data_received`, go through the parser, and each
complete request is answered by the connection's handler task, one at a time and in
order, as HTTP/1.1 requires. The socket stays watched meanwhile, so that a peer that
vanishes in the middle of a long request (a blocking `open_diff`) is noticed at once
and its handler cancelled.

Keep-alive matters (PROTOCOL.md §2): the CLI sends its next request on the connection
whose SSE response just ended, so the connection keeps reading until the peer closes it.
Windows named pipes live in `winpipe.py` (the same protocol, served on a pipe);
everything here is POSIX.
"""
from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import logging
import os
import shutil
import sys
import tempfile
import types
from typing import Any, Awaitable, Callable, Deque, Dict, List, Optional, Sequence, Set, Tuple, Union

from ..wire import http11

log = logging.getLogger(__name__)

#: The application run for each request: `app(request, body, responder)`.
#:
#: It answers what it can at once, through the responder's `*_now` methods, and
#: returns None; or it returns a `Continuation`, a function of no arguments giving the
#: awaitable that finishes the answer, which the connection's handler task runs (if the
#: connection drops before that task starts, the continuation's `close()` is called
#: instead, when it has one). Most
#: requests are then answered inside `data_received` with no task and no loop pass
#: (issue 6). A coroutine function (`async def __call__`) works too: it always runs in
#: the handler task.
Continuation = Callable[[], Awaitable[None]]
App = Callable[[http11.Request, bytes, "Responder"], Any]
#: Response header fields: a list of (name, value) pairs, or a tuple of them (a tuple
#: given again is encoded once, see `Responder._stream_head`).
HeaderFields = Union[List[Tuple[str, str]], Tuple[Tuple[str, str], ...]]
_STREAM_HEADS: Dict[Tuple[int, int, bool], Tuple[Any, bytes, bool]] = {}

#: A request that has started arriving must finish within this many seconds (a slow
#: or stuck peer must not hold a connection forever with half a request).
REQUEST_TIMEOUT = 60.0
#: Bytes a peer may leave unread in our send buffer (pushes queued on a GET stream it
#: stopped reading) before the connection is dropped rather than growing without bound.
MAX_WRITE_BUFFER = 16 * 1024 * 1024


def is_async_app(app: Any) -> bool:
    """An application written as a coroutine function, which must run in a task."""
    return inspect.iscoroutinefunction(app) or inspect.iscoroutinefunction(getattr(app, "__call__", None))


def _direct_call(app: Any) -> Any:
    """What calling `app` runs, found once: an object whose class defines `__call__` is
    otherwise called through a slower generic path on every request (issue 6)."""
    call = inspect.getattr_static(type(app), "__call__", None)
    if isinstance(call, types.FunctionType):  # a plain `def __call__` in the class: bind it
        return types.MethodType(call, app)
    return app  # a function, a bound method, a partial, ...: called as it is


async def run_app(app: App, request: http11.Request, body: bytes, responder: "Responder") -> None:
    """Run an application to the end of its answer, whichever kind it is (for wrappers
    written as coroutines, such as a tracing or fault-injecting layer)."""
    rest = app(request, body, responder)
    if rest is not None:
        await (rest() if callable(rest) else rest)


_CHUNK_AND_LAST = b"\r\n" + http11.LAST_CHUNK  # a chunk's CRLF, then the last chunk


class Responder:
    """Writes the response to one request. Never raises on a vanished peer: writes to
    a closed connection are dropped and `closed` becomes true.

    The `*_now` methods write at once and return whether the connection is still open;
    the coroutine methods do the same, then wait while the peer is slow to read (flow
    control). The connection waits for that before it answers its next request, so the
    `*_now` methods suit short answers."""

    __slots__ = ("_conn", "request", "status", "started", "finished", "streaming", "close_after")

    def __init__(self, conn: "HttpConnection", request: http11.Request, keep_alive: Optional[bool] = None) -> None:
        self._conn = conn
        self.request = request
        self.status: Optional[int] = None
        self.started = False
        self.finished = False
        self.streaming = False
        # `keep_alive`: the request's, when the caller has it already (it costs a scan
        # of the headers, issue 6).
        self.close_after = not (request.keep_alive if keep_alive is None else keep_alive)

    @property
    def closed(self) -> bool:
        return self._conn.closed

    @property
    def connection_number(self) -> int:
        return self._conn.number

    async def wait_closed(self) -> None:
        """Until the peer closes the connection (or the server stops)."""
        await self._conn.wait_eof()

    def _begin(self, status: int, headers: Optional[HeaderFields], streaming: bool) -> List[Tuple[str, str]]:
        """Mark the response started; its header list with `Connection` settled."""
        if self.started:
            raise RuntimeError("response already started")
        self.started = True
        self.streaming = streaming
        self.status = status
        return self._connection_header(headers)

    def _connection_header(self, headers: Optional[HeaderFields]) -> List[Tuple[str, str]]:
        headers = list(headers) if headers else []
        for name, value in headers:
            if len(name) == 10 and name.lower() == "connection":
                if "close" in (token.strip() for token in value.lower().split(",")):
                    self.close_after = True
                return headers
        headers.append(("Connection", "close" if self.close_after else "keep-alive"))
        return headers

    def send_now(self, status: int, headers: Optional[HeaderFields] = None, body: bytes = b"") -> bool:
        """A complete response with a Content-Length body."""
        data = http11.write_response(status, self._begin(status, headers, False), body)
        self.finished = True
        if self.request.method == "HEAD" and body:
            data = data[:-len(body)]  # a HEAD response has no body (RFC 9110 §9.3.2)
        return self._conn.write_nowait(data)

    def start_nowait(self, status: int, headers: Optional[HeaderFields] = None) -> bool:
        """The head of a chunked (streamed) response."""
        return self._conn.write_nowait(self._stream_head(status, headers))

    def _stream_head(self, status: int, headers: Optional[HeaderFields]) -> bytes:
        """Start a streamed response; its head. Heads given as the same tuple again
        (an application's constant headers, a session's SSE headers) are encoded once:
        a tuple cannot change, so its identity is the key (issue 6)."""
        if self.started:
            raise RuntimeError("response already started")
        self.started = self.streaming = True
        self.status = status
        if type(headers) is not tuple or type(status) is not int:
            return http11.write_response_head(status, self._connection_header(headers))
        key = (status, id(headers), self.close_after)
        entry = _STREAM_HEADS.get(key)
        if entry is None or entry[0] is not headers:
            keep = self.close_after
            head = http11.write_response_head(status, self._connection_header(headers))
            if len(_STREAM_HEADS) >= 256:
                _STREAM_HEADS.clear()
            # (The tuple is kept with its head, so its id cannot be reused meanwhile.)
            entry = _STREAM_HEADS[key] = (headers, head, self.close_after and not keep)
        if entry[2]:
            self.close_after = True  # the headers themselves say Connection: close
        return entry[1]

    def send_chunked_now(self, status: int, headers: Optional[HeaderFields] = None,
                         chunks: Sequence[bytes] = ()) -> bool:
        """A whole chunked response (head, chunks, last chunk) in one write: one system
        call and one wake-up of the peer for a short SSE answer (issue 6)."""
        head = self._stream_head(status, headers)
        self.finished = True
        if self.request.method == "HEAD":
            return self._conn.write_nowait(head)
        if len(chunks) == 1 and chunks[0]:
            chunk = chunks[0]
            data = b"".join((head, http11.chunk_size_line(len(chunk)), chunk, _CHUNK_AND_LAST))
        else:
            data = b"".join([head] + [http11.encode_chunk(c) for c in chunks] + [http11.LAST_CHUNK])
        return self._conn.write_nowait(data)

    def chunk_nowait(self, data: bytes) -> bool:
        """One chunk of the streamed body (one SSE event per chunk, PROTOCOL.md §2),
        queued without waiting for the socket to drain (pushes fan out to many streams;
        the transport buffers and a dead peer is noticed on the next write)."""
        if not self.streaming or self.finished:
            return False
        return self._conn.write_nowait(http11.encode_chunk(data))

    def end_now(self, data: bytes = b"") -> bool:
        """Finish a streamed body with the last chunk (after `data` as a final chunk, in
        the same write); idempotent."""
        if not self.streaming or self.finished:
            return False
        self.finished = True
        return self._conn.write_nowait(http11.encode_chunk(data) + http11.LAST_CHUNK)

    # The same, waiting while the peer is slow to read.

    async def send(self, status: int, headers: Optional[HeaderFields] = None, body: bytes = b"") -> bool:
        return self.send_now(status, headers, body) and await self._conn.drained()

    async def start(self, status: int, headers: Optional[HeaderFields] = None) -> bool:
        return self.start_nowait(status, headers) and await self._conn.drained()

    async def send_chunked(self, status: int, headers: Optional[HeaderFields] = None,
                           chunks: Sequence[bytes] = ()) -> bool:
        return self.send_chunked_now(status, headers, chunks) and await self._conn.drained()

    async def chunk(self, data: bytes) -> bool:
        return self.chunk_nowait(data) and await self._conn.drained()

    async def end(self, data: bytes = b"") -> bool:
        return self.end_now(data) and await self._conn.drained()


if sys.version_info >= (3, 12):
    def _start_task(loop: asyncio.AbstractEventLoop, coro: Any) -> "asyncio.Task[None]":
        # Eager (Python 3.12+): the coroutine's first step runs now, inside
        # data_received; a request answered without suspending (most tool calls) then
        # costs no loop pass at all, and the task object is born done (issue 6).
        return asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg]
else:
    def _start_task(loop: asyncio.AbstractEventLoop, coro: Any) -> "asyncio.Task[None]":
        return loop.create_task(coro)


#: Complete requests that may wait behind the one being answered (a pipelining peer)
#: before the connection stops reading from the socket; reading resumes when half of
#: them have been answered. (While reading is paused, a vanished peer is noticed only
#: once reading resumes; the CLI never pipelines.)
MAX_PENDING = 8

#: A complete request (head, body, keep-alive) or the error that ends the input.
_Pending = Union[Tuple[http11.Request, bytes, bool], http11.ParseError]


class HttpConnection(asyncio.Protocol):
    """One accepted connection: parse requests as bytes arrive, answer them in order.

    Callbacks, not a reader task: `data_received` feeds the sans-IO parser. A complete
    request is answered right there when nothing is ahead of it and the application
    can answer without waiting (most tool calls): no task, no loop pass. Otherwise it
    is queued, and the connection's one handler task answers the queue in order
    (HTTP/1.1 answers in request order), running whatever the application left to wait
    for, and ends when the queue is empty. A reader task, a queue and a task per
    request took about five loop passes per request (issue 6).

    The socket keeps being watched while a request is answered, so a peer that
    vanishes in the middle of a long request (a blocking `open_diff`) is noticed at
    once: EOF or a lost connection cancels the handler task, which resolves the diff
    `client_disconnected` (PROTOCOL.md §4).

    Owner: the `Listener` that made it (`owner`), which holds it in `connections` from
    `connection_made` until the transport is gone *and* the handler task has finished.
    """

    def __init__(self, app: App, number: int, max_body: int, request_timeout: float = REQUEST_TIMEOUT,
                 owner: "Optional[Listener]" = None) -> None:
        self.app = app
        self._call_app = _direct_call(app)
        self._app_async = is_async_app(app)  # must run in the handler task
        self.number = number
        self.closed = False
        self.requests = 0
        self.transport: Any = None
        self._owner = owner
        self._loop = asyncio.get_event_loop()
        self._parser = http11.RequestParser(max_body=max_body)
        self._request_timeout = request_timeout
        # The request being received: its head, and its body so far: the first piece
        # as it came (a body in one chunk is not copied), then one growing buffer, not
        # a list of pieces joined at the end: a 10 MB body then needs no 16 KiB heap
        # blocks that stay resident after the request (issue 6).
        self._current: Optional[http11.Request] = None
        self._body: Union[bytes, bytearray] = b""
        self._input_done = False       # a parse error, a timeout or `Connection: close`: read no more requests
        self._pending: "Deque[_Pending]" = collections.deque()
        self._task: "Optional[asyncio.Task[None]]" = None  # the handler task, while one runs
        # What an answer begun in data_received left to wait for: the handler task's
        # first job (a Continuation or awaitable, and its responder).
        self._first: Optional[Tuple[Any, Responder]] = None
        self._timer: Optional[asyncio.TimerHandle] = None  # REQUEST_TIMEOUT, while a request is partial
        self._reading_paused = False
        self._writing_paused = False
        self._writable: Optional[asyncio.Event] = None  # made at the first pause_writing
        self._closed_event: Optional[asyncio.Event] = None  # made at the first wait_eof
        self._lost = False

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if self._owner is not None:
            self._owner._adopt(self)

    def data_received(self, data: bytes) -> None:
        if self._input_done:
            return  # after an error or a `Connection: close` request nothing more is read
        if self._task is None and not self._pending and not self._app_async and not self._writing_paused:
            # Nothing ahead of it: the CLI's usual request, whole, is answered here with
            # no parser events (issue 6); anything else goes through _handle.
            whole = self._parser.feed_whole(data)
            if whole is not None:
                self._serve_now(whole[0], whole[1], True)
                return
        self._handle(self._parser.feed(data))

    def eof_received(self) -> Optional[bool]:
        # The peer closed its side: it has gone (the CLI never half-closes; it closes a
        # connection it no longer wants, PROTOCOL.md §2), so nobody can receive an
        # answer. A request it left half sent is still answered with its error when
        # nothing else is in progress; then the connection closes.
        errors = [e for e in self._parser.feed_eof() if isinstance(e, http11.ParseError)]
        if errors and not self._input_done and self._task is None and not self._pending:
            self._write_error(errors[0])
        self.close()
        return None

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self._lost = True
        self._shut()
        self._release()

    def pause_writing(self) -> None:
        # The transport's buffer passed its high-water mark: `write` waits from now on.
        self._writing_paused = True
        if self._writable is None:
            self._writable = asyncio.Event()
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._writable is not None:
            self._writable.set()

    # ------------------------------------------------------------- incoming requests

    def _handle(self, events: List[http11.ParserEvent]) -> None:
        """Turn parser events into queued (request, body) pairs or a queued error."""
        for event in events:
            if self.closed:
                return  # an answer given below closed the connection
            kind = type(event)
            if kind is http11.Data:
                if not self._body:
                    self._body = event.data  # type: ignore[union-attr]
                else:
                    if type(self._body) is bytes:
                        self._body = bytearray(self._body)
                    self._body += event.data  # type: ignore[union-attr, operator]
            elif kind is http11.Request:
                self._current = event  # type: ignore[assignment]
                self._body = b""
            elif kind is http11.EndOfMessage:
                request = self._current
                self._current = None
                body = self._body if type(self._body) is bytes else bytes(self._body)
                self._body = b""
                if request is not None:
                    keep_alive = request.keep_alive
                    # PROTOCOL.md §2: keep-alive is the rule (the CLI sends its next
                    # request on the connection whose answer just ended); a request
                    # that says `Connection: close` is the last one read.
                    if not keep_alive:
                        self._input_done = True
                    if self._task is None and not self._pending and not self._app_async and not self._writing_paused:
                        self._serve_now(request, body, keep_alive)
                    else:
                        self._pending.append((request, body, keep_alive))
            elif kind is http11.ParseError:
                self._pending.append(event)  # type: ignore[arg-type]
                self._input_done = True
                self._current = None
                self._body = b""
        if self.closed:
            return
        if self._timer is not None or self._current is not None or not self._parser.idle:
            self._watch_partial()
        if len(self._pending) >= MAX_PENDING and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        if self._pending and self._task is None:
            self._start_handler()

    def _watch_partial(self) -> None:
        """Arm the REQUEST_TIMEOUT timer while a request is partly received, and only
        then: an idle keep-alive connection waits for its next request without a timer
        (the CLI keeps connections open between prompts, PROTOCOL.md §2)."""
        partial = not self._input_done and (self._current is not None or not self._parser.idle)
        if partial:
            if self._timer is None:
                self._timer = self._loop.call_later(self._request_timeout, self._timed_out)
        elif self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        # A slow or stuck peer must not hold a connection forever with half a request:
        # answer 408 (after whatever is ahead of it) and close.
        self._timer = None
        if self.closed or self._input_done:
            return
        self._handle([http11.ParseError(408, "request not completed in time")])

    # --------------------------------------------------------------- the handler task

    def _serve_now(self, request: http11.Request, body: bytes, keep_alive: bool) -> None:
        """Answer a request inside data_received; what the application leaves to wait
        for becomes the handler task's first job."""
        self.requests += 1
        responder = Responder(self, request, keep_alive)
        try:
            rest = self._call_app(request, body, responder)
        except Exception:
            log.error("request handler failed", exc_info=True)
            rest = None
        if rest is not None:
            self._first = (rest, responder)
            self._start_handler()
        elif not (responder.finished and not responder.close_after and not self.closed):  # (the usual: nothing to do)
            if not self._conclude(responder):
                self.close()

    def _start_handler(self) -> None:
        task = _start_task(self._loop, self._answer_pending())
        if not task.done():  # (an eager task may have answered everything already)
            self._task = task

    async def _answer_pending(self) -> None:
        """The handler task: finishes the answer begun in data_received, if any, then
        answers the queued requests one at a time, in order, and ends (the next request
        starts a new one). Cancelled when the peer goes away."""
        try:
            keep_open = True
            first, self._first = self._first, None
            if first is not None:
                keep_open = await self._finish(*first)
            while keep_open and self._pending and not self.closed:
                if self._writing_paused:
                    await self.drained()  # the peer reads slowly: answer it no faster
                    continue
                item = self._pending.popleft()
                if self._reading_paused and len(self._pending) <= MAX_PENDING // 2:
                    self._reading_paused = False
                    self.transport.resume_reading()
                if isinstance(item, http11.ParseError):
                    self._write_error(item)
                    keep_open = False
                else:
                    self.requests += 1
                    keep_open = await self._serve_one(*item)
            if not keep_open:
                self.close()  # after an error, a `Connection: close` request, a lost peer
        except Exception:  # never let a failure end the task with an unread exception
            log.exception("connection %d failed", self.number)
            self.abort()
        finally:
            self._end_task()

    def _end_task(self) -> None:
        """The handler task is finishing (called from it, or from its done callback
        when it was cancelled before it could run): let the owner release us."""
        task = self._task
        if task is not None and (task.done() or task is asyncio.current_task()):
            self._task = None
        first, self._first = self._first, None
        if first is not None:
            _discard(first[0])  # cancelled before it started: let go of what it holds
        self._release()

    async def _serve_one(self, request: http11.Request, body: bytes, keep_alive: bool) -> bool:
        """Run the app for one request in the handler task; False when the connection
        must close."""
        responder = Responder(self, request, keep_alive)
        if self._app_async:
            return await self._finish(lambda: self.app(request, body, responder), responder)
        try:
            rest = self.app(request, body, responder)
        except Exception:
            log.error("request handler failed", exc_info=True)
            rest = None
        if rest is None:
            return self._conclude(responder)
        return await self._finish(rest, responder)

    async def _finish(self, rest: Any, responder: Responder) -> bool:
        """Await what the application left to do (a Continuation or an awaitable)."""
        try:
            await (rest() if callable(rest) else rest)
        except Exception:
            log.error("request handler failed", exc_info=True)
        return self._conclude(responder)

    def _conclude(self, responder: Responder) -> bool:
        """The application is done with a request: make sure its answer is complete.
        False when the connection must close."""
        if self.closed:
            return False
        if not responder.started:
            responder.send_now(500, [("Content-Type", "text/plain")], b"Internal Server Error")
        elif not responder.finished:
            responder.end_now()
        return not (responder.close_after or self.closed)

    def _write_error(self, error: http11.ParseError) -> None:
        body = ("%s\n" % error.message).encode("utf-8")
        self.write_nowait(http11.write_response(error.status, [("Content-Type", "text/plain; charset=utf-8"),
                                                               ("Connection", "close")], body))

    # ---------------------------------------------------------------------- writing

    def write_nowait(self, data: bytes) -> bool:
        if self.closed:
            return False
        transport = self.transport
        try:
            transport.write(data)
            # (Only a paused transport holds more than its high-water mark.)
            if self._writing_paused and transport.get_write_buffer_size() > MAX_WRITE_BUFFER:
                log.warning("connection %d: peer stopped reading; dropping it", self.number)
                self.abort()
                return False
        except (ConnectionError, RuntimeError, OSError):
            self.abort()
            return False
        return True

    async def write(self, data: bytes) -> bool:
        """Write, then wait while the transport's buffer is above its high-water mark
        (flow control: `pause_writing`/`resume_writing`); False once the peer is gone."""
        return self.write_nowait(data) and await self.drained()

    async def drained(self) -> bool:
        """Wait while the transport's buffer is above its high-water mark; False once
        the peer is gone."""
        if self._writing_paused and self._writable is not None:
            await self._writable.wait()
        return not self.closed

    async def wait_eof(self) -> None:
        """Until the connection ends (the peer closed it, or we did)."""
        if self.closed:
            return
        if self._closed_event is None:
            self._closed_event = asyncio.Event()
        await self._closed_event.wait()

    # ---------------------------------------------------------------------- closing

    def _shut(self) -> None:
        """The connection is over for us: stop the timer, drop queued requests, cancel
        the handler (nobody can receive its answer; a blocking open_diff resolves as
        disconnected) and wake whoever waits on the connection. Once only."""
        if self.closed:
            return
        self.closed = True
        self._input_done = True
        self._pending.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task = self._task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
            # Its finally clause may never run (a task cancelled before its first step
            # never enters its coroutine), so its end is also watched from outside.
            task.add_done_callback(lambda _: self._end_task())
        if self._closed_event is not None:
            self._closed_event.set()
        if self._writable is not None:
            self._writable.set()

    def close(self) -> None:
        """Cancel the handler and close after what is already written has been sent."""
        self._shut()
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Cancel the handler and drop the connection now, unsent bytes included."""
        self._shut()
        if self.transport is not None:
            self.transport.abort()

    def _release(self) -> None:
        if self._lost and self._task is None and self._owner is not None:
            self._owner._discard(self)


def _discard(rest: Any) -> None:
    """Give up what an application left to do, before it ran: a continuation's or a
    coroutine's `close()` (no "never awaited" warning), a future's `cancel()`."""
    close = getattr(rest, "close", None)
    if close is not None:
        close()
    elif asyncio.isfuture(rest):
        rest.cancel()


# ---------------------------------------------------------------------- listeners

async def wait_server_closed(server: Any, timeout: float = 5.0) -> None:
    """Wait, bounded, for a closed asyncio server to finish (3.12+ waits for its
    connections too: the caller must have dropped them first)."""
    try:
        await asyncio.wait_for(server.wait_closed(), timeout)
    except (asyncio.TimeoutError, Exception):
        pass


SUN_PATH_MAX = 103 if sys.platform == "darwin" or "bsd" in sys.platform else 107


def check_sun_path(path: str) -> None:
    """Unix socket paths are limited (107 bytes on Linux, 103 on macOS; PROTOCOL.md §1)."""
    size = len(os.fsencode(path))
    if size > SUN_PATH_MAX:
        raise ValueError("socket path %r is %d bytes, longer than the %d the OS allows for a Unix "
                         "socket; choose a shorter socket directory" % (path, size, SUN_PATH_MAX))


async def listen_unix(protocol_factory: Callable[[], asyncio.BaseProtocol],
                      directory: Optional[str] = None) -> Tuple[Any, str, str]:
    """A Unix socket server on `<fresh 0700 dir>/mcp.sock`, socket mode 0600
    (PROTOCOL.md §1); returns (server, socket directory, socket path). The directory
    is removed again if listening fails."""
    parent = directory if directory is not None else tempfile.gettempdir()
    if directory is None and len(os.fsencode(os.path.join(parent, "mcp-XXXXXXXX", "mcp.sock"))) > SUN_PATH_MAX:
        parent = "/tmp"  # e.g. a long $TMPDIR on macOS
    check_sun_path(os.path.join(parent, "mcp-XXXXXXXX", "mcp.sock"))
    sock_dir = tempfile.mkdtemp(prefix="mcp-", dir=parent)  # mkdtemp creates it 0700
    path = os.path.join(sock_dir, "mcp.sock")
    try:
        check_sun_path(path)
        server = await asyncio.get_event_loop().create_unix_server(protocol_factory, path=path)
        os.chmod(path, 0o600)
    except BaseException:
        shutil.rmtree(sock_dir, ignore_errors=True)
        raise
    return server, sock_dir, path


class Listener:
    """A listening socket plus the connections it accepted; the owner of both.

    Each connection is in `connections` from `connection_made` until its transport is
    gone and its handler task has finished; `close` ends them all."""

    def __init__(self, app: App, max_body: int, request_timeout: float = REQUEST_TIMEOUT) -> None:
        self.app = app
        self.max_body = max_body
        self.request_timeout = request_timeout
        self.socket_path = ""
        self.socket_dir: Optional[str] = None
        self.connections: Set[HttpConnection] = set()
        self._server: Any = None
        self._numbers = itertools.count(1)
        self.accepted = 0

    def _connection(self) -> HttpConnection:
        """The protocol factory given to the loop (Unix socket or named pipe)."""
        return HttpConnection(self.app, next(self._numbers), self.max_body, self.request_timeout, owner=self)

    def _adopt(self, conn: HttpConnection) -> None:
        self.accepted += 1
        self.connections.add(conn)

    def _discard(self, conn: HttpConnection) -> None:
        self.connections.discard(conn)

    @property
    def _tasks(self) -> "Set[asyncio.Task[None]]":
        """The handler tasks running now (`IdeServer.stats()["connection_tasks"]`); a
        connection between requests has none."""
        return {conn._task for conn in self.connections if conn._task is not None}

    async def start_unix(self, directory: Optional[str] = None) -> str:
        """Listen on `<fresh 0700 dir>/mcp.sock` (socket mode 0600) and return its path."""
        self._server, self.socket_dir, self.socket_path = await listen_unix(self._connection, directory)
        return self.socket_path

    async def start_pipe(self, name: Optional[str] = None) -> str:
        from ..common import winpipe  # Windows only

        self._server, self.socket_path = await winpipe.start_pipe_server(self._connection, name)
        return self.socket_path

    async def close(self) -> None:
        """Stop listening, drop every connection, remove the socket and its directory."""
        if self._server is not None:
            self._server.close()
        connections = list(self.connections)
        for conn in connections:
            conn.close()  # cancels its handler task; what was written is still sent
        tasks = [conn._task for conn in connections if conn._task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0)  # the transports' connection_lost callbacks
        if self.connections:
            # Transports still holding bytes their peer does not read: drop them.
            for conn in list(self.connections):
                conn.abort()
            await asyncio.sleep(0)
        if self._server is not None:
            await wait_server_closed(self._server)
            self._server = None
        self.remove_files()

    def remove_files(self) -> None:
        if self.socket_dir:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self.socket_dir = None
