"""The bridge's one job with positions: an editor's column, in the unit it counts in,
to the wire's UTF-16 character (PROTOCOL.md §4 and §5).

An editor names its unit once, in its hello (docs/BRIDGE.md):

* ``utf-16``: VS Code's, the wire's own: passed through unchanged;
* ``codepoints``: Emacs, Python, most editors' "characters";
* ``bytes``: offsets into the line's UTF-8 bytes (Vim, Kakoune, Helix's byte offsets).

Converting needs the text of the line, which only the editor has (its buffer may be
unsaved), so a message that carries positions in another unit than ``utf-16`` also
carries the text of each line it names. Pure functions: no I/O, no state.
"""
from __future__ import annotations

from typing import Dict, Tuple

from ..common.paths import utf16_column

UNITS = ("utf-16", "codepoints", "bytes")


class PositionError(ValueError):
    """A position the bridge cannot convert; its text is sent to the editor."""


def codepoints_of_bytes(line_text: str, byte_col: int) -> int:
    """How many characters of `line_text` start before UTF-8 byte offset `byte_col`.

    An offset inside a multi-byte character counts that character as not started
    (rounded down to its start); past the end it is clamped to the line."""
    if byte_col <= 0:
        return 0
    data = line_text.encode("utf-8", "surrogatepass")
    if byte_col >= len(data):
        return len(line_text)
    # A truncated character at the end is dropped by "ignore": rounded down.
    return len(data[:byte_col].decode("utf-8", "ignore"))


def to_utf16(unit: str, line_text: str, column: int) -> int:
    """`column` of `line_text`, counted in `unit`, as a UTF-16 column."""
    if unit == "utf-16":
        return column
    if unit == "bytes":
        column = codepoints_of_bytes(line_text, column)
    return utf16_column(line_text, column)


def wire_position(unit: str, position: object, lines: Dict[str, str], what: str) -> Tuple[int, int]:
    """An editor's position object ``{"line": L, "character": C}`` (0-based, C in `unit`)
    as the wire's (line, UTF-16 character). `lines` maps a line number (as a string: JSON
    keys are strings) to its text; it is needed unless the unit is ``utf-16``.
    `what` names the position in errors ("start", "diagnostics[2].end")."""
    if not isinstance(position, dict):
        raise PositionError("%s must be an object {\"line\": L, \"character\": C}" % what)
    line, column = position.get("line"), position.get("character")
    for name, value in (("line", line), ("character", column)):
        if type(value) is not int or value < 0:
            raise PositionError("%s.%s must be an integer >= 0" % (what, name))
    assert isinstance(line, int) and isinstance(column, int)
    if unit == "utf-16":
        return line, column
    text = lines.get(str(line))
    if not isinstance(text, str):
        raise PositionError("%s is on line %d: the message's \"lines\" must hold that line's text to convert "
                            "its %s column" % (what, line, unit))
    return line, to_utf16(unit, text, column)
