"""Small helpers to talk to Vim from Python: literals, messages, option-safe commands."""
from __future__ import annotations

from typing import Any

import vim  # type: ignore  # Vim's embedded module: this package runs only inside Vim


def literal(text: str) -> str:
    """`text` as a Vim single-quoted string literal (only `'` needs doubling there)."""
    return "'" + text.replace("'", "''") + "'"


def one_line(text: str) -> str:
    """A message that fits the command line, so Vim never stops for "Press ENTER"."""
    text = " ".join(text.split())
    width = max(int(vim.eval("&columns")) - 15, 20)
    return text if len(text) <= width else text[:width - 1] + "…"


def echo(text: str, highlight: str = "None", remember: bool = False) -> None:
    command = "echomsg" if remember else "echo"
    vim.command("echohl %s | %s %s | echohl None" % (highlight, command, literal(one_line(text))))


def error(text: str) -> None:
    echo("copilot_ide: " + text, "ErrorMsg", remember=True)


def evaluate(expr: str) -> Any:
    return vim.eval(expr)


def as_int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
