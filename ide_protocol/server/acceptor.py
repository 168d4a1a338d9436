"""Accepting connections on a listening Unix socket, by ourselves rather than by
`asyncio.Server`: the IDE server's listener, the relay's CLI half and the tracer all
accept here.

Why not `loop.create_unix_server`: two things it cannot do.

* **Closing while a connection is half accepted.** `asyncio.Server` accepts in a reader
  callback and makes the transport in a task one loop turn later; a server closed in
  between (a relay stopped by SIGTERM while the CLI connects) leaves a half-made
  transport that, when collected, wakes the closed server a second time and prints
  "Exception ignored in: _SelectorTransport.__del__ ... TypeError: 'NoneType' object is
  not iterable" (CPython gh-109564, open in 3.12 and 3.13). Here every accepted socket
  is owned until it is a transport: `close()` cancels the tasks still making one and
  closes their sockets.
* **Running out of file descriptors** (EMFILE, ENFILE, ENOBUFS, ENOMEM). asyncio logs
  through the loop's exception handler and retries; here accepting pauses, one warning
  line is logged (at most one per ACCEPT_WARN_INTERVAL), and accepting resumes after
  ACCEPT_RETRY seconds by a timer the acceptor owns and `close()` cancels. Nothing is
  installed in the loop (the library is a guest in its host's loop).
"""
from __future__ import annotations

import asyncio
import errno
import functools
import logging
import socket
from typing import Any, Awaitable, Callable, Optional, Set

__all__ = ["ACCEPT_BATCH", "ACCEPT_RETRY", "ACCEPT_WARN_INTERVAL", "Acceptor", "stream_protocols"]

log = logging.getLogger(__name__)

#: Seconds accepting pauses when the process has no descriptor left for a connection.
ACCEPT_RETRY = 1.0
#: At most one warning about it per this many seconds.
ACCEPT_WARN_INTERVAL = 10.0
#: Connections accepted per readiness callback at most (others wait for the next turn).
ACCEPT_BATCH = 64
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)

ProtocolFactory = Callable[[], asyncio.BaseProtocol]


def stream_protocols(on_connection: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[Any]],
                     limit: int = 2 ** 16) -> ProtocolFactory:
    """A protocol factory making what `asyncio.start_unix_server` makes for each
    connection: a StreamReader (`limit` bytes buffered at most) and a StreamWriter,
    handed to `on_connection`, whose coroutine runs as a task of the protocol's."""
    def protocol() -> asyncio.StreamReaderProtocol:
        return asyncio.StreamReaderProtocol(asyncio.StreamReader(limit=limit), on_connection)
    return protocol


class Acceptor:
    """Accepts on `sock` (listening, non-blocking) and makes each connection a transport
    with a protocol from `protocols`, on the running loop. The owner of the socket from
    `start()` on: `close()` stops accepting, closes it, and drops the connections
    accepted but not yet made transports. The transports made belong to their
    protocols (and those to whoever made them)."""

    def __init__(self, sock: socket.socket, protocols: ProtocolFactory) -> None:
        self.sock: Optional[socket.socket] = sock
        self.protocols = protocols
        #: How many times accepting failed and paused (out of descriptors, or another error).
        self.failures = 0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._watching = False
        self._retry: Optional[asyncio.TimerHandle] = None
        self._warned_at: Optional[float] = None
        self._making: "Set[asyncio.Task[Any]]" = set()

    @property
    def paused(self) -> bool:
        """Whether accepting waits for its retry timer (out of descriptors)."""
        return self._retry is not None

    def start(self) -> None:
        """Start accepting (on the running loop)."""
        self._loop = asyncio.get_event_loop()
        self._watch()

    def _watch(self) -> None:
        assert self._loop is not None and self.sock is not None
        self._loop.add_reader(self.sock.fileno(), self._accept_ready)
        self._watching = True

    def _unwatch(self) -> None:
        if self._watching and self._loop is not None and self.sock is not None:
            self._loop.remove_reader(self.sock.fileno())
        self._watching = False

    def _accept_ready(self) -> None:
        """The listening socket is readable: accept what is waiting (a batch at most)."""
        assert self._loop is not None and self.sock is not None
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    self._pause(exc)
                    return
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO):
                    continue  # (that peer gave up before we accepted it)
                log.error("accept() failed: %s", exc)
                self._pause(exc)
                return
            conn.setblocking(False)
            # (On every loop since Python 3.5.3; typeshed lists it on AbstractEventLoop from 3.10.)
            making = self._loop.connect_accepted_socket(self.protocols, conn)  # type: ignore[attr-defined]
            task = self._loop.create_task(making)
            self._making.add(task)
            task.add_done_callback(functools.partial(self._made, conn=conn))

    def _made(self, task: "asyncio.Task[Any]", conn: socket.socket) -> None:
        self._making.discard(task)
        if task.cancelled() or task.exception() is not None:
            conn.close()  # (the connection never became a transport: closed here, not leaked)

    def _pause(self, exc: OSError) -> None:
        """Stop watching the socket (a waiting peer would wake the loop at once, for
        ever) and retry in ACCEPT_RETRY seconds."""
        assert self._loop is not None
        self.failures += 1
        now = self._loop.time()
        if self._warned_at is None or now - self._warned_at >= ACCEPT_WARN_INTERVAL:
            self._warned_at = now
            log.warning("cannot accept connections: %s (retrying every %g s)", exc, ACCEPT_RETRY)
        self._unwatch()
        if self._retry is None:
            self._retry = self._loop.call_later(ACCEPT_RETRY, self._resume)

    def _resume(self) -> None:
        self._retry = None
        if self.sock is not None:
            self._watch()
            self._accept_ready()

    async def close(self) -> None:
        """Stop accepting and close the socket; the connections accepted but not yet
        transports are closed (their tasks cancelled and awaited)."""
        self._unwatch()
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        making = list(self._making)
        for task in making:
            task.cancel()  # (its socket is closed by `_made`)
        if making:
            await asyncio.gather(*making, return_exceptions=True)
