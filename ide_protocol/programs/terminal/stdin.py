"""`serve`'s standard input as lines for the event loop (commands typed or piped in)."""
from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from typing import Any, Optional


class StdinReader:
    """Lines of standard input for the loop, without a thread where POSIX allows.

    A pipe, a socket or a terminal goes through `loop.connect_read_pipe`. A terminal is
    opened again by name so that the non-blocking mode the loop sets does not leak into
    stdout (a terminal's stdin and stdout often share one open file description, and a
    non-blocking stdout makes big writes fail). A regular file never blocks and is read
    directly. Anything else (Windows, /dev/null) is read by a daemon thread.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int = 0) -> None:
        self.loop = loop
        self.fd = fd
        self._reader: Optional[asyncio.StreamReader] = None
        self._transport: Any = None
        self._file: Any = None
        self._queue: Optional["asyncio.Queue[bytes]"] = None
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

        def run() -> None:
            try:
                stream = os.fdopen(os.dup(fd), "rb")
            except OSError:
                stream = None
            while True:
                try:
                    line = stream.readline() if stream is not None else b""
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
            assert self._queue is not None
            line = await self._queue.get()
        return line or None

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

