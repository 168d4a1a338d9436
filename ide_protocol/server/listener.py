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

On a Unix socket it accepts by itself (`_accept_ready`), so that running out of file
descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM) is handled here, by its owner, and
nothing is installed in the loop: accepting pauses, one warning line is logged (at most
one per ACCEPT_WARN_INTERVAL), and accepting resumes after ACCEPT_RETRY seconds, by a
timer the listener owns and `close()` cancels. Meanwhile the connections already open
are served (`open_diff` answers an error when it cannot open a file: see `diffs`).
"""
from __future__ import annotations

import asyncio
import errno
import functools
import itertools
import logging
import socket
from typing import Any, Callable, Optional, Set

from ..wire import http11
from .answers import App, Judge
from .sockets import bind_unix, remove_socket_dir, wait_server_closed
from .limits import REQUEST_TIMEOUT
from .transport import HttpConnection

__all__ = ["Listener"]

log = logging.getLogger(__name__)

#: Seconds accepting pauses when the process has no descriptor left for a connection.
ACCEPT_RETRY = 1.0
#: At most one warning about it per this many seconds.
ACCEPT_WARN_INTERVAL = 10.0
#: Connections accepted per readiness callback at most (others wait for the next turn).
ACCEPT_BATCH = 64
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


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
        # The accept loop on a Unix socket (see the module's doc): the socket, whether
        # it is watched, the retry timer while paused, and the transports being made.
        self._sock: Optional[socket.socket] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._accepting = False
        self._retry: Optional[asyncio.TimerHandle] = None
        self._warned_at: Optional[float] = None
        self.accept_failures = 0
        self._pending: "Set[asyncio.Task[Any]]" = set()
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
        self._sock, self.socket_dir, self.socket_path = bind_unix(directory)
        self._loop = asyncio.get_event_loop()
        self._watch()
        return self.socket_path

    # -- the accept loop (Unix sockets)

    def _watch(self) -> None:
        assert self._loop is not None and self._sock is not None
        self._loop.add_reader(self._sock.fileno(), self._accept_ready)
        self._accepting = True

    def _unwatch(self) -> None:
        if self._accepting and self._loop is not None and self._sock is not None:
            self._loop.remove_reader(self._sock.fileno())
        self._accepting = False

    def _accept_ready(self) -> None:
        """The listening socket is readable: accept what is waiting (a batch at most)."""
        assert self._loop is not None and self._sock is not None
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    self._pause_accepting(exc)
                    return
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO):
                    continue  # (that peer gave up before we accepted it)
                log.error("accept() failed: %s", exc)
                self._pause_accepting(exc)
                return
            conn.setblocking(False)
            # (On every loop since Python 3.5.3; typeshed lists it on AbstractEventLoop from 3.10.)
            accepted = self._loop.connect_accepted_socket(self._connection, conn)  # type: ignore[attr-defined]
            task = self._loop.create_task(accepted)
            self._pending.add(task)
            task.add_done_callback(functools.partial(self._made, conn=conn))

    def _made(self, task: "asyncio.Task[Any]", conn: socket.socket) -> None:
        self._pending.discard(task)
        if task.cancelled() or task.exception() is not None:
            conn.close()  # (the connection never became a transport: closed here, not leaked)

    def _pause_accepting(self, exc: OSError) -> None:
        """Out of descriptors: stop watching the socket (a waiting peer would wake the
        loop at once, forever) and retry in ACCEPT_RETRY seconds."""
        assert self._loop is not None
        self.accept_failures += 1
        now = self._loop.time()
        if self._warned_at is None or now - self._warned_at >= ACCEPT_WARN_INTERVAL:
            self._warned_at = now
            log.warning("cannot accept connections: %s (retrying every %g s)", exc, ACCEPT_RETRY)
        self._unwatch()
        if self._retry is None:
            self._retry = self._loop.call_later(ACCEPT_RETRY, self._resume_accepting)

    def _resume_accepting(self) -> None:
        self._retry = None
        if self._sock is not None:
            self._watch()
            self._accept_ready()

    async def start_pipe(self, name: Optional[str] = None) -> str:
        from ..common import winpipe  # Windows only

        self._server, self.socket_path = await winpipe.start_pipe_server(self._connection, name)
        return self.socket_path

    async def close(self) -> None:
        """Stop listening, drop every connection, remove the socket and its directory."""
        self._unwatch()
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        pending = list(self._pending)
        for task in pending:
            task.cancel()  # (its socket is closed by `_made`)
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
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
