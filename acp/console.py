"""Lines from stdin without blocking the event loop: chat prompts and permission answers.

How: `loop.add_reader` on the stdin file descriptor, then `os.read` of what is ready,
split on `\\n` only. That works for a terminal and for a pipe (`echo 1 | python -m acp
...`), and a pending read can be cancelled (a cancelled turn stops waiting for its
permission answer; nothing is left blocked in a thread at exit). Where `add_reader`
cannot watch the descriptor — a regular file redirected with `<` (epoll refuses files,
and they never block anyway) — we read it directly; on an event loop without
`add_reader` (Windows' proactor) one executor call per line is the fallback.
"""
from __future__ import annotations

import asyncio
import os
import sys
from typing import IO, Optional


class Console:
    """Async line reader over one file descriptor (shared by every reader of stdin)."""

    _stdin: Optional["Console"] = None

    def __init__(self, fd: int, encoding: str = "utf-8") -> None:
        self.fd = fd
        self.encoding = encoding
        self._buf = b""
        self._eof = False
        self._lock: Optional[asyncio.Lock] = None

    @classmethod
    def for_stdin(cls, stream: Optional[IO[str]] = None) -> "Console":
        """The one console of this process's stdin (two readers would split its bytes)."""
        if cls._stdin is None:
            stream = stream or sys.stdin
            cls._stdin = cls(stream.fileno(), getattr(stream, "encoding", None) or "utf-8")
        return cls._stdin

    def isatty(self) -> bool:
        try:
            return os.isatty(self.fd)
        except OSError:
            return False

    async def readline(self) -> Optional[str]:
        """The next line without its terminator, or None at end of input."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            while b"\n" not in self._buf and not self._eof:
                data = await self._read_some()
                if data:
                    self._buf += data
                else:
                    self._eof = True
            if b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
            elif self._buf:
                line, self._buf = self._buf, b""
            else:
                return None
            return line.rstrip(b"\r").decode(self.encoding, "replace")

    async def _read_some(self) -> bytes:
        loop = asyncio.get_event_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def on_ready() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(self.fd, on_ready)
        except NotImplementedError:  # no add_reader on this loop
            return await loop.run_in_executor(None, os.read, self.fd, 65536)
        except (PermissionError, ValueError, OSError):  # a regular file: reads never block
            return os.read(self.fd, 65536)
        try:
            await ready
        finally:
            loop.remove_reader(self.fd)
        try:
            return os.read(self.fd, 65536)
        except BlockingIOError:
            return await self._read_some()


def write_stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()
