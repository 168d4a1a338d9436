"""The link between the two halves on asyncio: streams with flow control over one pipe.

`frames` owns the format; this is the thin layer that reads and writes it. The link
has one owner task (`run`), which reads frames and hands each stream's bytes to that
stream's inbox; a stream's consumer takes them with `read()`, which gives the bytes'
credit back, so a stream whose consumer is slow stops its sender (after
`frames.INITIAL_WINDOW` bytes) and never the link: one slow stream never blocks another.
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Dict, Optional

from . import frames


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

    def _ended(self) -> None:
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
    other half opens; `on_lock(lock)` for each lock announcement."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 on_open: Optional[Callable[[Stream], Awaitable[None]]] = None,
                 on_lock: Optional[Callable[[Optional[dict]], None]] = None) -> None:
        self._reader = reader
        self._writer = writer
        self._on_open = on_open
        self._on_lock = on_lock
        self._parser = frames.LinkParser()
        self.streams: Dict[int, Stream] = {}
        self._tasks: "set[asyncio.Task]" = set()
        self._next_id = 1
        self.greeted = asyncio.Event()
        self._drain_turn = asyncio.Lock()
        self.ended = False
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

    async def run(self) -> str:
        """Read the link until it ends; return why it ended. Every stream is ended and
        every stream task cancelled before returning."""
        reason = "the link ended"
        try:
            while True:
                try:
                    data = await self._reader.read(256 * 1024)
                except (ConnectionError, OSError) as exc:
                    reason = "the link failed: %s" % exc
                    break
                events = self._parser.feed(data) if data else self._parser.feed_eof()
                problem = self._dispatch(events)
                if problem:
                    reason = problem
                    break
                if not data:
                    break
        finally:
            self.ended = True
            for stream in list(self.streams.values()):
                stream._ended()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            try:
                self._writer.close()
            except (ConnectionError, OSError, RuntimeError):
                pass
        return reason

    def _dispatch(self, events: list) -> Optional[str]:
        for event in events:
            if isinstance(event, frames.LinkError):
                return "the link broke: %s" % event.message
            if isinstance(event, frames.Hello):
                self.greeted.set()
            elif isinstance(event, frames.Open):
                if event.stream in self.streams or self._on_open is None:
                    return "the other half opened stream %d twice or unasked" % event.stream
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
