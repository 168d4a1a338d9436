"""What the MCP layer keeps per session: the session itself, its GET stream, and the
requests of it that are still running (PROTOCOL.md §3).

No sockets here. A `GetStream` is the body of a session's `GET /mcp` answer as the
transport sees it, an async iterator of SSE events (PROTOCOL.md §2); pushes are queued
on it from anywhere in the loop's thread and the transport writes them in order. A
`RunningRequest` is a request whose method has to wait: it runs in a task of its own,
so that `notifications/cancelled` and the end of the session can cancel the method
alone, and the connection's task that waits for its answer is never cancelled by us.
"""
from __future__ import annotations

import asyncio
import collections
import time
from typing import Any, Deque, Dict, Optional, Set

from .. import rpc
from ..wire import http11

class GetStream:
    """A session's GET stream: events pushed to it, given to the transport in order.

    `push` queues an event (False once the stream is over); `end` finishes the body
    after the queued events (the session ended); `close` is the transport saying it is
    done with the stream (the body ended or the peer went away). The transport writes
    each event as it comes and drops a peer that leaves too much unread
    (`transport.MAX_WRITE_BUFFER`), so the queue holds only what arrived since the
    transport's last turn."""

    def __init__(self) -> None:
        self.closed = False
        self._events: Deque[bytes] = collections.deque()
        self._ended = False
        self._waiter: "Optional[asyncio.Future[None]]" = None

    def push(self, event: bytes) -> bool:
        if self.closed or self._ended:
            return False
        self._events.append(event)
        self._wake()
        return True

    def end(self) -> None:
        self._ended = True
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._events.clear()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def __aiter__(self) -> "GetStream":
        return self

    async def __anext__(self) -> bytes:
        while not self._events:
            if self._ended or self.closed:
                raise StopAsyncIteration
            self._waiter = asyncio.get_event_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._events.popleft()


class Session:
    """One MCP session: what the server knows of one connected CLI (PROTOCOL.md §3)."""

    def __init__(self, session_id: str, client_session_id: Optional[str], protocol_version: str,
                 client_info: Any, sse_headers: Any = ()) -> None:
        self.id = session_id
        self.client_session_id = client_session_id
        self.protocol_version = protocol_version
        self.client_info = client_info if isinstance(client_info, dict) else {}
        self.client_pid: Optional[str] = None
        self.initialized = False
        self.name: Optional[str] = None
        self.created = time.monotonic()
        self.last_seen = self.created
        self.stream: Optional[GetStream] = None
        #: The head fields of this session's SSE answers (a tuple that never changes,
        #: so the wire layer encodes its head once).
        self.sse_headers = tuple(sse_headers) + (("mcp-session-id", session_id),)
        self.running: Dict[Any, "RunningRequest"] = {}  # JSON-RPC id -> the running method
        self.active_requests = 0
        self.ended = False
        #: The connections that carried this session's requests or its stream and are
        #: still open (transport numbers): when the last one closes the client has
        #: vanished, and the session ends shortly after (PROTOCOL.md §3).
        self.connections: Set[int] = set()

    @property
    def busy(self) -> bool:
        """A GET stream or a request is open: never idle-expired then."""
        return self.stream is not None or self.active_requests > 0

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    def info(self) -> Dict[str, Any]:
        return {"id": self.id, "client_session_id": self.client_session_id, "name": self.name,
                "client": self.client_info.get("name"), "client_version": self.client_info.get("version"),
                "client_pid": self.client_pid, "protocol_version": self.protocol_version,
                "initialized": self.initialized, "stream_open": self.stream is not None,
                "running_requests": len(self.running)}


class RunningRequest:
    """A request of a session whose method has to wait (an `rpc.Deferred`).

    Registered in `session.running` from creation until `release()`. `response()` runs
    the method in a task of its own and gives its JSON-RPC response, or None when the
    method was cancelled (`notifications/cancelled`, PROTOCOL.md §3: no answer is due
    then, the request ends with an empty body). `release()` is idempotent; called before
    `response()` it gives the method up without running it."""

    __slots__ = ("session", "id", "deferred", "task", "cancelled", "released")

    def __init__(self, session: Session, request_id: Any, deferred: rpc.Deferred) -> None:
        self.session = session
        self.id = request_id
        self.deferred = deferred
        self.task: "Optional[asyncio.Future[Any]]" = None
        self.cancelled = False
        self.released = False
        session.running[request_id] = self
        session.active_requests += 1

    def done(self) -> bool:
        return self.released or (self.task is not None and self.task.done())

    def cancel(self) -> None:
        self.cancelled = True
        if self.task is not None:
            self.task.cancel()

    async def response(self) -> Optional[Dict[str, Any]]:
        try:
            if self.cancelled:
                return None  # cancelled before it started: release() drops it
            task = self.task = asyncio.ensure_future(self.deferred.run())
            try:
                # (wait, not await: a cancelled method is an answer here, while the
                # cancellation of the caller, a peer gone, must reach the method.)
                await asyncio.wait((task,))
            except asyncio.CancelledError:
                task.cancel()
                raise
            if task.cancelled():
                return None
            return task.result()
        finally:
            self.release()

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        # A method that never started (cancelled first, or never run) has not taken up
        # what a plain handler returned: close that (no "never awaited"); a no-op once
        # it has started.
        self.deferred.drop()
        session = self.session
        if session.running.get(self.id) is self:
            del session.running[self.id]
        session.active_requests -= 1
        session.touch()


class CallContext:
    """What a method handler knows about the request it serves: the session, the
    JSON-RPC id, the HTTP header fields (per-session tools such as
    `update_session_name` and `open_diff` find their session here)."""

    __slots__ = ("session", "request_id", "headers")

    def __init__(self, session: Optional[Session], request_id: Any, headers: http11.Headers) -> None:
        self.session = session
        self.request_id = request_id
        self.headers = headers
