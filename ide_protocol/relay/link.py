"""The link between the two halves on asyncio: streams with flow control over one pipe.

`frames` owns the format; this is the thin layer that reads and writes it. The link
has one owner task (`run`), which reads frames and hands each stream's bytes to that
stream's inbox; a stream's consumer takes them with `read()`, which gives the bytes'
credit back, so a stream whose consumer is slow stops its sender (after
`frames.INITIAL_WINDOW` bytes) and never the link: one slow stream never blocks another.

Liveness: a link can die without ending (a suspended laptop, a partitioned network, a
stopped process on the other side: the pipe stays open and says nothing). So each half
sends a PING every `timeout / PINGS_PER_TIMEOUT` seconds (5 at most), which the other
half answers at once, and any frame received counts as a sign of life; after that many
intervals in a row with nothing heard (about `timeout` seconds) the link is declared
dead and `run` ends, saying so. The count is of the half's own ticks, not of wall time,
so a half whose own loop was held up (a large message rewritten) does not blame the
other for it. The other half's greeting is awaited as long.

What the link holds is bounded: a stream's inbox by its window (`INITIAL_WINDOW`: more
ends the link as an overrun), a stream's unsent bytes by one frame (a sender waits for
the pipe before it writes the next), and the streams the other half may open by
`max_streams` (one more is closed at once).
"""
from __future__ import annotations

import asyncio
import struct
from typing import Awaitable, Callable, Dict, Optional, Set

from . import frames

#: Seconds of silence after which a link is declared dead (each half's own choice:
#: `relay --link-timeout`); 0 or None: never.
LINK_TIMEOUT = 30.0
#: Ping intervals in a timeout: the link dies after this many silent ones in a row.
PINGS_PER_TIMEOUT = 6
MAX_PING_INTERVAL = 5.0
#: Streams the other half may have open on this one at once (`relay --max-connections`).
MAX_STREAMS = 256
#: How long the tasks of the streams get, once the link ended, to finish on their own
#: (answering what they still owe their peers) before they are cancelled.
END_GRACE = 2.0


async def drained(writer: asyncio.StreamWriter, timeout: Optional[float] = None) -> bool:
    """Wait until the peer took what was written; False when it is gone, or when it did
    not take it within `timeout` seconds (then the connection is cut: a peer that stops
    reading must not hold what was written for it forever)."""
    try:
        await asyncio.wait_for(writer.drain(), timeout)
    except asyncio.TimeoutError:
        writer.transport.abort()
        return False
    except (ConnectionError, OSError):
        return False
    return True


class Stream:
    """One relayed connection. `send` waits for window; `read` returns b"" at its end."""

    def __init__(self, link: "Link", stream_id: int) -> None:
        self.link = link
        self.id = stream_id
        self._window = frames.INITIAL_WINDOW
        self._credit = asyncio.Event()
        self._inbox: "asyncio.Queue[bytes]" = asyncio.Queue()
        self._unread = 0
        self.closed = False  # CLOSE sent or received, or the link ended
        #: Why the stream ended when the link ended under it (None: closed by a half).
        self.end_reason: Optional[str] = None

    async def send(self, data: bytes) -> bool:
        """Send all of `data` (waiting for credit); False when the stream or link ended."""
        view = memoryview(data)
        while view:
            while self._window <= 0 and not self.closed:
                self._credit.clear()
                await self._credit.wait()
            if self.closed:
                return False
            n = min(self._window, len(view), frames.MAX_PAYLOAD)
            self._window -= n
            await self.link.write(frames.encode_data(self.id, bytes(view[:n])))
            view = view[n:]
        return not self.closed

    async def read(self) -> bytes:
        data = await self._inbox.get()
        if data:
            self._unread -= len(data)
            if not self.closed:
                await self.link.write(frames.encode_credit(self.id, len(data)))
        return data

    def close(self) -> None:
        """This side is done with the connection: tell the other half (once)."""
        if not self.closed:
            self.closed = True
            self.link.write_nowait(frames.encode_close(self.id))
        self._ended()

    def _ended(self, reason: Optional[str] = None) -> None:
        if not self.closed and reason is not None:
            self.end_reason = reason
        self.closed = True
        self._credit.set()
        self._inbox.put_nowait(b"")
        self.link.streams.pop(self.id, None)

    def _deliver(self, data: bytes) -> bool:
        self._unread += len(data)
        if self._unread > frames.INITIAL_WINDOW:
            return False
        self._inbox.put_nowait(data)
        return True


