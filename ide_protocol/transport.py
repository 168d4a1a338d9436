"""The asyncio glue: a listening socket and HTTP/1.1 connections over it.

This is the thin layer between the sans-IO `http11` parser and an application
coroutine `app(request, body, responder)`. Each connection has one owner task
(`HttpConnection.run`) which owns a reader task; requests are answered one at a time
in order, as HTTP/1.1 requires, while the reader keeps watching the socket so that a
peer that vanishes in the middle of a long request (a blocking `open_diff`) is noticed
at once and its handler cancelled.

Keep-alive matters (PROTOCOL.md §2): the CLI sends its next request on the connection
whose SSE response just ended, so the connection keeps reading until the peer closes it.
Windows named pipes live in `winpipe.py`; everything here is POSIX.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
import sys
import tempfile
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Set, Tuple

from . import http11

log = logging.getLogger(__name__)

App = Callable[[http11.Request, bytes, "Responder"], Awaitable[None]]

READ_SIZE = 256 * 1024
#: A request that has started arriving must finish within this many seconds (a slow
#: or stuck peer must not hold a connection forever with half a request).
REQUEST_TIMEOUT = 60.0
#: Bytes a peer may leave unread in our send buffer (pushes queued on a GET stream it
#: stopped reading) before the connection is dropped rather than growing without bound.
MAX_WRITE_BUFFER = 16 * 1024 * 1024


class Responder:
    """Writes the response to one request. Never raises on a vanished peer: writes to
    a closed connection are dropped and `closed` becomes true."""

    def __init__(self, conn: "HttpConnection", request: http11.Request) -> None:
        self._conn = conn
        self.request = request
        self.status: Optional[int] = None
        self.started = False
        self.finished = False
        self.streaming = False
        self.close_after = not request.keep_alive

    @property
    def closed(self) -> bool:
        return self._conn.closed

    @property
    def connection_number(self) -> int:
        return self._conn.number

    async def wait_closed(self) -> None:
        """Until the peer closes the connection (or the server stops)."""
        await self._conn.wait_eof()

    def _conn_headers(self, headers: List[Tuple[str, str]]) -> List[Tuple[str, str]]:
        if not any(k.lower() == "connection" for k, _ in headers):
            headers.append(("Connection", "close" if self.close_after else "keep-alive"))
        elif any(k.lower() == "connection" and v.lower() == "close" for k, v in headers):
            self.close_after = True
        return headers

    async def send(self, status: int, headers: Optional[List[Tuple[str, str]]] = None, body: bytes = b"") -> bool:
        """A complete response with a Content-Length body."""
        if self.started:
            raise RuntimeError("response already started")
        self.started = self.finished = True
        self.status = status
        data = http11.write_response(status, self._conn_headers(list(headers or [])), body)
        if self.request.method == "HEAD" and body:
            data = data[:-len(body)]  # a HEAD response has no body (RFC 9110 §9.3.2)
        return await self._conn.write(data)

    async def start(self, status: int, headers: Optional[List[Tuple[str, str]]] = None) -> bool:
        """The head of a chunked (streamed) response."""
        if self.started:
            raise RuntimeError("response already started")
        self.started = self.streaming = True
        self.status = status
        return await self._conn.write(http11.write_response_head(status, self._conn_headers(list(headers or []))))

    def start_nowait(self, status: int, headers: Optional[List[Tuple[str, str]]] = None) -> bool:
        """`start` without waiting for the socket to drain (for a loop callback)."""
        if self.started:
            raise RuntimeError("response already started")
        self.started = self.streaming = True
        self.status = status
        return self._conn.write_nowait(http11.write_response_head(status, self._conn_headers(list(headers or []))))

    async def send_chunked(self, status: int, headers: Optional[List[Tuple[str, str]]] = None,
                           chunks: Sequence[bytes] = ()) -> bool:
        """A whole chunked response (head, chunks, last chunk) in one write: one system
        call and one wake-up of the peer for a short SSE answer (issue 6)."""
        if self.started:
            raise RuntimeError("response already started")
        self.started = self.streaming = self.finished = True
        self.status = status
        parts = [http11.write_response_head(status, self._conn_headers(list(headers or [])))]
        if self.request.method != "HEAD":
            parts.extend(http11.encode_chunk(c) for c in chunks)
            parts.append(http11.LAST_CHUNK)
        return await self._conn.write(b"".join(parts))

    async def chunk(self, data: bytes) -> bool:
        """One chunk of the streamed body (one SSE event per chunk, PROTOCOL.md §2)."""
        if not self.streaming or self.finished:
            return False
        return await self._conn.write(http11.encode_chunk(data))

    def chunk_nowait(self, data: bytes) -> bool:
        """Queue a chunk without waiting for the socket to drain (pushes fan out to many
        streams; the transport buffers and a dead peer is noticed on the next write)."""
        if not self.streaming or self.finished:
            return False
        return self._conn.write_nowait(http11.encode_chunk(data))

    async def end(self, data: bytes = b"") -> bool:
        """Finish a streamed body with the last chunk (after `data` as a final chunk, in
        the same write); idempotent."""
        if not self.streaming or self.finished:
            return False
        self.finished = True
        return await self._conn.write(http11.encode_chunk(data) + http11.LAST_CHUNK)


class _Eof(asyncio.Event):
    """The connection's end: an Event that also resolves one future, so `asyncio.wait`
    can watch it for every request without starting a waiter task each time."""

    def __init__(self) -> None:
        super().__init__()
        self._future: "Optional[asyncio.Future[None]]" = None

    def future(self) -> "asyncio.Future[None]":
        if self._future is None:
            self._future = asyncio.get_event_loop().create_future()
            if self.is_set():
                self._future.set_result(None)
        return self._future

    def set(self) -> None:
        super().set()
        if self._future is not None and not self._future.done():
            self._future.set_result(None)


class HttpConnection:
    """One accepted connection: parse requests, run the app for each, in order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, app: App,
                 number: int, max_body: int, request_timeout: float = REQUEST_TIMEOUT) -> None:
        self.reader = reader
        self.writer = writer
        self.app = app
        self.number = number
        self.closed = False
        self.requests = 0
        self._parser = http11.RequestParser(max_body=max_body)
        self._queue: "asyncio.Queue[Any]" = asyncio.Queue(maxsize=8)
        self._eof = _Eof()
        self._request_timeout = request_timeout

    async def wait_eof(self) -> None:
        await self._eof.wait()

    def write_nowait(self, data: bytes) -> bool:
        if self.closed or self.writer.is_closing():
            self.closed = True
            return False
        try:
            self.writer.write(data)
            if self.writer.transport.get_write_buffer_size() > MAX_WRITE_BUFFER:
                log.warning("connection %d: peer stopped reading; dropping it", self.number)
                self.abort()
                return False
        except (ConnectionError, RuntimeError, OSError):
            self._lost()
            return False
        return True

    async def write(self, data: bytes) -> bool:
        if not self.write_nowait(data):
            return False
        try:
            await self.writer.drain()
        except (ConnectionError, RuntimeError, OSError):
            self._lost()
            return False
        return True

    def _lost(self) -> None:
        self.closed = True
        self._eof.set()

    async def _read_loop(self) -> None:
        """Owned by `run`: turns bytes into complete (request, body) items or errors."""
        parser = self._parser
        current: Optional[http11.Request] = None
        # One growing buffer, not a list of pieces joined at the end: a 10 MB body then
        # needs no 16 KiB heap blocks that stay resident after the request (issue 6).
        body = bytearray()
        try:
            while True:
                timeout = None if parser.idle and current is None else self._request_timeout
                try:
                    if timeout is None:  # between requests: no timer (issue 6)
                        data = await self.reader.read(READ_SIZE)
                    else:
                        data = await asyncio.wait_for(self.reader.read(READ_SIZE), timeout)
                except asyncio.TimeoutError:
                    await self._queue.put(http11.ParseError(408, "request not completed in time"))
                    return
                events = parser.feed(data) if data else parser.feed_eof()
                for event in events:
                    if isinstance(event, http11.Request):
                        current, body = event, bytearray()
                    elif isinstance(event, http11.Data):
                        body += event.data
                    elif isinstance(event, http11.EndOfMessage):
                        if current is not None:
                            await self._queue.put((current, bytes(body)))
                        current, body = None, bytearray()
                    elif isinstance(event, http11.ParseError):
                        await self._queue.put(event)
                        return
                    elif isinstance(event, http11.ConnectionClosed):
                        return
                if not data:
                    return
        except (ConnectionError, OSError):
            return
        finally:
            self._eof.set()
            # Wake the owner if it waits for a request that will never come.
            if self._queue.empty():
                self._queue.put_nowait(None)

    async def run(self) -> None:
        reader_task = asyncio.ensure_future(self._read_loop())
        try:
            while True:
                if self._eof.is_set() and self._queue.empty():
                    break  # the reader is done (or the connection lost): nothing more comes
                item = await self._queue.get()
                if item is None:
                    break
                if isinstance(item, http11.ParseError):
                    await self._send_error(item)
                    break
                request, body = item
                self.requests += 1
                if not await self._serve_one(request, body):
                    break
        finally:
            reader_task.cancel()
            await asyncio.gather(reader_task, return_exceptions=True)
            self.closed = True
            self._eof.set()
            try:
                self.writer.close()
            except (ConnectionError, RuntimeError, OSError):
                pass

    async def _send_error(self, error: http11.ParseError) -> None:
        body = ("%s\n" % error.message).encode("utf-8")
        await self.write(http11.write_response(error.status, [("Content-Type", "text/plain; charset=utf-8"),
                                                              ("Connection", "close")], body))

    async def _serve_one(self, request: http11.Request, body: bytes) -> bool:
        """Run the app for one request; False when the connection must close."""
        responder = Responder(self, request)
        handler = asyncio.ensure_future(self.app(request, body, responder))
        try:
            # The connection's one EOF future, not a waiter task per request (issue 6).
            await asyncio.wait({handler, self._eof.future()}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            handler.cancel()
            await asyncio.gather(handler, return_exceptions=True)
            raise
        if not handler.done():
            # The peer went away while we were working for it: nobody can receive the
            # answer, so stop the work (a blocking open_diff resolves as disconnected).
            handler.cancel()
            await asyncio.gather(handler, return_exceptions=True)
            return False
        exc = handler.exception() if not handler.cancelled() else None
        if exc is not None:
            log.error("request handler failed", exc_info=exc)
        if not responder.started:
            await responder.send(500, [("Content-Type", "text/plain")], b"Internal Server Error")
        elif not responder.finished:
            await responder.end()
        return not (responder.close_after or self.closed)

    def abort(self) -> None:
        self.closed = True
        self._eof.set()
        try:
            self.writer.close()
        except (ConnectionError, RuntimeError, OSError):
            pass


# ---------------------------------------------------------------------- listeners

SUN_PATH_MAX = 103 if sys.platform == "darwin" or "bsd" in sys.platform else 107


def check_sun_path(path: str) -> None:
    """Unix socket paths are limited (107 bytes on Linux, 103 on macOS; PROTOCOL.md §1)."""
    size = len(os.fsencode(path))
    if size > SUN_PATH_MAX:
        raise ValueError("socket path %r is %d bytes, longer than the %d the OS allows for a Unix "
                         "socket; choose a shorter socket directory" % (path, size, SUN_PATH_MAX))


class Listener:
    """A listening socket plus the connections it accepted; the owner of both."""

    def __init__(self, app: App, max_body: int, request_timeout: float = REQUEST_TIMEOUT) -> None:
        self.app = app
        self.max_body = max_body
        self.request_timeout = request_timeout
        self.socket_path = ""
        self.socket_dir: Optional[str] = None
        self.connections: Set[HttpConnection] = set()
        self._tasks: Set["asyncio.Task[None]"] = set()
        self._server: Any = None
        self._numbers = itertools.count(1)
        self.accepted = 0

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = HttpConnection(reader, writer, self.app, next(self._numbers), self.max_body, self.request_timeout)
        self.accepted += 1
        self.connections.add(conn)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await conn.run()
        except asyncio.CancelledError:
            pass
        except Exception:  # never let one connection's failure escape into asyncio's logs only
            log.exception("connection %d failed", conn.number)
        finally:
            self.connections.discard(conn)
            if task is not None:
                self._tasks.discard(task)

    async def start_unix(self, directory: Optional[str] = None) -> str:
        """Listen on `<fresh 0700 dir>/mcp.sock` (socket mode 0600) and return its path."""
        parent = directory if directory is not None else tempfile.gettempdir()
        if directory is None and len(os.fsencode(os.path.join(parent, "mcp-XXXXXXXX", "mcp.sock"))) > SUN_PATH_MAX:
            parent = "/tmp"  # e.g. a long $TMPDIR on macOS
        check_sun_path(os.path.join(parent, "mcp-XXXXXXXX", "mcp.sock"))
        sock_dir = tempfile.mkdtemp(prefix="mcp-", dir=parent)  # mkdtemp creates it 0700
        path = os.path.join(sock_dir, "mcp.sock")
        try:
            check_sun_path(path)
            self._server = await asyncio.start_unix_server(self._client, path=path)
            os.chmod(path, 0o600)
        except BaseException:
            shutil.rmtree(sock_dir, ignore_errors=True)
            raise
        self.socket_dir = sock_dir
        self.socket_path = path
        return path

    async def start_pipe(self, name: Optional[str] = None) -> str:
        from . import winpipe  # Windows only

        self._server, self.socket_path = await winpipe.start_pipe_server(self._client, name)
        return self.socket_path

    async def close(self) -> None:
        """Stop listening, drop every connection, remove the socket and its directory."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 5)
            except (asyncio.TimeoutError, Exception):
                pass
            self._server = None
        self.remove_files()

    def remove_files(self) -> None:
        if self.socket_dir:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self.socket_dir = None
