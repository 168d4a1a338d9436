"""Standard input for the event loop: `serve`'s lines (commands typed or piped in), the
bridge's chunks (which it splits into lines itself, bounded: `wire.ndjson`)."""
from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from typing import Any, List, Optional

#: The most `read` returns at once, and what the thread reads at a time.
READ_SIZE = 64 * 1024
#: Pieces the reading thread may have handed over and not yet taken (back-pressure).
_THREAD_AHEAD = 8


class StdinReader:
    """Lines of standard input for the loop, without a thread where POSIX allows.

    A pipe, a socket or a terminal goes through `loop.connect_read_pipe`. A terminal is
    opened again by name so that the non-blocking mode the loop sets does not leak into
    stdout (a terminal's stdin and stdout often share one open file description, and a
    non-blocking stdout makes big writes fail). A regular file never blocks and is read
    directly. Anything else (Windows, /dev/null) is read by a daemon thread, in pieces
    of at most `READ_SIZE` bytes (a line longer than that comes in several), and at most
    `_THREAD_AHEAD` pieces ahead of the loop.

    `readline` gives whole lines; `read` gives chunks of at most `READ_SIZE` bytes, for a
    reader that bounds its lines itself. A reader uses one or the other.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int = 0) -> None:
        self.loop = loop
        self.fd = fd
        self._reader: Optional[asyncio.StreamReader] = None
        self._transport: Any = None
        self._file: Any = None
        self._queue: Optional["asyncio.Queue[bytes]"] = None
        self._room = threading.Semaphore(_THREAD_AHEAD)
        self._restore_blocking = False
        self.mode = ""

    async def open(self) -> None:
        try:
            st = os.fstat(self.fd)
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode):
            self._file = os.fdopen(os.dup(self.fd), "rb")
            self.mode = "file"
            return
        if sys.platform != "win32" and st is not None and _pollable(self.fd):
            pipe = None
            try:
                if os.isatty(self.fd):
                    pipe = open(os.ttyname(self.fd), "rb", buffering=0)
                    self.mode = "tty"
                else:
                    pipe = os.fdopen(os.dup(self.fd), "rb", buffering=0)
                    self.mode = "pipe"
                    self._restore_blocking = True  # the dup shares the description
                reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
                self._transport, _ = await self.loop.connect_read_pipe(
                    lambda: asyncio.StreamReaderProtocol(reader), pipe)
                self._reader = reader
                return
            except (OSError, ValueError, NotImplementedError):
                if pipe is not None:
                    pipe.close()
                self._restore()
        self._start_thread()

    def _start_thread(self) -> None:
        """The fallback: a daemon thread blocks on readline and hands lines to the loop."""
        self.mode = "thread"
        queue: "asyncio.Queue[bytes]" = asyncio.Queue()
        self._queue = queue
        loop = self.loop
        fd = self.fd
        room = self._room

        def run() -> None:
            try:
                stream = os.fdopen(os.dup(fd), "rb")
            except OSError:
                stream = None
            while True:
                room.acquire()  # released as the loop takes a piece
                try:
                    line = stream.readline(READ_SIZE) if stream is not None else b""
                except (OSError, ValueError):
                    line = b""
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, line)
                except RuntimeError:  # the loop is closed: we are exiting
                    return
                if not line:
                    return

        threading.Thread(target=run, name="serve-stdin", daemon=True).start()

    async def readline(self) -> Optional[bytes]:
        """One line (terminator included), or None at the end of input."""
        if self._file is not None:
            line = self._file.readline()
        elif self._reader is not None:
            line = await self._reader.readline()
        else:
            pieces: List[bytes] = []
            while not pieces or (pieces[-1] and not pieces[-1].endswith(b"\n")):
                pieces.append(await self._piece())
            line = b"".join(pieces)
        return line or None

    async def read(self) -> bytes:
        """The next bytes of input, at most `READ_SIZE`; b"" at its end."""
        if self._file is not None:
            return bytes(self._file.read1(READ_SIZE))
        if self._reader is not None:
            return await self._reader.read(READ_SIZE)
        return await self._piece()

    async def _piece(self) -> bytes:
        assert self._queue is not None
        piece = await self._queue.get()
        if piece:
            self._room.release()
        else:
            self._queue.put_nowait(piece)  # the end, for every later call too
        return piece

    def _restore(self) -> None:
        if self._restore_blocking:
            try:
                os.set_blocking(self.fd, True)
            except (OSError, AttributeError):
                pass
            self._restore_blocking = False

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._file is not None:
            self._file.close()
            self._file = None
        self._restore()


def _pollable(fd: int) -> bool:
    """Whether the loop's selector accepts `fd`. `connect_read_pipe` takes any character
    device but only registers it later, in a callback, where epoll's refusal of
    /dev/null (EPERM) would be an unhandled error and input would never arrive."""
    import selectors

    selector = selectors.DefaultSelector()
    try:
        selector.register(fd, selectors.EVENT_READ)
        return True
    except (OSError, ValueError):
        return False
    finally:
        selector.close()

