"""Newline-delimited JSON framing, sans-IO (ACP.md §1).

Why not `StreamReader.readline()`: its buffer limit defaults to 64 KiB and the agent
sends lines of hundreds of KB; and why not `str.splitlines()`: it also splits on U+2028,
U+2029, form feeds and more, which the agent sends raw inside JSON strings. We split on
the byte `\\n` only, so multi-byte UTF-8 sequences are never cut.
"""
from __future__ import annotations

from typing import Any, List, Union

from .jsonrpc import dumps

#: The longest line accepted. Agent lines of 600 KB have been seen (ACP.md §1); a line
#: over the limit is reported as `LineTooLong` and skipped, never kept in memory.
DEFAULT_MAX_LINE = 64 * 1024 * 1024


class LineTooLong:
    """Placed in the output of `LineSplitter.feed` when a line exceeds the limit.

    The over-long line is skipped up to its terminating newline, so the stream stays in
    sync and later lines are delivered normally.
    """

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size

    def __repr__(self) -> str:
        return "LineTooLong(%d)" % self.size

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LineTooLong) and other.size == self.size


Line = Union[bytes, LineTooLong]


class LineSplitter:
    """Incremental splitter: bytes in, complete lines out (without `\\n` or `\\r\\n`).

    A line ends at the byte `\\n` and nowhere else (ACP.md §1); a `\\r` before it is
    dropped. Blank lines (empty or only whitespace) are dropped, or with `keep_blank`
    given as b"" (for a reader that numbers its lines, as the bridge does). Work per fed
    byte is constant: the search for `\\n` resumes where the previous one stopped, so a
    10 MB line fed in small pieces is not rescanned.
    """

    def __init__(self, max_line: int = DEFAULT_MAX_LINE, keep_blank: bool = False) -> None:
        self.max_line = max_line
        self.keep_blank = keep_blank
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf already known to hold no newline
        self._discarding = 0  # >0 while skipping the rest of an over-long line

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> List[Line]:
        out: List[Line] = []
        if not data:
            return out
        if self._discarding:
            nl = data.find(b"\n")
            if nl < 0:
                self._discarding += len(data)
                return out
            out.append(LineTooLong(self._discarding + nl))
            self._discarding = 0
            data = data[nl + 1:]
        buf = self._buf
        buf += data
        start = 0
        search = self._scanned
        while True:
            nl = buf.find(b"\n", search)
            if nl < 0:
                break
            line = bytes(buf[start:nl])
            if len(line) > self.max_line:
                out.append(LineTooLong(len(line)))
            else:
                self._emit(line, out)
            start = search = nl + 1
        if start:
            del buf[:start]
        self._scanned = len(buf)
        if len(buf) > self.max_line:
            # Do not hold an over-long line in memory: drop it and skip to its end.
            self._discarding = len(buf)
            buf.clear()
            self._scanned = 0
        return out

    def flush(self) -> List[Line]:
        """End of stream: a final line without a newline is still a line."""
        out: List[Line] = []
        if self._discarding:
            out.append(LineTooLong(self._discarding))
            self._discarding = 0
        if self._buf:
            self._emit(bytes(self._buf), out)
            self._buf.clear()
        self._scanned = 0
        return out

    def _emit(self, line: bytes, out: List[Line]) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.strip():
            out.append(line)
        elif self.keep_blank:
            out.append(b"")


def encode(obj: Any) -> bytes:
    """One message as one line. `json` escapes control characters inside strings, so the
    only raw `\\n` in the output is the terminator."""
    return dumps(obj) + b"\n"
