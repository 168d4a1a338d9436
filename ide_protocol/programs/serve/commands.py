"""The words of `serve`'s commands: splitting a command line, line ranges, file text.

Pure functions and one small class, no I/O but reading the file a command names; the
commands themselves are `ide.TerminalIde`'s.
"""
from __future__ import annotations

import os
import re
import stat
from typing import List, Optional, Tuple

from ...common.paths import utf16_column

#: Largest file a command (select, ref, addsel, diag) reads.
MAX_FILE_BYTES = 64 * 1024 * 1024


class CommandError(Exception):
    """A command the user typed is wrong: printed, and serving goes on."""


def split_args(text: str, count: int) -> Tuple[List[str], str]:
    """Take up to `count` words off the front of `text`; return them and the rest.

    Words are separated by blanks; "double" or 'single' quotes group a word with blanks
    in it (a path with spaces). Backslashes are literal, so Windows paths need no
    escaping (which is why this is not `shlex`)."""
    words: List[str] = []
    i, n = 0, len(text)
    while len(words) < count:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        if text[i] in "\"'":
            quote = text[i]
            end = text.find(quote, i + 1)
            if end < 0:
                raise CommandError("unterminated quote in %r" % text)
            words.append(text[i + 1:end])
            i = end + 1
        else:
            start = i
            while i < n and not text[i].isspace():
                i += 1
            words.append(text[start:i])
    return words, text[i:].strip()


_RANGE = re.compile(r"^(\d+)(?::(\d+))?(?:-(\d+)(?::(\d+))?)?$")

Range = Tuple[Tuple[int, int], Tuple[int, int]]  # 1-based (line, column), column a cursor position


def parse_range(text: str) -> Tuple[int, Optional[int], Optional[int], Optional[int], bool]:
    m = _RANGE.match(text)
    if not m:
        raise CommandError("bad range %r: expected L1[:C1]-L2[:C2], L or L:C (1-based)" % text)
    l1 = int(m.group(1))
    c1 = int(m.group(2)) if m.group(2) else None
    l2 = int(m.group(3)) if m.group(3) else None
    c2 = int(m.group(4)) if m.group(4) else None
    return l1, c1, l2, c2, m.group(3) is not None


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class FileText:
    """A file's lines as an editor numbers them (`\\r\\n`, `\\r` and `\\n` end a line; a
    file ending with a newline has a last, empty line), with offsets into its text."""

    def __init__(self, path: str) -> None:
        try:
            st = os.stat(path)
        except (OSError, ValueError) as exc:
            raise CommandError("cannot read %s: %s" % (path, getattr(exc, "strerror", None) or exc))
        if stat.S_ISDIR(st.st_mode):
            raise CommandError("%s is a directory" % path)
        if not stat.S_ISREG(st.st_mode):  # a FIFO or a device would block the loop
            raise CommandError("%s is not a regular file" % path)
        if st.st_size > MAX_FILE_BYTES:
            raise CommandError("%s is larger than %d bytes" % (path, MAX_FILE_BYTES))
        try:
            with open(path, "r", encoding="utf-8", errors="replace", newline="") as f:
                self.text = f.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise CommandError("cannot read %s: %s" % (path, exc.strerror or exc))
        self.lines: List[str] = []
        self.starts: List[int] = []
        pos = 0
        for m in _LINE_BREAK.finditer(self.text):
            self.starts.append(pos)
            self.lines.append(self.text[pos:m.start()])
            pos = m.end()
        self.starts.append(pos)
        self.lines.append(self.text[pos:])

    def resolve(self, spec: str) -> Range:
        """A range spec to checked 1-based positions (see HELP for the forms)."""
        l1, c1, l2, c2, has_end = parse_range(spec)
        if not has_end:
            if c1 is None:  # "L": the whole line
                l2, c1, c2 = l1, 1, None
            else:  # "L:C": a cursor
                l2, c2 = l1, c1
        assert l2 is not None
        self._line(l1)
        start = (l1, 1 if c1 is None else c1)
        end = (l2, len(self._line(l2)) + 1 if c2 is None else c2)
        for line, col in (start, end):
            length = len(self.lines[line - 1])
            if not 1 <= col <= length + 1:
                raise CommandError("column %d is outside line %d, which has columns 1-%d" % (col, line, length + 1))
        if end < start:
            start, end = end, start  # the selection was made backwards
        return start, end

    def _line(self, number: int) -> str:
        if not 1 <= number <= len(self.lines):
            raise CommandError("line %d is outside the file, which has lines 1-%d" % (number, len(self.lines)))
        return self.lines[number - 1]

    def text_of(self, rng: Range) -> str:
        (l1, c1), (l2, c2) = rng
        return self.text[self.starts[l1 - 1] + c1 - 1:self.starts[l2 - 1] + c2 - 1]

    def wire(self, pos: Tuple[int, int]) -> Tuple[int, int]:
        """1-based (line, character column) -> 0-based line and UTF-16 character."""
        line, col = pos
        return line - 1, utf16_column(self.lines[line - 1], col - 1)


def format_range(rng: Range) -> str:
    (l1, c1), (l2, c2) = rng
    return "%d:%d-%d:%d" % (l1, c1, l2, c2)

