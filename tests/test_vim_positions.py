"""The Vim plugin's position rules (editors/vim/python3/copilot_ide_vim/positions.py),
outside Vim: Vim's byte columns to the wire's UTF-16 characters, visual selections'
exact text, quickfix entries' ranges."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "editors", "vim",
                                "python3"))

from copilot_ide_vim import positions as P  # noqa: E402

LINES = ["héllo wörld 😀 end", "second line", "x"]


def line(n: int) -> str:
    return LINES[n - 1]


@pytest.mark.parametrize("byte_col, chars, units", [
    (0, 0, 0), (1, 1, 1), (3, 2, 2),          # "é" is two bytes, one character, one unit
    (2, 1, 1),                                # inside "é": that character's column
    (18, 13, 14),                             # after the emoji: 4 bytes, 1 character, 2 units
    (17, 12, 12),                             # its last byte
    (15, 12, 12),                             # inside the emoji
    (99, 17, 18),                             # past the end: clamped
])
def test_byte_columns_to_characters_and_utf16(byte_col: int, chars: int, units: int) -> None:
    assert P.char_index(LINES[0], byte_col) == chars
    assert P.wire_column(LINES[0], byte_col) == units


def test_invalid_utf8_in_a_buffer_line_counts_bytes_as_vim_has_them() -> None:
    bad = "a\udcffb"                           # Vim's decoding of b"a\xffb"
    assert P.char_index(bad, 1) == 1 and P.char_index(bad, 2) == 2
    assert P.wire_column(bad, 3) == 3


def test_cursor_is_an_empty_selection() -> None:
    assert P.cursor(1, LINES[0], 18) == ("", (0, 14), (0, 14))


def test_characterwise_is_inclusive_unless_selection_is_exclusive() -> None:
    # getpos() columns are 1-based bytes: "w" of "wörld" is byte 8, the emoji byte 15.
    assert P.visual("v", (1, 8), (1, 15), line) == ("wörld 😀", (0, 6), (0, 14))
    assert P.visual("v", (1, 15), (1, 8), line) == ("wörld 😀", (0, 6), (0, 14))  # any order
    assert P.visual("v", (1, 8), (1, 16), line) == ("wörld 😀", (0, 6), (0, 14))  # inside the emoji
    assert P.visual("v", (1, 8), (1, 15), line, inclusive=False) == ("wörld ", (0, 6), (0, 12))
    assert P.visual("v", (1, 8), (2, 3), line) == ("wörld 😀 end\nsec", (0, 6), (1, 3))
    assert P.visual("v", (2, 8), (2, P.MAXCOL), line) == ("line", (1, 7), (1, 11))  # v$


def test_linewise_and_blockwise() -> None:
    assert P.visual("V", (2, 5), (1, 1), line) == ("héllo wörld 😀 end\nsecond line", (0, 0), (1, 11))
    # Blocks are screen cells: "é" takes one, the emoji two, a tab up to the next stop.
    assert P.block(1, 2, 2, 3, line) == ("él\nec", (0, 1), (1, 3))
    assert P.block(1, 2, 10, 14, line) == ("ld 😀\nne", (0, 9), (1, 11))
    assert P.block(1, 2, 14, 15, line) == ("😀 \n", (0, 12), (1, 11))  # half the emoji: all of it
    assert P.block(2, 3, 1, 3, line) == ("sec\nx", (1, 0), (2, 1))       # a short row
    assert P.block(2, 3, 5, None, line) == ("nd line\n", (1, 4), (2, 1))  # `$`; a row left of the block
    assert P.block(1, 1, 1, 3, lambda n: "\tab", tabstop=4) == ("\t", (0, 0), (0, 1))
    assert P.block(1, 1, 5, 5, lambda n: "\tab", tabstop=4) == ("a", (0, 1), (0, 2))
    assert P.block(1, 1, 2, 3, lambda n: "日本語") == ("日本", (0, 0), (0, 2))  # wide: two cells each


def test_quickfix_entry_ranges() -> None:
    text = LINES[0]
    assert P.range_of_entry(text, 0, 0, 0, 1) == ((0, 0), (0, 18))        # no column: the line
    assert P.range_of_entry(text, 8, 0, 0, 1) == ((0, 6), (0, 7))         # one character
    assert P.range_of_entry(text, 15, 0, 0, 1) == ((0, 12), (0, 14))      # the emoji: two units
    assert P.range_of_entry(text, 20, 24, 1, 1) == ((0, 15), (0, 18))     # end column exclusive
    assert P.range_of_entry(text, 8, 4, 2, 1, "second line") == ((0, 6), (1, 3))


def test_severities_and_lines() -> None:
    assert [P.severity(t) for t in ("E", "w", "I", "N", "H", "", "x")] == \
        ["Error", "Warning", "Information", "Hint", "Hint", "Error", "Error"]
    assert P.lines_of("a\r\nb\n") == ["a", "b"]
    assert P.lines_of("a\nb") == ["a", "b"]
    assert P.lines_of("") == []
