"""What `serve` prints: lines made safe for the terminal, through a writer that never blocks.

Two rules live here.

* Peer text is escaped (`common.terminal_text.safe_text`) before it is printed; the only
  escape sequences that reach the terminal are the colours `Output.paint` adds itself.
  `Output.line` takes parts: plain strings are escaped, `Styled` ones (made by `paint`,
  already escaped) are printed as they are.
* Printing never blocks the event loop. With stdout on a pipe nobody reads (or a
  terminal paused with Ctrl-S) a plain `write` blocks once the pipe is full, and with it
  every connection, standard input and the signal handlers. Lines go into a bounded
  queue instead; a thread writes them out. When the queue is full, lines are dropped and
  counted, and the count is printed where they were missing once the reader takes
  output again. Stopping waits for the queue only while output is being taken.
"""
from __future__ import annotations

import collections
import os
import select
import sys
import threading
import time
from typing import Any, Callable, Deque, List, Optional, Union

from ...common.terminal_text import safe_text

#: Bytes of output queued at most while nobody reads (about 10 000 lines of a diff).
DEFAULT_OUTPUT_LIMIT = 1024 * 1024
#: Most bytes handed to one `write` call: what is in flight on top of the queue.
_BATCH = 64 * 1024


class _Dropped:
    """A place in the queue where lines were dropped, and how many."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


def dropped_lines_notice(count: int) -> bytes:
    """`serve`'s line where lines were dropped."""
    return ("[serve: %d line%s of output dropped here: nobody was reading]\n"
            % (count, "" if count == 1 else "s")).encode("ascii")


def _cut(line: bytes, limit: int) -> bytes:
    """The start of a line too long for a buffer of `limit` bytes, cut at a character
    boundary, with a note saying so (fits in `limit`)."""
    note = ("… [serve: this line of %d bytes was cut: longer than the output buffer of %d bytes]\n"
            % (len(line), limit)).encode("utf-8")
    end = max(0, limit // 2 - len(note))
    while 0 < end < len(line) and line[end] & 0xC0 == 0x80:  # not inside a UTF-8 sequence
        end -= 1
    return line[:end] + note


class BoundedWriter:
    """Bytes to a file descriptor from any thread without ever blocking the caller.

    `write` queues and returns at once (False when the data was dropped because the
    queue holds `limit` bytes already). A daemon thread writes the queue out with
    plain blocking `os.write` calls on the descriptor (no Python file object, so a
    thread stuck in a write holds no lock the interpreter needs at exit). A broken
    output (EPIPE, closed) is given up quietly: serving goes on without it.
    """

    def __init__(self, fd: int, limit: int = DEFAULT_OUTPUT_LIMIT,
                 notice: Optional[Callable[[int], bytes]] = None) -> None:
        """`notice(count)`: the line written where `count` lines were dropped, for an
        output of messages (the bridge's JSON lines), whose lines are also never cut:
        one too long for the queue is dropped whole. Without it: `serve`'s notice, and
        a line too long is cut, with a note."""
        self.fd = fd
        self.limit = limit
        self._notice = notice or dropped_lines_notice
        self._whole = notice is not None
        self.dropped = 0          # lines dropped in all (for status and tests)
        self.written = 0          # bytes written in all (progress, seen by close)
        self.broken = False
        self._items: Deque[Union[bytes, _Dropped]] = collections.deque()
        self._queued = 0
        self._closing = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="serve-output", daemon=True)
        self._thread.start()

    def write(self, data: bytes) -> bool:
        if len(data) > self.limit and not self._whole:
            data = _cut(data, self.limit)  # one line past the whole buffer: its start, and why
        with self._cond:
            if self.broken:
                return False
            if self._queued + len(data) > self.limit:
                self.dropped += 1
                tail = self._items[-1] if self._items else None
                if not isinstance(tail, _Dropped):
                    tail = _Dropped()
                    self._items.append(tail)
                tail.count += 1
                return False
            self._items.append(data)
            self._queued += len(data)
            self._cond.notify()
            return True

    def _take(self) -> Optional[List[bytes]]:
        """The next batch to write, or None once closing with nothing left."""
        with self._cond:
            while not self._items and not self._closing:
                self._cond.wait()
            if not self._items:
                return None
            batch: List[bytes] = []
            size = 0
            while self._items and size < _BATCH:
                item = self._items.popleft()
                if isinstance(item, _Dropped):
                    batch.append(self._notice(item.count))  # its count is final: later drops queue anew
                else:
                    self._queued -= len(item)
                    batch.append(item)
                    size += len(item)
            return batch

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            if not self._write_all(b"".join(batch)):
                with self._cond:
                    self.broken = True
                    self._items.clear()
                    self._queued = 0
                    self._cond.notify_all()
                return

    def _write_all(self, data: bytes) -> bool:
        view = memoryview(data)
        while view:
            try:
                count = os.write(self.fd, view)
            except BlockingIOError:
                # The descriptor was made non-blocking by someone sharing it (stdin and
                # stdout on one socket): wait until it takes more.
                try:
                    select.select([], [self.fd], [], 1.0)
                except (OSError, ValueError):
                    return False
                continue
            except InterruptedError:
                continue
            except (OSError, ValueError):
                return False
            view = view[count:]
            with self._cond:
                self.written += count
        return True

    @property
    def idle(self) -> bool:
        with self._cond:
            return not self._items

    def close(self, patience: float = 1.0) -> None:
        """Let the thread finish what is queued while it makes progress; give up after
        `patience` seconds without any (nobody reads: stopping must not wait)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        last, since = -1, time.monotonic()
        while self._thread.is_alive():
            self._thread.join(0.05)
            with self._cond:
                written = self.written
            now = time.monotonic()
            if written != last:
                last, since = written, now
            elif now - since >= patience:
                return


class Styled(str):
    """Text already escaped and coloured by `Output.paint`: `Output.line` prints it as is."""


class Output:
    """The lines `serve` prints. Colour only on a terminal, and never when NO_COLOR is
    set (no-color.org); tests and scripts read the lines through a pipe."""

    COLORS = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35", "cyan": "36",
              "bold": "1", "dim": "2"}

    def __init__(self, fd: Optional[int] = None, color: str = "auto", limit: int = DEFAULT_OUTPUT_LIMIT) -> None:
        if fd is None:
            try:
                fd = sys.stdout.fileno()
            except (AttributeError, OSError, ValueError):
                fd = 1
        self.writer = BoundedWriter(fd, limit)
        if color == "always":
            self.color = True
        elif color == "never":
            self.color = False
        else:
            try:
                tty = os.isatty(fd)
            except OSError:
                tty = False
            self.color = tty and not os.environ.get("NO_COLOR")

    def paint(self, text: Any, *styles: str) -> Styled:
        """`text` escaped, then coloured (when colour is on)."""
        safe = safe_text(text)
        if not self.color or not styles:
            return Styled(safe)
        codes = ";".join(self.COLORS[s] for s in styles)
        return Styled("\x1b[%sm%s\x1b[0m" % (codes, safe))

    def line(self, *parts: Any) -> None:
        """Print one line made of `parts`: `Styled` ones as they are, others escaped."""
        text = "".join(p if isinstance(p, Styled) else safe_text(p) for p in parts)
        self.writer.write((text + "\n").encode("utf-8", errors="backslashreplace"))

    def error(self, *parts: Any) -> None:
        self.line(self.paint("error: ", "red", "bold"), *parts)

    def close(self) -> None:
        self.writer.close()
