"""The listening side: a socket (Unix, or a Windows named pipe) and the connections it
accepted, owned together.

`Listener` makes one `transport.HttpConnection` per accepted connection, all calling the
same application (`answers.App`) after the same judge (`answers.Judge`), and hands each
two callbacks: `on_open` (the connection limit is applied there) and `on_gone` (it
leaves `connections`, and the owner's `on_connection_closed` hears of it). It bounds
how many there are, closes the idle ones on request, and `close()` ends them all before
it removes the socket and its directory. Ownership runs one way: the listener reads a
connection's public state only (`idle`, `closed`, `busy`, `last_active`), and a
connection knows its listener only through those two callbacks.

On a Unix socket it accepts through an `acceptor.Acceptor` of its own (not
`asyncio.Server`: see that module for why), so that running out of file descriptors
pauses accepting while the connections already open are served (`open_diff` answers an
error when it cannot open a file: see `diffs`).
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any, Callable, Optional, Set

from ..wire import http11
from .acceptor import Acceptor
from .answers import App, Judge
from .sockets import bind_unix, remove_socket_dir, wait_server_closed
from .limits import REQUEST_TIMEOUT
from .transport import HttpConnection

__all__ = ["Listener"]

log = logging.getLogger(__name__)


class Listener:
    """A listening socket plus the connections it accepted; the owner of both.

    Each connection is in `connections` from `connection_made` until its transport is
    gone and its handler task has finished; `close` ends them all. `app` is read when
    a connection is accepted (a wrapper set after construction applies to the
    connections accepted after that)."""

    def __init__(self, app: App, max_body: Optional[int] = None, request_timeout: float = REQUEST_TIMEOUT,
                 judge: Optional[Judge] = None, *, max_connections: Optional[int] = None,
                 on_connection_closed: Optional[Callable[[int, bool], None]] = None) -> None:
        self.app = app
        #: Every request's head is judged by it, once, before `app` sees the request.
        self.judge = judge
        self.max_body = max_body
        self.request_timeout = request_timeout
        self.socket_path = ""
        self.socket_dir: Optional[str] = None
        self.connections: Set[HttpConnection] = set()
        self._server: Any = None
        self._numbers = itertools.count(1)
        self.accepted = 0
        #: At most this many open connections (None or 0: no limit). At the limit the
        #: connection idle longest makes room; when none is idle the new one is
        #: answered 503 and closed (README "Limits and safety").
        self.max_connections = max_connections
        self.refused = 0
        #: The accept loop on a Unix socket (see the module's doc).
        self.acceptor: Optional[Acceptor] = None
        #: Called with a connection's number once it is gone, and whether its client
        #: went (True) or this listener let an idle one go (False): the MCP layer learns
        #: which sessions lost their last connection, and a session is taken for
        #: abandoned only when its client went (PROTOCOL.md §3, "When a session ends").
        self.on_connection_closed = on_connection_closed
        self._let_go: Set[int] = set()

    def _connection(self) -> HttpConnection:
        """The protocol factory given to the loop (Unix socket or named pipe)."""
        return HttpConnection(self.app, next(self._numbers), self.max_body, self.request_timeout, judge=self.judge,
                              on_open=self._adopt, on_gone=self._discard)

    def _adopt(self, conn: HttpConnection) -> None:
        """A connection's transport is made (its `on_open`): it joins `connections`,
        unless the limit is reached and no idle one can make room (503, closed)."""
        self.accepted += 1
        if self.max_connections and not self._room_for_one():  # (None or 0: no limit)
            self.refused += 1
            body = b"Service Unavailable: too many connections (limit %d), none idle\n" % self.max_connections
            conn.write_nowait(http11.write_response(503, [("Content-Type", "text/plain")], body, keep_alive=False))
            conn.close()
            return
        self.connections.add(conn)

    def _room_for_one(self) -> bool:
        """Whether one more connection fits, after closing the one idle longest if needed."""
        assert self.max_connections
        live = [c for c in self.connections if not c.closed]
        if len(live) < self.max_connections:
            return True
        idle = [c for c in live if c.idle]
        if not idle:
            return False
        # (Equally idle, the first opened goes: Windows's clock moves in 15.6 ms steps, so
        # connections opened together share their time, and a set has no order.)
        self._let_idle_go(min(idle, key=lambda c: (c.last_active, c.number)))
        return True

    def _let_idle_go(self, conn: HttpConnection) -> None:
        """Close a connection idle between requests: the client did not leave (its pool
        connects again when it needs to), so its sessions are not taken for abandoned."""
        self._let_go.add(conn.number)
        conn.close()

    def close_idle(self, timeout: float) -> int:
        """Close the connections idle (between requests) for `timeout` seconds or more;
        how many. A client's pooled connection reconnects when it needs to."""
        now = asyncio.get_event_loop().time()
        stale = [c for c in self.connections if c.idle and now - c.last_active >= timeout]
        for conn in stale:
            self._let_idle_go(conn)
        return len(stale)

    def _discard(self, conn: HttpConnection) -> None:
        """A connection is gone, its task ended (its `on_gone`): it leaves `connections`,
        and the owner hears whether its client went (`on_connection_closed`)."""
        if conn in self.connections:
            self.connections.discard(conn)
            client_went = conn.number not in self._let_go
            self._let_go.discard(conn.number)
            if self.on_connection_closed is not None:
                try:
                    self.on_connection_closed(conn.number, client_went)
                except Exception:
                    log.exception("on_connection_closed failed")

    @property
    def busy(self) -> int:
        """How many connections have a task writing an answer now
        (`IdeServer.stats()["connection_tasks"]`); a connection between requests has none."""
        return sum(1 for conn in self.connections if conn.busy)

    async def let_answers_out(self, timeout: float) -> None:
        """Wait, `timeout` seconds at most, for the answers being written to be written
        (a stopping server lets its last answers out before it closes the connections)."""
        waits = [asyncio.ensure_future(conn.finished()) for conn in self.connections if conn.busy]
        if waits:
            _, late = await asyncio.wait(waits, timeout=timeout)
            for wait in late:
                wait.cancel()  # (the wait only: `finished` leaves the task alone)
            if late:
                await asyncio.wait(late)

    async def start_unix(self, directory: Optional[str] = None) -> str:
        """Listen on `<fresh 0700 dir>/mcp.sock` (socket mode 0600) and return its path."""
        sock, self.socket_dir, self.socket_path = bind_unix(directory)
        self.acceptor = Acceptor(sock, self._connection)
        self.acceptor.start()
        return self.socket_path

    async def start_pipe(self, name: Optional[str] = None) -> str:
        from ..common import winpipe  # Windows only

        self._server, self.socket_path = await winpipe.start_pipe_server(self._connection, name)
        return self.socket_path

    async def close(self) -> None:
        """Stop listening, drop every connection, remove the socket and its directory."""
        if self.acceptor is not None:
            await self.acceptor.close()
        if self._server is not None:
            self._server.close()
        connections = list(self.connections)
        for conn in connections:
            conn.close()  # cancels its task; what was written is still sent
        await asyncio.gather(*(conn.finished() for conn in connections))
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
            remove_socket_dir(self.socket_dir)
            self.socket_dir = None
