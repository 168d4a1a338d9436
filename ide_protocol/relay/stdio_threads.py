"""The link on this process's stdin and stdout through two threads, for Windows.

On Windows asyncio's Proactor loop takes only pipes opened for overlapped I/O, and the
stdin and stdout a process inherits (from `wsl.exe`, `ssh`, a parent's `Popen`) are not:
`connect_read_pipe` fails there with "invalid handle". So one daemon thread reads stdin
into an `asyncio.StreamReader` and another writes what `ThreadedWriter` is given, with
the `write`/`drain`/`close`/`is_closing` of a `StreamWriter` that the link uses.
Back-pressure holds: `drain` waits until the writing thread has less than
`HIGH_WATER` bytes left.
"""
from __future__ import annotations

import asyncio
import os
import queue
import threading
from typing import Optional, Tuple

READ_SIZE = 64 * 1024
HIGH_WATER = 256 * 1024


def start_reader(loop: asyncio.AbstractEventLoop, fd: int) -> asyncio.StreamReader:
    """A StreamReader fed by a daemon thread that reads `fd` until its end."""
    reader = asyncio.StreamReader(limit=2 ** 20)

    def run() -> None:
        while True:
            try:
                data = os.read(fd, READ_SIZE)
            except OSError:
                data = b""
            try:
                if data:
                    loop.call_soon_threadsafe(reader.feed_data, data)
                else:
                    loop.call_soon_threadsafe(reader.feed_eof)
            except RuntimeError:  # the loop is closed: the program is ending
                return
            if not data:
                return

    threading.Thread(target=run, name="relay-stdin", daemon=True).start()
    return reader


class ThreadedWriter:
    """Writes to `fd` from a daemon thread, in order; `drain` is the back-pressure."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self._loop = loop
        self._fd = fd
        self._queue: "queue.Queue[Optional[bytes]]" = queue.Queue()
        self._pending = 0  # bytes given and not yet written (changed on the loop only)
        self._room = asyncio.Event()
        self._room.set()
        self._closing = False
        self._failed = False
        self._done = asyncio.Event()
        threading.Thread(target=self._run, name="relay-stdout", daemon=True).start()

    def _run(self) -> None:
        while True:
            data = self._queue.get()
            if data is None:
                try:
                    self._loop.call_soon_threadsafe(self._done.set)
                except RuntimeError:
                    pass
                return
            written = True
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view):]
            except OSError:
                written = False
            try:
                self._loop.call_soon_threadsafe(self._written, len(data), written)
            except RuntimeError:
                return

    def _written(self, count: int, ok: bool) -> None:
        self._pending -= count
        self._failed = self._failed or not ok
        if self._pending < HIGH_WATER or self._failed:
            self._room.set()

    def write(self, data: bytes) -> None:
        if self._closing or not data:
            return
        self._pending += len(data)
        if self._pending >= HIGH_WATER:
            self._room.clear()
        self._queue.put(bytes(data))

    async def drain(self) -> None:
        await self._room.wait()
        if self._failed:
            raise ConnectionResetError("the other half stopped reading (stdout closed)")

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._queue.put(None)

    async def wait_closed(self) -> None:
        """Until everything given before `close` is written (a daemon thread would be
        cut off at the interpreter's exit)."""
        await self._done.wait()


def threaded_stdio(loop: asyncio.AbstractEventLoop, fds: Tuple[int, int] = (0, 1)
                   ) -> Tuple[asyncio.StreamReader, ThreadedWriter]:
    return start_reader(loop, fds[0]), ThreadedWriter(loop, fds[1])