class Link:
    """Both directions of the link. `on_open(stream)` runs (as a task) for each stream the
    other half opens; `on_lock(lock)` for each lock announcement; `on_end(reason)` once
    when the link ends, before its streams are ended (the CLI's half removes its lock
    there: the one disconnect the CLI notices, before any connection sees the end)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 on_open: Optional[Callable[[Stream], Awaitable[None]]] = None,
                 on_lock: Optional[Callable[[Optional[dict]], None]] = None,
                 on_end: Optional[Callable[[str], None]] = None,
                 timeout: Optional[float] = LINK_TIMEOUT, max_streams: Optional[int] = MAX_STREAMS) -> None:
        self._reader = reader
        self._writer = writer
        self._on_open = on_open
        self._on_lock = on_lock
        self._on_end = on_end
        self.timeout = timeout or None
        self.max_streams = max_streams or None
        self._parser = frames.LinkParser()
        self.streams: Dict[int, Stream] = {}
        self._tasks: Set["asyncio.Task[None]"] = set()
        self._next_id = 1
        self.greeted = asyncio.Event()
        self._drain_turn = asyncio.Lock()
        self._heard = False           # a frame (or the greeting) arrived since the last tick
        self._pings = 0
        self._closing: Optional[str] = None
        self._close_asked = asyncio.Event()
        self.ended = False
        self.ended_by_peer = False    # the other half ended its output between frames
        self.refused = 0              # streams of the other half closed at once (past max_streams)
        self.write_nowait(frames.MAGIC)  # before any frame: the other half skips what precedes it

    def write_nowait(self, data: bytes) -> None:
        if not self.ended and not self._writer.is_closing():
            self._writer.write(data)

    async def write(self, data: bytes) -> None:
        """Write, then wait until the pipe took it. Every stream's task writes here, so
        the waits take turns: before Python 3.10 a StreamWriter fails an assertion
        when two tasks wait in `drain()` at once."""
        self.write_nowait(data)
        async with self._drain_turn:
            await drained(self._writer)

    def open_stream(self) -> Stream:
        stream = Stream(self, self._next_id)
        self._next_id += 1
        self.streams[stream.id] = stream
        self.write_nowait(frames.encode_open(stream.id))
        return stream

    def announce(self, lock: Optional[dict]) -> None:
        self.write_nowait(frames.encode_lock(lock))

    def close(self, reason: str) -> None:
        """End the link from this side (a signal, the IDE gone): `run` returns `reason`
        at once, without waiting for the other half to end its side (it may be stalled)."""
        if self._closing is None:
            self._closing = reason
        self._close_asked.set()

    async def run(self) -> str:
        """Read the link until it ends, dies (silent past `timeout`) or is closed; return
        why. `on_end` runs first, then every stream is ended; their tasks get
        `END_GRACE` seconds to finish, then are cancelled."""
        reading = asyncio.ensure_future(self._read())
        keeper = asyncio.ensure_future(self._keep_alive())
        closing = asyncio.ensure_future(self._close_asked.wait())
        reason = "the link ended"
        try:
            await asyncio.wait([reading, keeper, closing], return_when=asyncio.FIRST_COMPLETED)
            if self._closing is not None:
                reason = self._closing
            elif reading.done():
                reason = reading.result()
        finally:
            for task in (reading, keeper, closing):
                task.cancel()
            await asyncio.gather(reading, keeper, closing, return_exceptions=True)
            await self._end(reason)
        return reason

    async def _end(self, reason: str) -> None:
        self.ended = True
        if self._on_end is not None:
            self._on_end(reason)
        for stream in list(self.streams.values()):
            stream._ended(reason)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=END_GRACE)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            self._writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass

    async def _read(self) -> str:
        while True:
            try:
                data = await self._reader.read(256 * 1024)
            except (ConnectionError, OSError) as exc:
                return "the link failed: %s" % exc
            self._heard = True
            events = self._parser.feed(data) if data else self._parser.feed_eof()
            problem = self._dispatch(events)
            if problem:
                return problem
            if not data:
                self.ended_by_peer = True
                return "the link ended (the other half closed it)"

    async def _keep_alive(self) -> None:
        """Ask the other half every interval; return when it stayed silent too long."""
        if self.timeout is None:
            await asyncio.Event().wait()  # (never: run ends otherwise)
        assert self.timeout is not None
        interval = min(MAX_PING_INTERVAL, self.timeout / PINGS_PER_TIMEOUT)
        silent = 0
        while True:
            await asyncio.sleep(interval)
            silent = 0 if self._heard else silent + 1
            self._heard = False
            if silent >= PINGS_PER_TIMEOUT:
                self._closing = ("the link died: nothing from the other half for %g s (%s)"
                                 % (silent * interval, "it stalled, or the connection was lost"
                                    if self.greeted.is_set() else "it never started"))
                return
            if self.greeted.is_set():
                self._pings += 1
                self.write_nowait(frames.encode_ping(struct.pack(">Q", self._pings)))

    def _dispatch(self, events: list) -> Optional[str]:
        for event in events:
            if isinstance(event, frames.LinkError):
                return "the link broke: %s" % event.message
            if isinstance(event, frames.Hello):
                self.greeted.set()
            elif isinstance(event, frames.Ping):
                self.write_nowait(frames.encode_pong(event.payload))
            elif isinstance(event, frames.Open):
                if event.stream in self.streams or self._on_open is None:
                    return "the other half opened stream %d twice or unasked" % event.stream
                if self.max_streams is not None and len(self.streams) >= self.max_streams:
                    self.refused += 1   # at the cap: closed at once; its data will be dropped
                    self.write_nowait(frames.encode_close(event.stream))
                    continue
                stream = self.streams[event.stream] = Stream(self, event.stream)
                task = asyncio.ensure_future(self._on_open(stream))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif isinstance(event, frames.StreamData):
                receiver = self.streams.get(event.stream)
                if receiver is not None and not receiver._deliver(event.data):
                    return "the other half overran stream %d's window" % event.stream
            elif isinstance(event, frames.Credit):
                sender = self.streams.get(event.stream)
                if sender is not None:
                    sender._window += event.count
                    sender._credit.set()
            elif isinstance(event, frames.Close):
                ended = self.streams.get(event.stream)
                if ended is not None:
                    ended._ended()
            elif isinstance(event, frames.LockNews) and self._on_lock is not None:
                self._on_lock(event.lock)
        return None

    def spawn(self, coro: Awaitable[None]) -> "asyncio.Task":
        """A task owned by the link: cancelled when the link ends."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
