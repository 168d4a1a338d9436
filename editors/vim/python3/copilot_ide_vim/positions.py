"""Vim positions to wire positions: pure functions, no `vim` module (tested outside Vim).

Vim counts columns in bytes of the buffer's UTF-8 text, 1-based in `getpos()` and
0-based in `window.cursor`, and lines 1-based. The wire wants 0-based lines and 0-based
UTF-16 characters (PROTOCOL.md §4 and §5), so every column goes bytes -> code points ->
UTF-16 units here, in one place.
"""
from __future__ import annotations

import unicodedata
from typing import Callable, List, Optional, Tuple

# Vim's `python3` decodes buffer lines with this error handler, so encoding back with it
# gives the buffer's exact bytes, even for a line that is not valid UTF-8.
_ERRORS = "surrogateescape"

#: `getpos()` reports "to the end of the line" (`v$`, `$` in a block) with a huge column.
MAXCOL = 2 ** 31 - 1

Position = Tuple[int, int]  # (0-based line, 0-based UTF-16 character): the wire's


def utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def char_index(line: str, byte_col: int) -> int:
    """How many characters of `line` start before byte offset `byte_col` (0-based): the
    code point column of the character that byte belongs to; clamped to the line."""
    if byte_col <= 0:
        return 0
    data = line.encode("utf-8", _ERRORS)
    if byte_col >= len(data):
        return len(line)
    # The character holding byte `byte_col` is the last one whose UTF-8 lead byte (any
    # byte but a 10xxxxxx continuation byte) is at or before it.
    return sum(1 for b in data[:byte_col + 1] if b & 0xC0 != 0x80) - 1


def wire_column(line: str, byte_col: int) -> int:
    """UTF-16 column of byte offset `byte_col` (0-based) of `line`."""
    return utf16_units(line[:char_index(line, byte_col)])


def cursor(line_no: int, line: str, byte_col: int) -> Tuple[str, Position, Position]:
    """An empty selection at the cursor (`line_no` 1-based, `byte_col` 0-based)."""
    pos = (line_no - 1, wire_column(line, byte_col))
    return "", pos, pos


def visual(mode: str, start: Tuple[int, int], end: Tuple[int, int], get_line: Callable[[int], str],
           inclusive: bool = True) -> Tuple[str, Position, Position]:
    """The exact text and wire range of a visual selection.

    `mode` is Vim's `mode()` first character (`v` or `V`; blockwise is `block()`),
    `start` and `end` the two ends as `getpos()` gives them (1-based line, 1-based byte
    column) in any order, `get_line(n)` the text of 1-based line n, `inclusive` False
    under `'selection'=exclusive` (the character under the end is then not selected).
    Linewise: whole lines, ending at the end of the last line.
    """
    (l1, c1), (l2, c2) = sorted([start, end])
    if mode == "V":
        lines = [get_line(n) for n in range(l1, l2 + 1)]
        return "\n".join(lines), (l1 - 1, 0), (l2 - 1, utf16_units(lines[-1]))
    first, last = get_line(l1), get_line(l2)
    i1 = char_index(first, c1 - 1)
    i2 = char_index(last, c2 - 1) + (1 if inclusive else 0)
    i2 = min(i2, len(last))
    if l1 == l2:
        i2 = max(i2, i1)
        text = first[i1:i2]
    else:
        middle = [get_line(n) for n in range(l1 + 1, l2)]
        text = "\n".join([first[i1:]] + middle + [last[:i2]])
    return text, (l1 - 1, utf16_units(first[:i1])), (l2 - 1, utf16_units(last[:i2]))


def cell_width(ch: str, cell: int, tabstop: int) -> int:
    """How many screen cells `ch` takes when it starts at 0-based cell `cell`, as Vim
    draws it: a tab to the next tab stop, East Asian wide and fullwidth characters
    (CJK, most emoji) two, combining marks none, everything else one."""
    if ch == "\t":
        return tabstop - cell % max(tabstop, 1)
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def block(l1: int, l2: int, left: int, right: Optional[int], get_line: Callable[[int], str],
          tabstop: int = 8) -> Tuple[str, Position, Position]:
    """A blockwise selection: lines `l1`..`l2` (1-based), screen cells `left`..`right`
    (1-based, inclusive, as `virtcol()` counts them; `right` None for a block that goes
    to each line's end, `$`). Each row is the characters that touch those cells; the
    range runs from the top row's first to the bottom row's last character."""
    rows: List[str] = []
    first = last = 0
    for n in range(l1, l2 + 1):
        line = get_line(n)
        cell, i1, i2 = 0, None, None
        for i, ch in enumerate(line):
            width = cell_width(ch, cell, tabstop)
            start, end = cell + 1, cell + max(width, 1)
            if end >= left and (right is None or start <= right):
                i1 = i if i1 is None else i1
                i2 = i + 1
            cell += width
        i1 = len(line) if i1 is None else i1
        i2 = i1 if i2 is None else i2
        rows.append(line[i1:i2])
        if n == l1:
            first = utf16_units(line[:i1])
        if n == l2:
            last = utf16_units(line[:i2])
    return "\n".join(rows), (l1 - 1, first), (l2 - 1, last)


def lines_of(text: str) -> List[str]:
    """A file's text as Vim buffer lines (no trailing empty line for a final newline)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def range_of_entry(line: str, col: int, end_col: int, end_line: Optional[int], line_no: int,
                   end_text: Optional[str] = None) -> Tuple[Position, Position]:
    """A quickfix/location entry's wire range. `col`/`end_col` are 1-based byte columns
    (0: unknown), `end_col` exclusive. No column: the whole line; a column but no end:
    the one character there."""
    start_line = max(line_no - 1, 0)
    if col <= 0:
        return (start_line, 0), (start_line, utf16_units(line))
    start = (start_line, wire_column(line, col - 1))
    if end_col > 0:
        last = end_text if end_text is not None and end_line and end_line != line_no else line
        end_no = (end_line - 1) if end_line and end_line >= line_no else start_line
        return start, (end_no, wire_column(last, end_col - 1))
    i = char_index(line, col - 1)
    return start, (start_line, utf16_units(line[:min(i + 1, len(line))]))


SEVERITIES = {"E": "Error", "W": "Warning", "I": "Information", "N": "Hint", "H": "Hint"}


def severity(entry_type: str) -> str:
    """A quickfix `type` as the wire's severity; an untyped entry (most `:make` output
    without `%t` in 'errorformat') counts as an error."""
    return SEVERITIES.get((entry_type or "E")[:1].upper(), "Error")

