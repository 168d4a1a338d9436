"""The listening side: a socket (Unix, or a Windows named pipe) and the connections it
accepted, owned together.

`Listener` makes one `transport.HttpConnection` per accepted connection, all calling the
same application (`answers.App`), holds each in `connections` until it is gone, bounds
how many there are, closes the idle ones on request, and `close()` ends them all before
it removes the socket and its directory.
"""
from __future__ import annotations

import asyncio
import itertools
import shutil
from typing import Any, Optional, Set

from ..wire import http11
from .answers import App
from .sockets import listen_unix, wait_server_closed
from .transport import REQUEST_TIMEOUT, HttpConnection

__all__ = ["Listener"]


class Listener:
    """A listening socket plus the connections it accepted; the owner of both.

    Each connection is in `connections` from `connection_made` until its transport is
    gone and its handler task has finished; `close` ends them all. `app` is read when
    a connection is accepted (a wrapper set after construction applies to the
    connections accepted after that)."""

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
        #: At most this many open connections (None: no limit). At the limit the
        #: connection idle longest makes room; when none is idle the new one is
        #: answered 503 and closed (set by IdeServer, README "Limits and safety").
        self.max_connections: Optional[int] = None
        self.refused = 0

    def _connection(self) -> HttpConnection:
        """The protocol factory given to the loop (Unix socket or named pipe)."""
        return HttpConnection(self.app, next(self._numbers), self.max_body, self.request_timeout, owner=self)

    def _adopt(self, conn: HttpConnection) -> None:
        self.accepted += 1
        if self.max_connections is not None and not self._room_for_one():
            self.refused += 1
            body = b"Service Unavailable: too many connections (limit %d), none idle\n" % self.max_connections
            conn.write_nowait(http11.write_response(503, [("Content-Type", "text/plain"), ("Connection", "close")],
                                                    body))
            conn.close()
            return
        self.connections.add(conn)

    def _room_for_one(self) -> bool:
        """Whether one more connection fits, after closing the one idle longest if needed."""
        assert self.max_connections is not None
        live = [c for c in self.connections if not c.closed]
        if len(live) < self.max_connections:
            return True
        idle = [c for c in live if c.idle]
        if not idle:
            return False
        min(idle, key=lambda c: c.last_active).close()
        return True

    def close_idle(self, timeout: float) -> int:
        """Close the connections idle (between requests) for `timeout` seconds or more;
        how many. A client's pooled connection reconnects when it needs to."""
        now = asyncio.get_event_loop().time()
        stale = [c for c in self.connections if c.idle and now - c.last_active >= timeout]
        for conn in stale:
            conn.close()
        return len(stale)

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
