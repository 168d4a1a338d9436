"""Small helpers to talk to Vim from Python: literals, messages, option-safe commands."""
from __future__ import annotations

import contextlib
from typing import Any, List, Optional, Tuple

import vim  # type: ignore  # Vim's embedded module: this package runs only inside Vim


def literal(text: str) -> str:
    """`text` as a Vim single-quoted string literal (only `'` needs doubling there)."""
    return "'" + text.replace("'", "''") + "'"


def visible(text: str) -> str:
    """`text` with its control characters in Vim's caret notation (NUL as `^@`): a NUL
    cannot be in a Vim command or string at all, and the rest are shown, not obeyed."""
    return "".join(("^" + chr(ord(c) ^ 0x40)) if ord(c) < 0x20 or c == "\x7f" else c for c in text)


def one_line(text: str) -> str:
    """A message that fits the command line, so Vim never stops for "Press ENTER"."""
    text = visible(" ".join(text.split()))
    width = max(int(vim.eval("&columns")) - 15, 20)
    return text if len(text) <= width else text[:width - 1] + "…"


_RANK = {"None": 0, "WarningMsg": 1, "ErrorMsg": 2}
_held: Optional[List[Tuple[str, str, bool]]] = None  # messages of the current `one_message`


def echo(text: str, highlight: str = "None", remember: bool = False) -> None:
    if _held is not None:
        _held.append((text, highlight, remember))
        return
    _show(text, highlight, remember)


def _show(text: str, highlight: str, remember: bool) -> None:
    command = "echomsg" if remember else "echo"
    vim.command("echohl %s | %s %s | echohl None" % (highlight, command, literal(one_line(text))))


class one_message(contextlib.ContextDecorator):
    """The messages given inside (a timer tick, a command) are shown as one line when it
    ends: two lines from one tick or command would leave Vim at "Press ENTER". The
    line joins them in order (cut to the screen's width), highlighted as the gravest;
    it goes to `:messages` when one of them asked to be remembered."""

    def __enter__(self) -> "one_message":
        global _held
        self._outer = _held is not None
        if not self._outer:
            _held = []
        return self

    def __exit__(self, *exc: Any) -> None:
        global _held
        if self._outer:
            return
        held, _held = _held or [], None
        if held:
            _show(" | ".join(text for text, _, _ in held), max((h for _, h, _ in held), key=lambda h: _RANK.get(h, 0)),
                  any(r for _, _, r in held))


def error(text: str) -> None:
    echo("copilot_ide: " + text, "ErrorMsg", remember=True)


def evaluate(expr: str) -> Any:
    return vim.eval(expr)


def as_int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
