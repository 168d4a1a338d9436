"""Text from a peer made safe to print on a terminal: the one function for it.

Whatever a client or an agent sends (a tab name, a path, the lines of a proposed diff,
a session name, a tool's output) may contain terminal control sequences: `ESC ] 0;…
BEL` retitles the window, `ESC [1A ESC [2K` erases the line above, `ESC [8m` makes
the following text invisible, a carriage return lets a line overwrite itself, and the
Unicode bidirectional controls reorder what is shown ("Trojan Source"). Any of these
lets a peer rewrite or hide lines of a diff a person is reviewing.

`safe_text` keeps newline and tab and shows every other such character as a visible
escape (`\\x1b`, `\\r`, `\\u202e`): the person sees that something odd was sent, and
the terminal executes nothing. Every program here (`serve`, the tracer, the client,
the checker, the doctor, the ACP command line) prints peer text only through it (the
one-line form, for the lock-file and server text of `client`, `check`, `trace` and
`doctor`: `programs.options.one_line`); styling added by the program itself is
applied after escaping.
"""
from __future__ import annotations

import re
from typing import Dict

__all__ = ["safe_text"]

# C0 controls except tab (0x09) and newline (0x0a), DEL, the C1 controls (which some
# terminals execute as CSI, OSC, ...), and the Unicode controls that change the order or
# the lines of what is displayed: bidirectional embeddings, overrides and isolates, the
# marks LRM/RLM/ALM, and the line and paragraph separators. Then the invisible
# characters that carry nothing a reader of code needs but can hide text: the soft
# hyphen, the zero-width space, the word joiner and the invisible operators, the
# zero-width no-break space (BOM), and the tag characters (U+E0000-E007F: text no
# terminal shows, yet a program reading the file, a model among them, does). The
# joiners ZWJ and ZWNJ stay: emoji and several scripts need them. Lone surrogates (JSON
# can carry them) cannot be encoded for the terminal at all: shown escaped too.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u061c\u200b\u200e\u200f\u2028\u2029"
                     "\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ud800-\udfff\U000e0000-\U000e007f]")

_UNSAFE_OR_NEWLINE = re.compile(_UNSAFE.pattern[:-1] + "\n]")

_NAMED: Dict[str, str] = {"\n": "\\n", "\r": "\\r", "\x0b": "\\v", "\x0c": "\\f", "\x08": "\\b", "\x07": "\\a",
                          "\x00": "\\0"}


def _escape(match: "re.Match[str]") -> str:
    char = match.group(0)
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code if code < 0x10000 else "\\U%08x" % code


def safe_text(text: object, multiline: bool = True) -> str:
    """`text` (made a `str` first) with every control character but newline and tab
    shown escaped. `multiline=False` escapes newlines too: for one-line fields (a tab
    name, a path) where a newline would let a peer print a line of its own making.
    Cheap when there is nothing to escape (one regex search)."""
    if not isinstance(text, str):
        text = str(text)
    unsafe = _UNSAFE if multiline else _UNSAFE_OR_NEWLINE
    if unsafe.search(text) is None:
        return text
    return unsafe.sub(_escape, text)
